package main

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestRecordBothPaths runs the same takes and ends through batch.lua and
// finish.lua, and through the per-candidate path with its plain commands
// (Redis Cluster without a hash tag): both leave the same state hashes and
// the same events.
func TestRecordBothPaths(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	ends := []finish.End{
		{Result: schema.ResultSuccess, Exit: proc.Exit{Code: 0, Duration: 1500 * time.Millisecond}, Exited: true},
		{Result: schema.ResultFailure, Exit: proc.Exit{Code: 3, Duration: 20 * time.Millisecond}, Exited: true},
		{Result: schema.ResultLockLost, Exit: proc.Exit{Code: 143, Duration: time.Second}, Exited: true},
		{Result: schema.ResultTimeout, Exit: proc.Exit{Code: 137, Duration: 2 * time.Second}, Exited: true},
		{Result: schema.ResultInterrupted, Exit: proc.Exit{Code: 130, Duration: time.Millisecond}, Exited: true},
		{Result: schema.ResultInterrupted},
		{Result: schema.ResultCancelled, Exit: proc.Exit{Code: 143, Duration: time.Second}, Exited: true,
			Cancel: &schema.CancelRequest{Holder: testToken, Reason: "the disk is full", By: "ops@desk"}},
		// A failure's end event carries the last words of its output,
		// cut at a character.
		{Result: schema.ResultFailure, Exit: proc.Exit{Code: 7, Duration: time.Millisecond}, Exited: true,
			Output: &finish.Output{Stdout: []byte("step 1\n"), Stderr: []byte(strings.Repeat("é", 300) + "ERROR: db timeout!\n")}},
		{Result: schema.ResultSuccess, Exit: proc.Exit{Code: 0, Duration: 5 * time.Millisecond}, Exited: true,
			Output: &finish.Output{Stdout: []byte("out\x00\xff"), Stderr: []byte{}}},
	}
	type outcome struct {
		state  map[string]string
		ttl    time.Duration
		events []map[string]any
	}
	run := func(prefix string, colocated bool) outcome {
		var logs bytes.Buffer
		r := testRotator(rdb, prefix, colocated, 0, &logs)
		r.Record = &finish.Recorder{Keys: r.Keys, StateTTL: time.Hour, EventsMaxLen: 100}
		f := &finish.Finisher{Client: rdb, Record: r.Record}
		rdb.RPush(ctx, r.Keys.List(), "a")
		for i, end := range ends {
			item, lock, err := takeLock(ctx, r, r.Pass(), nil)
			if err != nil || item != "a" {
				t.Fatalf("%s: Take = %q, %v", prefix, item, err)
			}
			if i == 2 {
				// A lost lock: someone else holds it now.
				rdb.Set(ctx, lock.Key, "intruder", 0)
			}
			end.Item, end.At = item, time.Now()
			done, err := f.Finish(ctx, lock.Key, lock.Token, end)
			if err != nil || done.Released != (i != 2) {
				t.Fatalf("%s: end %d: finish = %+v, %v", prefix, i, done, err)
			}
			if i == 2 {
				if v := rdb.Get(ctx, lock.Key).Val(); v != "intruder" {
					t.Fatalf("%s: the other holder's lock is now %q", prefix, v)
				}
				rdb.Del(ctx, lock.Key)
			}
		}
		if logs.Len() != 0 {
			t.Errorf("%s: logs:\n%s", prefix, logs.String())
		}
		var out outcome
		out.state = rdb.HGetAll(ctx, r.Keys.State("a")).Val()
		out.ttl = rdb.PTTL(ctx, r.Keys.State("a")).Val()
		for _, m := range rdb.XRange(ctx, r.Keys.Events(), "-", "+").Val() {
			out.events = append(out.events, m.Values)
		}
		if ttl := rdb.PTTL(ctx, r.Keys.Events()).Val(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("%s: events stream TTL %s, want up to 1h", prefix, ttl)
		}
		// The times of the take and the end are Redis' clock's (in a
		// script) or the client's (per key), which are one here: check and
		// drop.
		for _, field := range []string{"last_start", "last_end"} {
			if at, err := strconv.ParseInt(out.state[field], 10, 64); err != nil || time.Since(time.UnixMilli(at)).Abs() > time.Minute {
				t.Errorf("%s: %s %q", prefix, field, out.state[field])
			}
			delete(out.state, field)
		}
		return out
	}
	scan, each := run("scan:", true), run("each:", false)

	want := map[string]string{
		"last_holder": testToken, "last_result": "success", "last_exit_code": "0",
		"last_duration_ms": "5", "runs": "9", "failures": "4", "consecutive_failures": "0",
		"last_stdout": "out\x00\xff", "last_stderr": "",
		// Each take increments the fence: the ninth's is 9.
		"last_fence": "9",
	}
	for name, got := range map[string]outcome{"scan": scan, "each": each} {
		if !maps.Equal(got.state, want) {
			t.Errorf("%s: state %v, want %v", name, got.state, want)
		}
		if got.ttl <= 59*time.Minute || got.ttl > time.Hour {
			t.Errorf("%s: state TTL %s, want about 1h", name, got.ttl)
		}
		if len(got.events) != 2*len(ends) {
			t.Fatalf("%s: %d events, want %d: %v", name, len(got.events), 2*len(ends), got.events)
		}
		for i, end := range ends {
			start, fin := got.events[2*i], got.events[2*i+1]
			if !maps.Equal(start, map[string]any{"type": "start", "item": "a", "holder": testToken, "fence": strconv.Itoa(i + 1)}) {
				t.Errorf("%s: start event %d: %v", name, i, start)
			}
			wantEnd := map[string]any{"type": end.Result.Event(), "item": "a", "holder": testToken, "result": string(end.Result)}
			if end.Exited {
				wantEnd["exit_code"] = strconv.Itoa(end.Exit.Code)
				wantEnd["duration_ms"] = strconv.FormatInt(end.Exit.Duration.Milliseconds(), 10)
			}
			if end.Cancel != nil {
				wantEnd["reason"], wantEnd["cancelled_by"] = end.Cancel.Reason, end.Cancel.By
			}
			if end.Output != nil && end.Result != schema.ResultSuccess {
				// 512 bytes would start inside an é: the event's start
				// one byte later.
				wantEnd["stdout"], wantEnd["stderr"] = "step 1\n", strings.Repeat("é", 246)+"ERROR: db timeout!\n"
			}
			if !maps.Equal(fin, wantEnd) {
				t.Errorf("%s: end event %d: %v, want %v", name, i, fin, wantEnd)
			}
		}
	}
}

// TestRecordConsecutiveFailures follows consecutive_failures through
// failures, an interruption (which changes nothing) and a success.
func TestRecordConsecutiveFailures(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	for _, colocated := range []bool{true, false} {
		r, f := recordingRotator(t, rdb, colocated, 0)
		var streaks []string
		for _, res := range []schema.Result{schema.ResultFailure, schema.ResultTimeout, schema.ResultInterrupted, schema.ResultLockLost, schema.ResultSuccess, schema.ResultFailure} {
			_, lock, err := takeLock(ctx, r, r.Pass(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Finish(ctx, lock.Key, lock.Token, finish.End{Item: "a", Result: res, Exited: true, At: time.Now()}); err != nil {
				t.Fatal(err)
			}
			streaks = append(streaks, rdb.HGet(ctx, r.Keys.State("a"), "consecutive_failures").Val())
		}
		if want := []string{"1", "2", "2", "3", "0", "1"}; !slices.Equal(streaks, want) {
			t.Errorf("colocated %v: consecutive_failures %q, want %q", colocated, streaks, want)
		}
		// Events off: no stream at all.
		if n := rdb.Exists(ctx, r.Keys.Events()).Val(); n != 0 {
			t.Errorf("colocated %v: an events stream with events off", colocated)
		}
	}
}

// TestRecordNeverFailsARun: a state key of another type makes the record
// fail, never the take or the release.
func TestRecordNeverFailsARun(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	for _, colocated := range []bool{true, false} {
		r, f := recordingRotator(t, rdb, colocated, 10)
		rdb.Set(ctx, r.Keys.State("a"), "not a hash", 0)
		item, lock, err := takeLock(ctx, r, r.Pass(), nil)
		if err != nil || item != "a" {
			t.Fatalf("colocated %v: Take = %q, %v", colocated, item, err)
		}
		done, err := f.Finish(ctx, lock.Key, lock.Token, finish.End{Item: "a", Result: schema.ResultSuccess, Exited: true, At: time.Now()})
		if !done.Released {
			t.Errorf("colocated %v: not released (%v)", colocated, err)
		}
		if rdb.Exists(ctx, lock.Key).Val() != 0 {
			t.Errorf("colocated %v: the lock is still there", colocated)
		}
		if n := rdb.XLen(ctx, r.Keys.Events()).Val(); n != 2 {
			t.Errorf("colocated %v: %d events, want 2", colocated, n)
		}
	}
}

// recordingRotator returns a Rotator and a Finisher that record runs, with
// events capped at eventsMaxLen (0: none), over a list of one item, "a",
// under a prefix of its own.
func recordingRotator(t *testing.T, rdb *redis.Client, colocated bool, eventsMaxLen int64) (*Rotator, *finish.Finisher) {
	t.Helper()
	r := testRotator(rdb, strconv.FormatBool(colocated)+":", colocated, 0, &bytes.Buffer{})
	r.Record = &finish.Recorder{Keys: r.Keys, StateTTL: time.Hour, EventsMaxLen: eventsMaxLen}
	redistest.Seed(t, rdb, r.Keys.List(), "a")
	return r, &finish.Finisher{Client: rdb, Record: r.Record}
}
