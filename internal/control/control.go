// Package control is what w8yctl changes in a fleet's Redis: it adds items
// to the list and removes them with everything about them, pauses and
// resumes items, and makes them run now, each command in one atomic call
// (control.lua) where an item's keys live on the list's server. Where they
// may not (Redis Cluster without a hash tag in the prefix), it checks first
// and then sends one command per key. Every change is recorded, with who
// made it, in the events stream, which it also reads and follows
// (events.go); and it finds and repairs what is inconsistent (check.go).
//
// A command that is refused (a missing list, a key of the wrong type, an
// item the list lacks) changes nothing.
package control

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
	"github.com/w8y/w8y/internal/status"
)

// controlScript is what an operator changes with w8yctl (add, remove,
// pause, resume, run now), one atomic call per command (control.lua).
//
//go:embed control.lua
var controlSource string

var controlScript = script.New(clock.Lua, controlSource)

// runNowScript makes an item that never ran run now rather than at its
// first slot, on its state hash alone: run-now's path per key (see
// runnow.lua).
//
//go:embed runnow.lua
var runNowSource string

var runNowScript = script.New(runNowSource)

// runNowStateTTL is the expiry of a state hash that run-now makes (see
// runnow.lua): the workers' default --state-ttl, which w8yctl does not
// know; the take that runs the item sets theirs.
const runNowStateTTL = 7 * 24 * time.Hour

// Client is the part of the Redis client that control needs: Detail reads
// through a status.Reader, and the rest is control's own.
type Client interface {
	status.Client
	TxPipeline() redis.Pipeliner
	Type(ctx context.Context, key string) *redis.StatusCmd
	Exists(ctx context.Context, keys ...string) *redis.IntCmd
	XRevRangeN(ctx context.Context, stream, start, stop string, count int64) *redis.XMessageSliceCmd
	XRangeN(ctx context.Context, stream, start, stop string, count int64) *redis.XMessageSliceCmd
	XRead(ctx context.Context, a *redis.XReadArgs) *redis.XStreamSliceCmd
	// What Check and Detail read and repair.
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	ZScan(ctx context.Context, key string, cursor uint64, match string, count int64) *redis.ScanCmd
	LLen(ctx context.Context, key string) *redis.IntCmd
	LRange(ctx context.Context, key string, start, stop int64) *redis.StringSliceCmd
	LPos(ctx context.Context, key string, value string, args redis.LPosArgs) *redis.IntCmd
	LPosCount(ctx context.Context, key string, value string, count int64, args redis.LPosArgs) *redis.IntSliceCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
	ZRem(ctx context.Context, key string, members ...any) *redis.IntCmd
	// check --fix records the layout's version of a list it indexed.
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
}

// Fleet changes what the workers under one prefix do.
type Fleet struct {
	Client Client
	// Keys are the keys under the prefix; where Keys.Colocated, each
	// command is one call of controlScript.
	Keys schema.Keys
	// By is who gives the commands (see Who), as pauses, cancels and the
	// events of every change record it; "" means Who of this process.
	By string
	// Remedies start the commands that Check suggests; the zero value
	// names the commands alone.
	Remedies Remedies
}

// Remedies are the command lines, with the options that reach this Redis
// and this prefix, that Check's suggested repairs start with: w8yctl's
// for what a verb mends, and redis-cli's for a key no verb may touch (a
// lock). Without the options, a pasted repair would go to whatever Redis
// listens on localhost:6379.
type Remedies struct {
	W8yctl   string
	RedisCLI string
}

// ErrRefused marks a command that the state of Redis refuses: the list is
// missing or of another type, or an item is not in it. Nothing was changed.
var ErrRefused = errors.New("refused")

// refusal is an ErrRefused with its reason, and what else it is, if
// anything (schema.ErrNoList).
type refusal struct {
	msg  string
	also error
}

func (e refusal) Error() string { return e.msg }
func (e refusal) Is(target error) bool {
	return target == ErrRefused || e.also != nil && target == e.also
}

// Result is what a command did to one item.
type Result struct {
	Item string `json:"item"`
	// Changed is, for add, 1 if the item was appended and 0 if the list
	// held it already; for remove, how many times the list held it; for
	// pause, 1; for resume, 1 if the item was paused; for run-now, how many
	// of its cooldown, backoff and pause keys were deleted.
	Changed int64 `json:"changed"`
	// Holder is the token of the run that holds the item's lock now, if
	// one does: the run goes on, and the item is not started twice.
	Holder *string `json:"holder"`
}

// Pause is what w8yctl pause records with the pause, beside who paused
// (Fleet.By).
type Pause struct {
	Reason string
	// For is how long the pause lasts; 0 until it is resumed.
	For time.Duration
}

// Add appends the items that the list does not hold yet. A missing list is
// refused unless create is set, so that a mistyped prefix does not start a
// list that no worker reads.
func (f *Fleet) Add(ctx context.Context, add []string, create bool) ([]Result, error) {
	words := ""
	if create {
		words = "create=1"
	}
	// The list alone is touched, so the script runs on a Cluster without a
	// hash tag too; there, the events stream may live on another server,
	// and the appended items' events follow in a pipeline of their own.
	results, err := f.control(ctx, schema.EventAdd, add, words, "")
	if err != nil || f.Keys.Colocated {
		return results, err
	}
	pipe := f.Client.Pipeline()
	for _, r := range results {
		if r.Changed == 1 {
			f.addEvent(ctx, pipe, schema.EventAdd, r.Item)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !redisconn.IsReply(err) {
		return results, redisconn.Wrap("record the items added in "+strconv.Quote(f.Keys.Events()), err)
	}
	return results, nil
}

// Remove removes every occurrence of the items from the list and deletes
// their cooldown, backoff, pause, state and settings keys. A run that holds an item's
// lock is left to finish.
func (f *Fleet) Remove(ctx context.Context, remove []string) ([]Result, error) {
	if f.Keys.Colocated {
		return f.control(ctx, schema.EventRemove, remove, "", "")
	}
	return f.eachKey(ctx, schema.EventRemove, remove, nil, func(pipe redis.Pipeliner, item string) []*redis.IntCmd {
		count := pipe.LRem(ctx, f.Keys.List(), 0, item)
		// One DEL per key: they may live on different servers.
		for _, key := range []string{f.Keys.Cooldown(item), f.Keys.Backoff(item), f.Keys.Pause(item), f.Keys.State(item), f.Keys.Settings(item)} {
			pipe.Del(ctx, key)
		}
		return []*redis.IntCmd{count}
	})
}

// PauseItems pauses the items: no worker takes them until they are resumed
// or the pause expires. A run that holds an item's lock finishes its run.
func (f *Fleet) PauseItems(ctx context.Context, pause []string, p Pause, now time.Time) ([]Result, error) {
	words := ""
	if p.For > 0 {
		words = "for=" + strconv.FormatInt(p.For.Milliseconds(), 10)
	}
	if f.Keys.Colocated {
		return f.control(ctx, schema.EventPause, pause, words, p.Reason)
	}
	// The event's fields beside type, item and by, as control.lua adds them.
	fields := []any{schema.EventFieldReason, p.Reason}
	if p.For > 0 {
		fields = append(fields, schema.EventFieldForMs, p.For.Milliseconds())
	}
	results, err := f.eachKey(ctx, schema.EventPause, pause, fields, func(pipe redis.Pipeliner, item string) []*redis.IntCmd {
		key := f.Keys.Pause(item)
		pipe.Del(ctx, key)
		pipe.HSet(ctx, key, schema.PauseFieldReason, p.Reason, schema.PauseFieldBy, f.Who(), schema.PauseFieldAt, millis(now))
		if p.For > 0 {
			pipe.PExpire(ctx, key, p.For)
		}
		return nil
	})
	for i := range results {
		results[i].Changed = 1
	}
	return results, err
}

// Resume deletes the items' pauses. An idle worker takes them within a
// second, unless a cooldown, a backoff or a run holds them.
func (f *Fleet) Resume(ctx context.Context, resume []string) ([]Result, error) {
	if f.Keys.Colocated {
		return f.control(ctx, schema.EventResume, resume, "", "")
	}
	return f.eachKey(ctx, schema.EventResume, resume, nil, func(pipe redis.Pipeliner, item string) []*redis.IntCmd {
		return []*redis.IntCmd{pipe.Del(ctx, f.Keys.Pause(item))}
	})
}

// RunNow deletes the items' cooldown, backoff and pause keys and makes them
// due now, so that an idle worker takes each within a second. An item whose
// lock a run holds is not started twice: it is taken once the run ends and
// the keys that end writes allow.
func (f *Fleet) RunNow(ctx context.Context, run []string) ([]Result, error) {
	if f.Keys.Colocated {
		return f.control(ctx, schema.EventRunNow, run, "state_ttl="+strconv.FormatInt(runNowStateTTL.Milliseconds(), 10), "")
	}
	// Where the keys are not colocated, idle workers pass over the whole
	// list every --idle-wait, and find the item free.
	return f.eachKey(ctx, schema.EventRunNow, run, nil, func(pipe redis.Pipeliner, item string) []*redis.IntCmd {
		var deleted []*redis.IntCmd
		for _, key := range []string{f.Keys.Cooldown(item), f.Keys.Backoff(item), f.Keys.Pause(item)} {
			deleted = append(deleted, pipe.Del(ctx, key))
		}
		// As control.lua: an item never run runs now, not at its first
		// slot.
		runNowScript.Eval(ctx, pipe, []string{f.Keys.State(item)}, runNowStateTTL.Milliseconds())
		return deleted
	})
}

// wakeWords are control.lua's options for the tokens that wake idle
// workers (see schema.Keys.Wake).
var wakeWords = " wake_most=" + strconv.Itoa(schema.WakeMost) + " wake_ttl=" + strconv.FormatInt(schema.WakeTTL.Milliseconds(), 10)

// control runs control.lua for verb (one of the event types of an
// operator's change, schema.EventAdd...) over list and decodes its reply.
// The script records the changes in the events stream where the stream
// lives on the list's server.
func (f *Fleet) control(ctx context.Context, verb string, list []string, words, reason string) ([]Result, error) {
	if f.Keys.Colocated {
		words = strings.TrimSpace(words + wakeWords)
	}
	args := []any{verb, f.Keys.Prefix, words, reason, f.Who()}
	for _, item := range list {
		args = append(args, item)
	}
	keys := []string{f.Keys.List()}
	if f.Keys.Colocated {
		keys = append(keys, f.Keys.Events(), f.Keys.Wake())
	}
	reply, err := controlScript.Run(ctx, f.Client, keys, args...).Slice()
	if err != nil {
		return nil, redisconn.Wrap(verb+" in "+strconv.Quote(f.Keys.List()), err)
	}
	if err := f.refused("control.lua", reply, verb == schema.EventAdd); err != nil {
		return nil, err
	}
	var out []Result
	for i := 1; i+2 < len(reply); i += 3 {
		item, _ := reply[i].(string)
		changed, _ := reply[i+1].(int64)
		r := Result{Item: item, Changed: changed}
		if holder, ok := reply[i+2].(string); ok {
			r.Holder = &holder
		}
		out = append(out, r)
	}
	return out, nil
}

// refused is the error that a reply of control.lua or settings.lua (name)
// says in its first element, or nil where it says ok: the list is missing
// (which an add creates where adding), of another type or without an item
// asked for, or an item's settings are of another type.
func (f *Fleet) refused(name string, reply []any, adding bool) error {
	word := func(i int) string { s, _ := reply[i].(string); return s }
	switch status := word(0); status {
	case "ok":
		return nil
	case "no_list":
		return f.noList(adding)
	case "wrong_type":
		return f.wrongType(word(1))
	case "not_in_list":
		return f.notInList(word(1))
	case "wrong_settings_type":
		return f.wrongSettingsType(word(1), word(2))
	default:
		return fmt.Errorf("unexpected reply from %s: %q", name, status)
	}
}

// eachKey is a command for where an item's keys may live on other servers
// than the list: it checks the list and that it holds every item, then
// sends write's commands for each item in one pipeline (which a Cluster
// client splits by node), with the event of verb that records the change
// (see addEvent; fields are the event's beside type, item and by), and
// reads each item's lock. An item's Changed is the sum of what the
// commands that write returns answered.
func (f *Fleet) eachKey(ctx context.Context, verb string, list []string, fields []any, write func(redis.Pipeliner, string) []*redis.IntCmd) ([]Result, error) {
	if err := f.checkList(ctx, list); err != nil {
		return nil, err
	}
	pipe := f.Client.Pipeline()
	counts := make([][]*redis.IntCmd, len(list))
	holders := make([]*redis.StringCmd, len(list))
	// What may fail without failing the command: a read of a lock, and an
	// event, which a missing stream or a key of another type refuses.
	mayFail := map[redis.Cmder]bool{}
	for i, item := range list {
		counts[i] = write(pipe, item)
		mayFail[f.addEvent(ctx, pipe, verb, item, fields...)] = true
		holders[i] = pipe.Get(ctx, f.Keys.Lock(item))
		mayFail[holders[i]] = true
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) && !redisconn.IsReply(err) {
		return nil, redisconn.Wrap("change the keys of the items", err)
	}
	// Every write must have been done; a lock that is missing, or of
	// another type, is only no run's.
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !mayFail[cmd] {
			return nil, redisconn.Wrap(fmt.Sprintf("%s %q", strings.ToUpper(cmd.Name()), clip.Item(fmt.Sprint(cmd.Args()[1]))), err)
		}
	}
	out := make([]Result, len(list))
	for i, item := range list {
		out[i].Item = item
		for _, c := range counts[i] {
			out[i].Changed += c.Val()
		}
		if holder, err := holders[i].Result(); err == nil {
			out[i].Holder = &holder
		}
	}
	return out, nil
}

// addEvent queues on pipe the entry of the events stream that records
// verb's change of item by f.Who(), with fields after type, item and by: the
// entry that control.lua adds where it makes the change. Only where the
// stream exists (NOMKSTREAM), and without MAXLEN, for the reasons that
// control.lua gives.
func (f *Fleet) addEvent(ctx context.Context, pipe redis.Pipeliner, verb, item string, fields ...any) *redis.StringCmd {
	values := append([]any{"type", verb, "item", item, schema.EventFieldBy, f.Who()}, fields...)
	return pipe.XAdd(ctx, &redis.XAddArgs{Stream: f.Keys.Events(), NoMkStream: true, Values: values})
}

// CheckList refuses a list that is missing (schema.ErrNoList too) or of
// another type: what workers and serve warn of.
func (f *Fleet) CheckList(ctx context.Context) error { return f.checkList(ctx, nil) }

// checkList refuses, before anything is changed, a list that is missing or
// of another type, or one that lacks an item of list.
func (f *Fleet) checkList(ctx context.Context, list []string) error {
	kind, err := f.Client.Type(ctx, f.Keys.List()).Result()
	if err != nil {
		return redisconn.Wrap("read "+strconv.Quote(f.Keys.List()), err)
	}
	switch kind {
	case "list":
	case "none":
		return f.noList(false)
	default:
		return f.wrongType(kind)
	}
	pipe := f.Client.Pipeline()
	at := make([]*redis.IntCmd, len(list))
	for i, item := range list {
		at[i] = pipe.LPos(ctx, f.Keys.List(), item, redis.LPosArgs{})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return redisconn.Wrap("read "+strconv.Quote(f.Keys.List()), err)
	}
	for i, item := range list {
		if errors.Is(at[i].Err(), redis.Nil) {
			return f.notInList(item)
		}
	}
	return nil
}

// noList refuses a command on a list that does not exist, in the words of
// schema.NoListError, which it also is.
func (f *Fleet) noList(adding bool) error {
	msg := f.Keys.NoList().Error()
	if adding {
		msg += " Give --create to start a new list"
	}
	return refusal{msg: msg, also: schema.ErrNoList}
}

func (f *Fleet) wrongType(kind string) error {
	return refusal{msg: f.Keys.NotAList(kind)}
}

func (f *Fleet) notInList(item string) error {
	return refusal{msg: fmt.Sprintf("%q is not in the list %q (nothing was changed)", clip.Item(item), f.Keys.List())}
}

// millis is t as Unix milliseconds, as w8y's keys store times.
func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// Who is who gives f's commands, as they record it: f.By, else Who of this
// process.
func (f *Fleet) Who() string {
	if f.By != "" {
		return f.By
	}
	return Who(os.Getenv)
}
