package finish

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/schema"
)

// A run leaves a record that operators and other programs read: the item's
// state hash, <prefix>state:<item>, which w8y --status shows, and an entry
// per start and end in the capped stream <prefix>events, which anyone can
// follow with XREAD BLOCK. Both are written in the round trips w8y makes
// anyway: the start inside the take (internal/take's batch.lua and look.lua),
// the end inside the finish script (finishScript, see finish.go). Times are Unix milliseconds from the
// clock of the host that ran the item.
//
// Where one script may not touch the lock, state and events keys together
// (Redis Cluster without a hash tag in the prefix, see schema.Keys), the
// same writes go as plain commands on one key each: the end's in the first
// pipeline of finishEach, which costs no extra round trip, the start's in a
// round trip of its own per item taken.

// Recorder says what to record of each run, and under which keys.
type Recorder struct {
	Keys schema.Keys
	// StateTTL is how long a state hash (and the stream) lives after its
	// last write, so items removed from the list leave nothing behind.
	StateTTL time.Duration
	// EventsMaxLen caps the stream approximately; 0 turns events off.
	EventsMaxLen int64
}

// millis is t as Unix milliseconds, as the record stores times.
func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// RecordStart writes what batch.lua writes after a take, for the path that
// takes each candidate with its own commands: the start in the state hash
// and a start event, pipelined.
func (rec *Recorder) RecordStart(ctx context.Context, client Client, item, token string, fence int64, now time.Time) error {
	if rec == nil {
		return nil
	}
	pipe := client.Pipeline()
	state := rec.Keys.State(item)
	pipe.HSet(ctx, state, schema.FieldLastStart, millis(now), schema.FieldLastHolder, token, schema.FieldLastFence, fence)
	pipe.PExpire(ctx, state, rec.StateTTL)
	rec.addEvent(ctx, pipe, []any{"type", schema.EventStart, "item", item, "holder", token, "fence", fence})
	_, err := pipe.Exec(ctx)
	return err
}

// addEvent queues an entry of the events stream on pipe, if events are on.
func (rec *Recorder) addEvent(ctx context.Context, pipe redis.Pipeliner, fields []any) {
	if rec.EventsMaxLen <= 0 {
		return
	}
	events := rec.Keys.Events()
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: events, MaxLen: rec.EventsMaxLen, Approx: true, Values: fields})
	pipe.PExpire(ctx, events, rec.StateTTL)
}

// finishWords are finishScript's options for recording end (see finish.go
// for the schedule's).
func (rec *Recorder) finishWords(end End) string {
	var b strings.Builder
	b.WriteString("result=" + string(end.Result))
	if end.Failed() {
		b.WriteString(" failed=1")
	}
	if end.Exited {
		b.WriteString(" exit_code=" + strconv.Itoa(end.Exit.Code))
		b.WriteString(" duration_ms=" + strconv.FormatInt(end.Exit.Duration.Milliseconds(), 10))
	}
	if end.Cancel != nil {
		b.WriteString(" reason=1")
	}
	if end.Output != nil {
		b.WriteString(" output=1 event_output=" + strconv.Itoa(EventOutput))
	}
	b.WriteString(" event=" + end.Result.Event())
	b.WriteString(" state_ttl=" + strconv.FormatInt(rec.StateTTL.Milliseconds(), 10))
	b.WriteString(" events=" + strconv.FormatInt(rec.EventsMaxLen, 10))
	return b.String()
}

// queueFinish queues on pipe, with plain commands, what finishScript's record
// block writes of end, with slot the item's next slot (Schedule.NextSlot;
// zero: none). The count of consecutive failures is not among them:
// countScript writes it, as finishScript's schedule block does (see
// finishEach).
func (rec *Recorder) queueFinish(ctx context.Context, pipe redis.Pipeliner, item, token string, end End, slot time.Time) {
	state := rec.Keys.State(item)
	var drop []string
	record := []any{schema.FieldLastEnd, millis(end.At), schema.FieldLastResult, string(end.Result)}
	if slot.IsZero() {
		drop = append(drop, schema.FieldNextSlot)
	} else {
		record = append(record, schema.FieldNextSlot, millis(slot))
	}
	pipe.HSet(ctx, state, record...)
	event := []any{"type", end.Result.Event(), "item", item, "holder", token, "result", string(end.Result)}
	if end.Exited {
		code, ms := strconv.Itoa(end.Exit.Code), strconv.FormatInt(end.Exit.Duration.Milliseconds(), 10)
		pipe.HSet(ctx, state, schema.FieldLastExitCode, code, schema.FieldLastDuration, ms)
		event = append(event, "exit_code", code, "duration_ms", ms)
	}
	if end.Cancel != nil {
		pipe.HSet(ctx, state, schema.FieldLastReason, end.Cancel.Reason)
		event = append(event, "reason", end.Cancel.Reason, "cancelled_by", end.Cancel.By)
	} else {
		drop = append(drop, schema.FieldLastReason)
	}
	if end.Output != nil {
		pipe.HSet(ctx, state, schema.FieldLastStdout, end.Output.Stdout, schema.FieldLastStderr, end.Output.Stderr)
		if end.Result != schema.ResultSuccess {
			for _, tail := range []struct {
				name string
				text []byte
			}{{"stdout", end.Output.Stdout}, {"stderr", end.Output.Stderr}} {
				if words := LastWords(tail.text, EventOutput); len(words) > 0 {
					event = append(event, tail.name, words)
				}
			}
		}
	} else {
		drop = append(drop, schema.FieldLastStdout, schema.FieldLastStderr)
	}
	pipe.HDel(ctx, state, drop...)
	pipe.HIncrBy(ctx, state, schema.FieldRuns, 1)
	if end.Failed() {
		pipe.HIncrBy(ctx, state, schema.FieldFailures, 1)
	}
	pipe.PExpire(ctx, state, rec.StateTTL)
	rec.addEvent(ctx, pipe, event)
}

// EventOutput is how many of the last bytes of each kept output (stdout,
// stderr) the end event of a run that did not succeed carries: the few
// lines that say why, for w8yctl events and the dashboard, while the state
// hash keeps the whole tail. The stream holds about --events-max-len
// entries, so this bounds what kept output adds to it: at most 1 KiB an
// event, some 10 MB for the default 10,000 if every one were a failure
// with both.
const EventOutput = 512

// LastWords is the last n bytes of b, from the start of a UTF-8 character:
// what an end event carries of a kept output (see EventOutput), as
// finish.lua's lastWords cuts it.
func LastWords(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	b = b[len(b)-n:]
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return b
}
