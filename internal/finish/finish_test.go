package finish

import (
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// finishStep is one finished run in a finish test: its result, and whether
// someone else holds the lock by then (it was lost).
type finishStep struct {
	res  schema.Result
	lost bool
	// cancel is the request that cancelled the run, if one did.
	cancel *schema.CancelRequest
}

// finishCase is a series of finished runs of one item from a given state.
type finishCase struct {
	name string
	// schedule is the finisher's, if not the test's default.
	schedule *Schedule
	setup    func(ctx context.Context, rdb *redis.Client, keys schema.Keys)
	steps    []finishStep
	// want is what each finish reports, as "released failures delay".
	want []string
	// keys is what the item's keys hold afterwards (see dumpKeys).
	keys map[string]string
	// due is when the due index says the item may run again, after the
	// last run's end, rounded to seconds, or "" for no entry. Only finishScript
	// writes the index, which serves colocated keys alone.
	due string
}

// dumpKeys shows every key under keys' prefix (redistest.Dump) by its name
// less the prefix: a string's value, a hash's fields, or another type's
// name, with its remaining time to live, rounded to seconds, or "no
// expiry".
// endedAt rewrites in keys, as dumpKeys reads them, a state hash's
// last_end that Redis' clock set (at most 10s after start, Redis' time
// before the finish) as at, the time that the per-key path records, and
// fails the test on a last_end that is neither.
func endedAt(t *testing.T, keys map[string]string, start, at int64) {
	t.Helper()
	lastEnd := regexp.MustCompile(`last_end=(\d+)`)
	for k, v := range keys {
		keys[k] = lastEnd.ReplaceAllStringFunc(v, func(field string) string {
			n, _ := strconv.ParseInt(lastEnd.FindStringSubmatch(field)[1], 10, 64)
			if n < start || n > start+10000 {
				t.Errorf("%s: last_end %d is not Redis' time of the finish (%d or up to 10s after)", k, n, start)
			}
			return "last_end=" + strconv.FormatInt(at, 10)
		})
	}
}

func dumpKeys(t *testing.T, rdb *redis.Client, keys schema.Keys) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range redistest.Dump(t, rdb, keys.Prefix+"*") {
		value := k.Type
		switch k.Type {
		case "string":
			value = k.Parts[0]
		case "hash":
			value = "hash " + strings.Join(k.Parts, ",")
		}
		ttl := "no expiry"
		if k.TTL > 0 {
			ttl = k.TTL.Round(time.Second).String()
		}
		out[strings.TrimPrefix(k.Name, keys.Prefix)] = value + " (" + ttl + ")"
	}
	return out
}

// TestFinishBothWaysAlike finishes the same runs with finishScript in one
// round trip and with the per-key commands of a cluster: both must report
// the same and leave the same keys, and what they leave is the schedule.
func TestFinishBothWaysAlike(t *testing.T) {
	rdb := redistest.Start(t).Client
	schedule := Schedule{Cooldown: time.Minute, Backoff: Backoff{Min: time.Second, Max: 3 * time.Second}}
	// state is the state hash after runs runs, failures of them failed, the
	// last with result last, and consecutive failures n (-1: none counted).
	state := func(n, runs, failures int, last schema.Result) string {
		var fields []string
		if n >= 0 {
			fields = append(fields, fmt.Sprintf("consecutive_failures=%d", n))
		}
		if failures > 0 {
			fields = append(fields, fmt.Sprintf("failures=%d", failures))
		}
		fields = append(fields, "last_end=1000", "last_result="+string(last), fmt.Sprintf("runs=%d", runs))
		return "hash " + strings.Join(fields, ",") + " (1h0m0s)"
	}
	ok, fail, stopped := finishStep{res: schema.ResultSuccess}, finishStep{res: schema.ResultFailure}, finishStep{res: schema.ResultInterrupted}
	// Every run ends at 00:00:01 UTC on 1 January 1970 (see below), so
	// --schedule '0 2 * * *' has its next slot at 02:00, 7,200,000 ms.
	nightly := &Schedule{Cron: mustCron(t, "0 2 * * *", "", 0), Backoff: schedule.Backoff}
	// slotted is the state hash that a success under nightly leaves.
	slotted := "hash consecutive_failures=0,last_end=1000,last_result=success,next_slot=7200000,runs=1 (1h0m0s)"
	cancelled := finishStep{res: schema.ResultCancelled, cancel: &schema.CancelRequest{Holder: testToken, Reason: "a deploy, say", By: "ops@desk"}}
	charged := finishStep{res: schema.ResultCancelled, cancel: &schema.CancelRequest{Holder: testToken, Reason: "stuck", By: "ops@desk", AsFailure: true}}
	tests := []finishCase{
		{
			name: "a cancelled run sets no pause, leaves the count and records the reason", due: "0s",
			setup: func(ctx context.Context, rdb *redis.Client, keys schema.Keys) {
				rdb.HSet(ctx, keys.State("x"), "consecutive_failures", 2)
				// As the failures' finishes counted it.
				rdb.ZAdd(ctx, keys.Failing(), redis.Z{Score: math.Inf(1), Member: "x"})
			},
			steps: []finishStep{cancelled}, want: []string{"true -1 0s"},
			keys: map[string]string{"state:x": "hash consecutive_failures=2,last_end=1000,last_reason=a deploy, say,last_result=cancelled,runs=1 (1h0m0s)"},
		},
		{
			name: "a cancelled run that asked to count as a failure backs off", due: "2s",
			steps: []finishStep{fail, charged}, want: []string{"true 1 1s", "true 2 2s"},
			keys: map[string]string{"backoff:x": testToken + " (2s)", "state:x": "hash consecutive_failures=2,failures=2,last_end=1000,last_reason=stuck,last_result=cancelled,runs=2 (1h0m0s)"},
		},
		{
			name: "the next run's end drops the reason", due: "0s",
			steps: []finishStep{cancelled, stopped}, want: []string{"true -1 0s", "true -1 0s"},
			keys: map[string]string{"state:x": state(-1, 2, 0, schema.ResultInterrupted)},
		},
		{
			name: "success cools down", due: "1m0s", steps: []finishStep{ok}, want: []string{"true -1 0s"},
			keys: map[string]string{"cooldown:x": testToken + " (1m0s)", "state:x": state(0, 1, 0, schema.ResultSuccess)},
		},
		{
			name: "a success under --schedule cools down until the next slot, which the record keeps", due: "1h59m59s",
			schedule: nightly, steps: []finishStep{ok}, want: []string{"true -1 0s"},
			keys: map[string]string{"cooldown:x": testToken + " (1h59m59s)", "state:x": slotted},
		},
		{
			// The cooldown stays: a failure never shortens a pause.
			name: "a failure after it drops the slot", due: "1h59m59s",
			schedule: nightly, steps: []finishStep{ok, fail}, want: []string{"true -1 0s", "true 1 1s"},
			keys: map[string]string{"cooldown:x": testToken + " (1h59m59s)", "backoff:x": testToken + " (1s)", "state:x": state(1, 2, 1, schema.ResultFailure)},
		},
		{
			name: "an interrupted run after it drops the slot", due: "1h59m59s",
			schedule: nightly, steps: []finishStep{ok, stopped}, want: []string{"true -1 0s", "true -1 0s"},
			keys: map[string]string{"cooldown:x": testToken + " (1h59m59s)", "state:x": state(0, 2, 0, schema.ResultInterrupted)},
		},
		{
			name: "a success under --cooldown drops an earlier slot", due: "1m0s",
			setup: func(ctx context.Context, rdb *redis.Client, keys schema.Keys) {
				rdb.HSet(ctx, keys.State("x"), "next_slot", 7200000)
			},
			steps: []finishStep{ok}, want: []string{"true -1 0s"},
			keys: map[string]string{"cooldown:x": testToken + " (1m0s)", "state:x": state(0, 1, 0, schema.ResultSuccess)},
		},
		{
			name: "failures double up to MAX", due: "3s",
			steps: []finishStep{fail, {res: schema.ResultTimeout}, {res: schema.ResultLockLost}},
			want:  []string{"true 1 1s", "true 2 2s", "true 3 3s"},
			keys:  map[string]string{"backoff:x": testToken + " (3s)", "state:x": state(3, 3, 3, schema.ResultLockLost)},
		},
		{
			name: "a success resets the count and leaves the backoff to expire", due: "1m0s",
			steps: []finishStep{fail, fail, ok, fail},
			want:  []string{"true 1 1s", "true 2 2s", "true -1 0s", "true 1 1s"},
			// The 2s backoff of the second failure outlasts the new 1s one.
			keys: map[string]string{"backoff:x": testToken + " (2s)", "cooldown:x": testToken + " (1m0s)", "state:x": state(1, 4, 3, schema.ResultFailure)},
		},
		{
			name: "an interrupted run sets no pause and leaves the count", due: "0s",
			setup: func(ctx context.Context, rdb *redis.Client, keys schema.Keys) {
				rdb.HSet(ctx, keys.State("x"), "consecutive_failures", 2)
				// As the failures' finishes counted it.
				rdb.ZAdd(ctx, keys.Failing(), redis.Z{Score: math.Inf(1), Member: "x"})
			},
			steps: []finishStep{stopped}, want: []string{"true -1 0s"},
			keys: map[string]string{"state:x": state(2, 1, 0, schema.ResultInterrupted)},
		},
		{
			name: "an interrupted run of a new item records only the run", due: "0s", steps: []finishStep{stopped}, want: []string{"true -1 0s"},
			keys: map[string]string{"state:x": state(-1, 1, 0, schema.ResultInterrupted)},
		},
		{
			name: "a lost lock is left to its holder and counts as a failure", due: "1h0m0s", steps: []finishStep{{res: schema.ResultLockLost, lost: true}},
			want: []string{"false 1 1s"},
			keys: map[string]string{"lock:x": "someone-else (1h0m0s)", "backoff:x": testToken + " (1s)", "state:x": state(1, 1, 1, schema.ResultLockLost)},
		},
		{
			name: "an operator's longer pause is kept", due: "",
			setup: func(ctx context.Context, rdb *redis.Client, keys schema.Keys) {
				rdb.Set(ctx, keys.Cooldown("x"), "paused by hand", 0)
				rdb.Set(ctx, keys.Backoff("x"), "hold", time.Hour)
			},
			steps: []finishStep{ok, fail},
			want:  []string{"true -1 0s", "true 1 1s"},
			keys:  map[string]string{"cooldown:x": "paused by hand (no expiry)", "backoff:x": "hold (1h0m0s)", "state:x": state(1, 2, 1, schema.ResultFailure)},
		},
		{
			name: "a shorter pause is lengthened", due: "1m0s",
			setup: func(ctx context.Context, rdb *redis.Client, keys schema.Keys) {
				rdb.Set(ctx, keys.Cooldown("x"), "short", 5*time.Second)
			},
			steps: []finishStep{ok}, want: []string{"true -1 0s"},
			keys: map[string]string{"cooldown:x": testToken + " (1m0s)", "state:x": state(0, 1, 0, schema.ResultSuccess)},
		},
		{
			name: "a pause key of another type is not w8y's to overwrite", due: "",
			setup: func(ctx context.Context, rdb *redis.Client, keys schema.Keys) {
				rdb.SAdd(ctx, keys.Cooldown("x"), "member")
			},
			steps: []finishStep{ok}, want: []string{"true -1 0s"},
			keys: map[string]string{"cooldown:x": "set (no expiry)", "state:x": state(0, 1, 0, schema.ResultSuccess)},
		},
		{
			// The key gets the state's expiry, so that it goes away and
			// the item's record can start over.
			name: "a state key of another type is reported and the rest still done", due: "1m0s",
			setup: func(ctx context.Context, rdb *redis.Client, keys schema.Keys) {
				rdb.Set(ctx, keys.State("x"), "not a hash", 0)
			},
			steps: []finishStep{fail, ok},
			want:  []string{"true -1 1s WRONGTYPE", "true -1 0s WRONGTYPE"},
			keys:  map[string]string{"state:x": "not a hash (1h0m0s)", "backoff:x": testToken + " (1s)", "cooldown:x": testToken + " (1m0s)"},
		},
		{
			name: "a count that is not a number is reported", due: "1s",
			setup: func(ctx context.Context, rdb *redis.Client, keys schema.Keys) {
				rdb.HSet(ctx, keys.State("x"), "consecutive_failures", "many")
			},
			steps: []finishStep{fail},
			want:  []string{"true -1 1s ERR"},
			keys:  map[string]string{"state:x": "hash consecutive_failures=many,failures=1,last_end=1000,last_result=failure,runs=1 (1h0m0s)", "backoff:x": testToken + " (1s)"},
		},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reports [2][]string
			var left [2]map[string]string
			for i, colocated := range []bool{true, false} {
				ctx := context.Background()
				keys := schema.Keys{Prefix: fmt.Sprintf("f%d:%v:", n, colocated), Colocated: colocated}
				if tt.setup != nil {
					tt.setup(ctx, rdb, keys)
				}
				rec := &Recorder{Keys: keys, StateTTL: time.Hour, EventsMaxLen: 100}
				f := &Finisher{Client: rdb, Record: rec, Schedule: schedule, Jitter: func() string { return "1" }}
				if tt.schedule != nil {
					f.Schedule = *tt.schedule
				}
				// The script reads Redis' clock for the end's time and the
				// due index; the per-key path records End.At.
				start := rdb.Time(ctx).Val().UnixMilli()
				for _, step := range tt.steps {
					lockKey := keys.Lock("x")
					value := testToken
					if step.lost {
						value = "someone-else"
					}
					rdb.Set(ctx, lockKey, value, time.Hour)
					done, err := f.Finish(ctx, lockKey, testToken, End{Item: "x", Result: step.res, At: time.UnixMilli(1000), Cancel: step.cancel})
					if err != nil {
						t.Fatalf("finish: %v", err)
					}
					report := fmt.Sprintf("%v %d %s", done.Released, done.Failures, done.Delay)
					if done.Problem != "" {
						report += " " + strings.Fields(done.Problem)[0]
					}
					reports[i] = append(reports[i], report)
				}
				if colocated {
					due := ""
					if score, err := rdb.ZScore(ctx, keys.Due(), "x").Result(); err == nil {
						due = (time.Duration(score-float64(start)) * time.Millisecond).Round(time.Second).String()
					}
					if due != tt.due {
						t.Errorf("the due index says %q after the end, want %q", due, tt.due)
					}
				}
				left[i] = dumpKeys(t, rdb, keys)
				if colocated {
					endedAt(t, left[i], start, 1000)
					indexesAgree(t, rdb, keys, "x")
				}
				// The due index and the counts' indexes are kept only where
				// the keys are colocated.
				for _, index := range []string{"due", "locks", "backoffs", "failing"} {
					delete(left[i], index)
				}
				// The token that wakes an idle worker is a signal, not the
				// item's state: the per-key path, on a Cluster without a
				// hash tag, where no worker waits for one, pushes none.
				delete(left[i], "wake")
			}
			if !slices.Equal(reports[0], tt.want) {
				t.Errorf("finishScript reported %q, want %q", reports[0], tt.want)
			}
			// Every end adds an event (see TestRecordBothPaths for its fields).
			want := maps.Clone(tt.keys)
			want["events"] = "stream (1h0m0s)"
			if fmt.Sprint(left[0]) != fmt.Sprint(want) {
				t.Errorf("finishScript left\n%q\nwant\n%q", left[0], want)
			}
			if !slices.Equal(reports[1], reports[0]) {
				t.Errorf("per-key commands reported %q, finishScript %q", reports[1], reports[0])
			}
			if fmt.Sprint(left[1]) != fmt.Sprint(left[0]) {
				t.Errorf("per-key commands left\n%q\nfinishScript\n%q", left[1], left[0])
			}
		})
	}
}

// TestFinishJitter: the delay that finishScript sets is the one that
// backoffDelay computes from the same jitter factor, so the per-key path
// and the script agree on every draw.
func TestFinishJitter(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	b := Backoff{Min: 1300 * time.Millisecond, Max: time.Hour}
	for i := range 20 {
		factor := JitterFactor()
		keys := schema.Keys{Prefix: fmt.Sprintf("j%d:", i), Colocated: true}
		rec := &Recorder{Keys: keys, StateTTL: time.Hour}
		f := &Finisher{Client: rdb, Record: rec, Schedule: Schedule{Backoff: b}, Jitter: func() string { return factor }}
		rdb.HSet(ctx, keys.State("x"), "consecutive_failures", i%5)
		done, err := f.Finish(ctx, keys.Lock("x"), testToken, End{Item: "x", Result: schema.ResultFailure, At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if want := Delay(int64(i%5+1), b, factor); done.Delay != want {
			t.Errorf("failure %d with factor %s: finishScript set %s, Delay says %s", i%5+1, factor, done.Delay, want)
		}
		if pttl := rdb.PTTL(ctx, keys.Backoff("x")).Val(); pttl > done.Delay || pttl < done.Delay-time.Second {
			t.Errorf("backoff key expires in %s, want %s", pttl, done.Delay)
		}
	}
}

const testToken = "host:1:token"

// TestFinishSpendsCancel: the finish deletes a cancel request aimed at its
// run's token, which would otherwise stop the same worker's next run of the
// item (its token is the same), and leaves one aimed at another holder.
func TestFinishSpendsCancel(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	for _, tt := range []struct {
		holder string
		left   int64
	}{{testToken, 0}, {"someone-else", 1}} {
		keys := schema.Keys{Prefix: "c:" + tt.holder + ":", Colocated: true}
		f := &Finisher{Client: rdb, Record: &Recorder{Keys: keys, StateTTL: time.Hour}}
		rdb.Set(ctx, keys.Lock("x"), testToken, time.Hour)
		rdb.HSet(ctx, keys.Cancel("x"), schema.CancelHolder, tt.holder, schema.CancelReason, "r")
		if _, err := f.Finish(ctx, keys.Lock("x"), testToken, End{Item: "x", Result: schema.ResultSuccess, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, keys.Cancel("x")).Val(); n != tt.left {
			t.Errorf("a request aimed at %q: %d left after the finish, want %d", tt.holder, n, tt.left)
		}
	}
}

// TestFinishOnADemotedPrimary: a finish sent to a primary that a failover
// has made a replica, which refuses every write, fails with READONLY as a
// finish that was not applied and may be sent again (Resend), both ways
// (one script, or per key); the worker then sends it to the new primary.
// It must not seem to succeed with its writes refused one by one: not with
// the lock found there, nor with the lock gone (expired or someone else's
// by then). A finish applied in part must not be sent again; per key, any
// command that succeeded counts as applied, as the release that found the
// lock gone does, so that case is not sent again.
func TestFinishOnADemotedPrimary(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t)
	replica := redistest.Start(t, redistest.Args("--replicaof", "127.0.0.1", fmt.Sprint(primary.Port)))
	for _, colocated := range []bool{true, false} {
		keys := schema.Keys{Prefix: fmt.Sprintf("d%v:", colocated), Colocated: colocated}
		primary.Client.Set(ctx, keys.Lock("ours"), testToken, time.Hour)
		primary.Client.Set(ctx, keys.Lock("lost"), "someone-else", time.Hour)
		poll.WaitFor(t, "the replica to hold the locks", func() bool {
			return replica.Client.Exists(ctx, keys.Lock("ours"), keys.Lock("lost")).Val() == 2
		})
		f := &Finisher{Client: replica.Client, Record: &Recorder{Keys: keys, StateTTL: time.Hour, EventsMaxLen: 10}}
		for _, item := range []string{"ours", "lost"} {
			end := End{Item: item, Result: schema.ResultFailure, At: time.Now()}
			_, err := f.Finish(ctx, keys.Lock(item), testToken, end)
			again := colocated || item == "ours"
			if redisconn.Code(err) != "READONLY" || Resend(err) != again {
				t.Errorf("finish of %s on a replica (colocated %v): %v; want READONLY, sent again %v", item, colocated, err, again)
			}
			if inPart := fmt.Errorf("%w (%w)", err, ErrInPart); Resend(inPart) {
				t.Errorf("%v: sent again", inPart)
			}
		}
	}
}

// indexesAgree checks that the counts' indexes say of item what its keys
// say (see schema.Keys.Locks): an entry in the future among the backoffs
// while its backoff lasts, among the failing while its consecutive
// failures are more than 0, and none among the locks once its run ended.
func indexesAgree(t *testing.T, rdb *redis.Client, keys schema.Keys, item string) {
	t.Helper()
	ctx := context.Background()
	now := float64(rdb.Time(ctx).Val().UnixMilli())
	future := func(index string) bool {
		score, err := rdb.ZScore(ctx, index, item).Result()
		return err == nil && score > now
	}
	backoff := rdb.PTTL(ctx, keys.Backoff(item)).Val() > 0 || rdb.PTTL(ctx, keys.Backoff(item)).Val() == -1
	if got := future(keys.Backoffs()); got != backoff {
		t.Errorf("%s: backing off %v, but its entry among the backoffs says %v", item, backoff, got)
	}
	failures, _ := rdb.HGet(ctx, keys.State(item), schema.FieldConsecutiveFailures).Int()
	if got := future(keys.Failing()); got != (failures > 0) {
		t.Errorf("%s: %d consecutive failures, but its entry among the failing says %v", item, failures, got)
	}
	if future(keys.Locks()) {
		t.Errorf("%s: its run ended, but the locks still count it", item)
	}
}
