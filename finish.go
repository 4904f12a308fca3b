package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/lua"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
)

// finishClient is the part of the Redis client that finishing a run needs.
type finishClient interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

// finisher ends runs: it releases the run's lock and writes what the end
// changes, in one round trip where one script may touch all of an item's
// keys: the item's cooldown or failure backoff and its count of consecutive
// failures (see Schedule), and its state hash and end event (see recorder).
type finisher struct {
	client finishClient
	// record says what to record of a run, and under which keys; where
	// they are not colocated (see schema.Keys), each key gets its own
	// commands.
	record   *recorder
	schedule Schedule
	// jitter returns backoff jitter factors; jitterFactor unless a test sets it.
	jitter func() string
}

// finishReply is what finishing a run did, as the finish script reports it.
type finishReply struct {
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

// finish ends the run that held lock and ended as end says. The lock is
// deleted only if it still holds our token; the rest is written either way,
// since a lost lock is a failed run.
func (f *finisher) finish(ctx context.Context, lock *Lock, end runEnd) (finishReply, error) {
	factor := "1"
	if f.jitter != nil {
		factor = f.jitter()
	}
	if !f.record.keys.Colocated {
		return f.finishEach(ctx, lock, end, factor)
	}
	rec, item := f.record, lock.Item
	keys := []string{lock.Key, rec.keys.State(item), rec.keys.Cooldown(item), rec.keys.Backoff(item)}
	if rec.eventsMaxLen > 0 {
		keys = append(keys, rec.keys.Events())
	}
	words := rec.finishWords(end) + f.scheduleWords(factor)
	reply, err := lua.Finish.Run(ctx, f.client, keys, lock.Token, item, words).Slice()
	if err != nil && redisconn.SlotMoving(err) {
		// While the slot moves to another Cluster node, a command that
		// names several of its keys is refused (TRYAGAIN) until all of them
		// have arrived, and the script has not run at all. One key per
		// command follows the move (ASK) instead: without this, the lock
		// would be left to expire, and the run's cooldown or backoff, its
		// count of consecutive failures and its record would be lost.
		return f.finishEach(ctx, lock, end, factor)
	}
	if err != nil {
		return finishReply{}, redisconn.Wrap("finish the run of "+quoteKey(lock.Key), err)
	}
	if len(reply) != 4 {
		return finishReply{}, redisconn.Wrap("finish the run of "+quoteKey(lock.Key), fmt.Errorf("unexpected reply from lua.Finish: %d values", len(reply)))
	}
	released, _ := reply[0].(int64)
	failures, _ := reply[1].(int64)
	delay, _ := reply[2].(int64)
	problem, _ := reply[3].(string)
	out := finishReply{Released: released == 1, Failures: failures, Problem: problem}
	if delay > 0 {
		out.Delay = time.Duration(delay) * time.Millisecond
	}
	return out, nil
}

// scheduleWords are lua.Finish's options for the schedule, with factor the
// jitter of a failure delay.
func (f *finisher) scheduleWords(factor string) string {
	s := f.schedule
	var b strings.Builder
	if s.Cooldown > 0 {
		b.WriteString(" cooldown=" + strconv.FormatInt(s.Cooldown.Milliseconds(), 10))
	}
	if s.Backoff != (Backoff{}) {
		b.WriteString(" backoff_min=" + strconv.FormatInt(s.Backoff.Min.Milliseconds(), 10))
		b.WriteString(" backoff_max=" + strconv.FormatInt(s.Backoff.Max.Milliseconds(), 10))
		b.WriteString(" jitter=" + factor)
	}
	return b.String()
}

// finishEach is finish with commands on one key each (lua.Count, lua.Pause,
// the record's plain commands, lua.Finish with the lock alone), for where
// an item's keys may live on different servers, or where their slot is on
// the move between Cluster nodes (see finish). The count, the cooldown and
// the record go in one pipeline; a failure's backoff depends on the count,
// so it needs a round trip of its own. The lock is released last wherever a
// pause is set, so that a worker that takes it afterwards finds the pause
// (see takeEach): in a round trip of its own, since a cluster pipeline sends
// to each node at once, in no order across nodes. That makes one round trip
// after an interrupted run, or a run that sets no pause; two after a success
// with --cooldown; three after a failure with --failure-backoff. Scripts in
// a pipeline go as EVAL, with their text: a pipeline cannot fall back from
// EVALSHA, and each script is a few hundred bytes.
func (f *finisher) finishEach(ctx context.Context, lock *Lock, end runEnd, factor string) (finishReply, error) {
	s, rec, item, res := f.schedule, f.record, lock.Item, end.Result
	out := finishReply{Failures: -1}
	cooling := res == schema.ResultSuccess && s.Cooldown > 0
	backingOff := res.Failed() && s.Backoff != (Backoff{})

	pipe := f.client.Pipeline()
	var count, cooldown, release *redis.Cmd
	switch {
	case res == schema.ResultSuccess:
		count = lua.Count.Eval(ctx, pipe, []string{rec.keys.State(item)}, "success", rec.stateTTL.Milliseconds())
	case res.Failed():
		count = lua.Count.Eval(ctx, pipe, []string{rec.keys.State(item)}, "failure", rec.stateTTL.Milliseconds())
	}
	if cooling {
		cooldown = lua.Pause.Eval(ctx, pipe, []string{rec.keys.Cooldown(item)}, lock.Token, s.Cooldown.Milliseconds())
	}
	// The record's own errors are left unread, as lua.Finish's pcall
	// leaves them: a run never depends on its record.
	rec.queueFinish(ctx, pipe, item, lock.Token, end)
	if !cooling && !backingOff {
		release = lua.Finish.Eval(ctx, pipe, []string{lock.Key}, lock.Token, item, "")
	}
	_, _ = pipe.Exec(ctx)

	if cooldown != nil && cooldown.Err() != nil {
		return out, redisconn.Wrap("set the cooldown of "+quoteKey(clip(item)), cooldown.Err())
	}
	if count != nil {
		n, err := count.Int64()
		problem, err := countProblem(err)
		if err != nil {
			return out, redisconn.Wrap("count the runs of "+quoteKey(clip(item)), err)
		}
		out.Problem = problem
		if res.Failed() {
			if problem == "" {
				out.Failures = n
			} else {
				// Back off as after a first failure: the count is unreadable.
				n = 1
			}
		}
		if backingOff {
			out.Delay = backoffDelay(n, s.Backoff, factor)
			if err := lua.Pause.Eval(ctx, f.client, []string{rec.keys.Backoff(item)}, lock.Token, out.Delay.Milliseconds()).Err(); err != nil {
				return out, redisconn.Wrap("set the backoff of "+quoteKey(clip(item)), err)
			}
		}
	}

	var released bool
	var err error
	if release != nil {
		var n int
		n, err = release.Int()
		released = n == 1
		if err != nil {
			err = redisconn.Wrap("release lock "+quoteKey(lock.Key), err)
		}
	} else {
		released, err = lock.Release(ctx)
	}
	if err != nil {
		return out, err
	}
	out.Released = released
	return out, nil
}

// countProblem sorts an error from lua.Count: the state hash of another type
// or holding a count that is not a number is a problem to report, as
// lua.Finish reports it, and anything else is Redis failing.
func countProblem(err error) (string, error) {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return "", err
	}
	if msg := err.Error(); strings.HasPrefix(msg, "WRONGTYPE") || strings.Contains(msg, "not an integer") {
		return msg, nil
	}
	return "", err
}
