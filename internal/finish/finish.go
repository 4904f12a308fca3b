package finish

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

// The scripts that end a run. redis.Script runs a script with EVALSHA and
// falls back to EVAL when the server's script cache lacks it (a fresh
// server, SCRIPT FLUSH, a failover).
var (
	//go:embed finish.lua
	finishSource string
	//go:embed count.lua
	countSource string
	//go:embed pause.lua
	pauseSource string

	// finishScript releases a lock while it holds our token and writes
	// what the run's end changes; given the lock's key alone, it only
	// releases.
	finishScript = script.New(clock.Lua, finishSource)
	// countScript counts a run's end in the state hash alone, and
	// pauseScript sets a cooldown or backoff key alone: finish.lua's halves
	// for where an item's keys live on different servers.
	countScript = script.New(countSource)
	pauseScript = script.New(clock.Lua, pauseSource)
)

// Source is finish.lua's text, for a script that finishes a run and goes
// on in the same call (internal/take's FinishThenLook): its KEYS and ARGV
// are those that Call returns, and its reply is the one ReadReply reads. It
// reads Redis' clock with clock.Lua's redisNow, which such a script starts
// with.
func Source() string { return finishSource }

// Client is the part of the Redis client that recording and finishing a
// run need.
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

// Finisher ends runs: it releases the run's lock and writes what the end
// changes, in one round trip where one script may touch all of an item's
// keys: the item's cooldown or failure backoff and its count of consecutive
// failures (see Schedule), and its state hash and end event (see Recorder).
type Finisher struct {
	Client Client
	// Record says what to record of a run, and under which keys; where
	// they are not colocated (see schema.Keys), each key gets its own
	// commands.
	Record   *Recorder
	Schedule Schedule
	// Jitter returns backoff jitter factors: JitterFactor, or a test's; nil
	// means none.
	Jitter func() string
	// Clock puts a run's times on Redis' clock, the fleet's one clock (see
	// internal/clock), before a schedule's slot is found from them or they
	// are recorded; nil takes the host's clock to be right.
	Clock *clock.Clock
}

// Reply is what finishing a run did, as the finish script reports it.
type Reply struct {
	// Released is set when our lock was deleted; unset when it was gone or
	// someone else's by then.
	Released bool
	// Failures is the item's consecutive failures after the run, or -1 when
	// the run did not change them.
	Failures int64
	// Delay is the failure delay set, or 0.
	Delay time.Duration
	// Problem says why the count of consecutive failures could not be
	// written, or is "".
	Problem string
}

// ErrInPart marks a finish that failed after some of its commands may have
// been applied: sent again, it could count the run twice.
var ErrInPart = errors.New("the run's end may be recorded in part")

// Resend reports whether a finish that failed with err may be sent again:
// the server refused it unapplied, or could not be reached (see
// redisconn.NotApplied), and none of it was applied.
func Resend(err error) bool {
	return redisconn.NotApplied(err) && !errors.Is(err, ErrInPart)
}

// Finish ends the run that ended as end says and held the lock lockKey
// with token. The lock is deleted only if it still holds token; the rest
// is written either way, since a lost lock is a failed run. One script does
// it all, or nothing, where the item's keys are colocated; elsewhere a
// failed finish may have been applied in part (ErrInPart).
func (f *Finisher) Finish(ctx context.Context, lockKey, token string, end End) (Reply, error) {
	end = f.onRedisClock(end)
	factor := f.jitter()
	if !f.Record.Keys.Colocated {
		return f.finishEach(ctx, lockKey, token, end, factor)
	}
	keys, args := f.call(lockKey, token, end, factor)
	reply, err := finishScript.Run(ctx, f.Client, keys, args...).Result()
	if err != nil && redisconn.SlotMoving(err) {
		// While the slot moves to another Cluster node, a command that
		// names several of its keys is refused (TRYAGAIN) until all of them
		// have arrived, and the script has not run at all. One key per
		// command follows the move (ASK) instead: without this, the lock
		// would be left to expire, and the run's cooldown or backoff, its
		// count of consecutive failures and its record would be lost.
		return f.finishEach(ctx, lockKey, token, end, factor)
	}
	if err != nil {
		return Reply{}, redisconn.Wrap("finish the run of "+strconv.Quote(lockKey), err)
	}
	return ReadReply(lockKey, reply)
}

// Call is the call of finish.lua that Finish sends where one script may
// touch all of an item's keys: its keys and arguments, for a script that
// sends it with more (internal/take's FinishThenLook), whose reply
// ReadReply reads. ok is unset where Finish sends per-key commands instead.
func (f *Finisher) Call(lockKey, token string, end End) (keys []string, args []any, ok bool) {
	if !f.Record.Keys.Colocated {
		return nil, nil, false
	}
	keys, args = f.call(lockKey, token, f.onRedisClock(end), f.jitter())
	return keys, args, true
}

// onRedisClock is end with its times, read on this host's clock, on Redis'
// clock: a schedule's slot is the same whichever host finds it, and a
// record's times compare with those that the scripts write. Where the take
// said when Redis took the item, the run starts then, and ends as long
// after as this host counted between its take and its end: both times
// then stand on Redis' own reading, not on this host's estimate of it,
// which may be minutes wrong (a one-shot run without --schedule reads no
// TIME, and an item's own settings may give it a schedule).
func (f *Finisher) onRedisClock(end End) End {
	if !end.Taken.IsZero() && !end.Started.IsZero() && !end.At.IsZero() {
		end.At, end.Started = end.Taken.Add(max(end.At.Sub(end.Started), 0)), end.Taken
		return end
	}
	end.At, end.Started = f.Clock.OnRedis(end.At), f.Clock.OnRedis(end.Started)
	if !end.Taken.IsZero() {
		end.Started = end.Taken
	}
	return end
}

// scheduleOf is the schedule that end's finish sets: the item's own, or
// the Finisher's.
func (f *Finisher) scheduleOf(end End) Schedule {
	if end.Schedule != nil {
		return *end.Schedule
	}
	return f.Schedule
}

// jitter is the factor of a failure delay for one finish: Jitter's, or 1.
func (f *Finisher) jitter() string {
	if f.Jitter == nil {
		return "1"
	}
	return f.Jitter()
}

// call is Call, with factor the jitter of a failure delay.
func (f *Finisher) call(lockKey, token string, end End, factor string) ([]string, []any) {
	rec, item := f.Record, end.Item
	keys := []string{lockKey, rec.Keys.State(item), rec.Keys.Cooldown(item), rec.Keys.Backoff(item), rec.Keys.Due(), rec.Keys.Cancel(item), rec.Keys.Running()}
	if rec.EventsMaxLen > 0 {
		keys = append(keys, rec.Keys.Events())
	}
	// The free text and the output follow the words, which say whether
	// they count (reason=1, output=1).
	var reason, by string
	if end.Cancel != nil {
		reason, by = end.Cancel.Reason, end.Cancel.By
	}
	var stdout, stderr []byte
	if end.Output != nil {
		stdout, stderr = end.Output.Stdout, end.Output.Stderr
	}
	words := rec.finishWords(end) + f.scheduleWords(end, factor) + wakeWords
	return keys, []any{token, item, words, reason, by, stdout, stderr}
}

// wakeWords are finish.lua's options for the token that wakes an idle
// worker when a run's end leaves something takeable now (see
// schema.Keys.Wake).
var wakeWords = " wake=" + strconv.Itoa(schema.WakeMost) + " wake_ttl=" + strconv.FormatInt(schema.WakeTTL.Milliseconds(), 10)

// ReadReply reads finish.lua's reply to the finish of the run that held
// lockKey.
func ReadReply(lockKey string, got any) (Reply, error) {
	reply, _ := got.([]any)
	if len(reply) != 4 {
		return Reply{}, redisconn.Wrap("finish the run of "+strconv.Quote(lockKey), fmt.Errorf("unexpected reply from finish.lua: %v", got))
	}
	released, _ := reply[0].(int64)
	failures, _ := reply[1].(int64)
	delay, _ := reply[2].(int64)
	problem, _ := reply[3].(string)
	out := Reply{Released: released == 1, Failures: failures, Problem: problem}
	if delay > 0 {
		out.Delay = time.Duration(delay) * time.Millisecond
	}
	return out, nil
}

// scheduleWords are finish.lua's options for the schedule after end, with
// factor the jitter of a failure delay.
func (f *Finisher) scheduleWords(end End, factor string) string {
	s := f.scheduleOf(end)
	var b strings.Builder
	if cooldown := s.CooldownAfter(end); cooldown > 0 {
		b.WriteString(" cooldown=" + strconv.FormatInt(cooldown.Milliseconds(), 10))
	}
	if slot := s.NextSlot(end); !slot.IsZero() {
		b.WriteString(" next_slot=" + millis(slot))
	}
	if s.Backoff != (Backoff{}) {
		b.WriteString(" backoff_min=" + strconv.FormatInt(s.Backoff.Min.Milliseconds(), 10))
		b.WriteString(" backoff_max=" + strconv.FormatInt(s.Backoff.Max.Milliseconds(), 10))
		b.WriteString(" jitter=" + factor)
	}
	return b.String()
}

// finishEach is finish with commands on one key each (count.lua, pause.lua,
// the record's plain commands, finish.lua with the lock alone), for where
// an item's keys may live on different servers, or where their slot is on
// the move between Cluster nodes (see finish). The count, the cooldown and
// the record go in one pipeline; a failure's backoff depends on the count,
// so it needs a round trip of its own. The lock is released last wherever a
// pause is set, so that a worker that takes it afterwards finds the pause
// (see internal/take's each.go): in a round trip of its own, since a
// cluster pipeline sends to each node at once, in no order across nodes.
// That makes one round trip after an interrupted run, or a run that sets no
// pause; two after a success with --cooldown; three after a failure with
// --failure-backoff. Scripts in a pipeline go as EVAL, with their text: a
// pipeline cannot fall back from EVALSHA, and each script is a few hundred
// bytes.
func (f *Finisher) finishEach(ctx context.Context, lockKey, token string, end End, factor string) (_ Reply, err error) {
	// Once a command of the pipeline was applied (or may have been: its
	// reply was lost), a failure that follows leaves the end in part.
	var applied bool
	defer func() {
		if err != nil && applied {
			err = fmt.Errorf("%w (%w)", err, ErrInPart)
		}
	}()
	s, rec, item, res := f.scheduleOf(end), f.Record, end.Item, end.Result
	out := Reply{Failures: -1}
	cooldownFor := s.CooldownAfter(end)
	cooling := cooldownFor > 0
	backingOff := end.Failed() && s.Backoff != (Backoff{})

	pipe := f.Client.Pipeline()
	var count, cooldown, release *redis.Cmd
	switch {
	case res == schema.ResultSuccess:
		count = countScript.Eval(ctx, pipe, []string{rec.Keys.State(item)}, "success", rec.StateTTL.Milliseconds())
	case end.Failed():
		count = countScript.Eval(ctx, pipe, []string{rec.Keys.State(item)}, "failure", rec.StateTTL.Milliseconds())
	}
	if cooling {
		args := []any{token, cooldownFor.Milliseconds()}
		if slot := s.NextSlot(end); !slot.IsZero() {
			args = append(args, millis(slot))
		}
		cooldown = pauseScript.Eval(ctx, pipe, []string{rec.Keys.Cooldown(item)}, args...)
	}
	// The record's own errors are left unread, as finish.lua's pcall
	// leaves them: a run never depends on its record.
	rec.queueFinish(ctx, pipe, item, token, end, s.NextSlot(end))
	if !cooling && !backingOff {
		release = finishScript.Eval(ctx, pipe, []string{lockKey}, token, item, "")
	}
	cmds, _ := pipe.Exec(ctx)
	applied = slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return !redisconn.NotApplied(c.Err()) })

	if cooldown != nil && cooldown.Err() != nil {
		return out, redisconn.Wrap("set the cooldown of "+quoteItem(item), cooldown.Err())
	}
	if count != nil {
		if err := f.counted(ctx, count, end, token, backingOff, factor, &out); err != nil {
			return out, err
		}
	}
	out.Released, err = f.released(ctx, release, lockKey, token, item)
	return out, err
}

// counted reads count.lua's reply (count) into out: the consecutive
// failures of a failed end, or the problem that kept them from being
// counted. When backingOff, it sets the item's backoff for the count.
func (f *Finisher) counted(ctx context.Context, count *redis.Cmd, end End, token string, backingOff bool, factor string, out *Reply) error {
	n, err := count.Int64()
	problem, err := countProblem(err)
	if err != nil {
		return redisconn.Wrap("count the runs of "+quoteItem(end.Item), err)
	}
	out.Problem = problem
	if end.Failed() {
		if problem == "" {
			out.Failures = n
		} else {
			// Back off as after a first failure: the count is unreadable.
			n = 1
		}
	}
	if !backingOff {
		return nil
	}
	out.Delay = Delay(n, f.Schedule.Backoff, factor)
	if err := pauseScript.Eval(ctx, f.Client, []string{f.Record.Keys.Backoff(end.Item)}, token, out.Delay.Milliseconds()).Err(); err != nil {
		return redisconn.Wrap("set the backoff of "+quoteItem(end.Item), err)
	}
	return nil
}

// released reads the reply of the release that finishEach's pipeline sent
// (release), or, where it sent none because a cooldown or backoff had to be
// set first, releases the lock now.
func (f *Finisher) released(ctx context.Context, release *redis.Cmd, lockKey, token, item string) (bool, error) {
	if release == nil {
		return Release(ctx, f.Client, lockKey, token, item)
	}
	n, err := release.Int()
	if err != nil {
		return false, redisconn.Wrap("release lock "+strconv.Quote(lockKey), err)
	}
	return n == 1, nil
}

// countProblem sorts an error from count.lua: the state hash of another type
// or holding a count that is not a number is a problem to report, as
// finish.lua reports it, and anything else is Redis failing.
func countProblem(err error) (string, error) {
	switch code := redisconn.Code(err); {
	case code == "WRONGTYPE", code == "ERR" && strings.Contains(err.Error(), "not an integer"):
		return err.Error(), nil
	}
	return "", err
}

// Release deletes the lock lockKey of item if it still holds token, and
// reports whether it did. A lock that someone else holds now is left alone.
// It records nothing: a run ends with Finish, which releases the lock in
// the same round trip as it records the end.
func Release(ctx context.Context, client redis.Scripter, lockKey, token, item string) (bool, error) {
	n, err := finishScript.Run(ctx, client, []string{lockKey}, token, item, "").Int()
	if err != nil {
		return false, redisconn.Wrap("release lock "+strconv.Quote(lockKey), err)
	}
	return n == 1, nil
}

// quoteItem quotes item for messages, its head only when it is long.
func quoteItem(item string) string {
	const most = 64
	if len(item) > most {
		return strconv.Quote(item[:most]) + "..."
	}
	return strconv.Quote(item)
}
