package take

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

// takeOutcome is everything a series of Takes leaves behind: what each
// returned, the list, every lock key with its value, and the warnings.
type takeOutcome struct {
	Taken    []string
	List     []string
	Locks    map[string]string
	Warnings []string
}

// takeSetup is the state of Redis before a series of Takes, under a prefix.
type takeSetup struct {
	items    []string
	locked   []string // items whose lock someone else holds
	hashLock []string // items whose lock key is a hash
	ours     []string // items whose lock already holds our token
	cooling  []string // items with a cooldown key
	coolHash []string // items whose cooldown key is a hash
	backing  []string // items with a backoff key
	paused   []string // items with an operator's pause key
}

func (s takeSetup) seed(t *testing.T, rdb *redis.Client, keys schema.Keys) {
	t.Helper()
	ctx := context.Background()
	if len(s.items) > 0 {
		if err := rdb.RPush(ctx, keys.List(), redistest.Values(s.items)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, item := range s.locked {
		rdb.Set(ctx, keys.Lock(item), "someone-else", time.Hour)
	}
	for _, item := range s.hashLock {
		rdb.HSet(ctx, keys.Lock(item), "f", "v")
	}
	for _, item := range s.ours {
		rdb.Set(ctx, keys.Lock(item), testToken, time.Hour)
	}
	for _, item := range s.cooling {
		rdb.Set(ctx, keys.Cooldown(item), "someone", time.Hour)
	}
	for _, item := range s.coolHash {
		rdb.HSet(ctx, keys.Cooldown(item), "f", "v")
	}
	for _, item := range s.paused {
		rdb.HSet(ctx, keys.Pause(item), schema.PauseFieldReason, "broken")
	}
	for _, item := range s.backing {
		rdb.Set(ctx, keys.Backoff(item), "someone", time.Hour)
	}
}

const testToken = "host:1:token"

// testTaker returns a Taker for prefix on rdb that logs JSON to logs.
// Where colocated, it takes in batches of batch candidates.
func testTaker(client Client, prefix string, colocated bool, batch int, logs *bytes.Buffer) *Taker {
	return &Taker{
		Client: client, Keys: schema.Keys{Prefix: prefix, Colocated: colocated}, Token: testToken, TTL: time.Minute,
		MaxItemLen: 100, Batch: batch, Log: zerolog.New(logs),
	}
}

// takeAll calls Take takes times, each on a pass of its own, releasing each
// lock taken, and describes what it left.
func takeAll(t *testing.T, rdb *redis.Client, r *Taker, takes int, logs *bytes.Buffer) takeOutcome {
	t.Helper()
	return takeWith(t, rdb, r, r.Pass, takes, logs)
}

// takeWith is takeAll with the passes that pass starts.
func takeWith(t *testing.T, rdb *redis.Client, r *Taker, pass func() *Pass, takes int, logs *bytes.Buffer) takeOutcome {
	t.Helper()
	ctx := context.Background()
	var out takeOutcome
	for range takes {
		taken, err := pass().Take(ctx, nil)
		switch {
		case errors.Is(err, ErrNoWork):
			out.Taken = append(out.Taken, "(no work)")
		case err != nil:
			t.Fatalf("Take: %v", err)
		default:
			item := taken.Item
			if left := time.Until(taken.Expires); taken.Key != r.Keys.Lock(item) || taken.Token != testToken || left <= 0 || left > time.Minute {
				t.Errorf("Take(%q) returned %+v", item, taken)
			}
			out.Taken = append(out.Taken, item)
			// As the worker does: the next Take comes after the release.
			if _, err := finish.Release(ctx, rdb, taken.Key, taken.Token, item); err != nil {
				t.Fatal(err)
			}
		}
	}
	out.List = rdb.LRange(ctx, r.Keys.List(), 0, -1).Val()
	out.Locks = map[string]string{}
	for _, key := range rdb.Keys(ctx, r.Keys.Lock("*")).Val() {
		value, err := rdb.Get(ctx, key).Result()
		if err != nil {
			value = "(" + rdb.Type(ctx, key).Val() + ")"
		}
		out.Locks[strings.TrimPrefix(key, r.Keys.Prefix)] = value
	}
	for line := range strings.Lines(logs.String()) {
		var entry struct{ Level, Item, Message string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out.Warnings = append(out.Warnings, entry.Level+" "+entry.Message+": "+entry.Item)
	}
	return out
}

// TestBatchedTakeLeavesRedisAsPerCandidate runs the same Takes with both paths on
// the same data: they must take the same items and leave the same list,
// locks and warnings. Small batches make the batched take cross several calls.
func TestBatchedTakeLeavesRedisAsPerCandidate(t *testing.T) {
	rdb := redistest.Start(t).Client
	long := strings.Repeat("x", 101)
	tests := []struct {
		name  string
		setup takeSetup
		batch int
		takes int
		want  []string // what the Takes return, to check the reference too
	}{
		{"missing list", takeSetup{}, 3, 1, []string{"(no work)"}},
		{"all free", takeSetup{items: redistest.Items(5)}, 3, 6, []string{"i0", "i1", "i2", "i3", "i4", "i0"}},
		{"all locked", takeSetup{items: redistest.Items(7), locked: redistest.Items(7)}, 3, 2, []string{"(no work)", "(no work)"}},
		{"free in the third batch", takeSetup{items: redistest.Items(8), locked: redistest.Items(7)}, 3, 2, []string{"i7", "i7"}},
		{"free at a batch's end", takeSetup{items: redistest.Items(8), locked: slices.Delete(redistest.Items(8), 5, 6)}, 3, 2, []string{"i5", "i5"}},
		{"every other free", takeSetup{items: redistest.Items(9), locked: []string{"i0", "i2", "i4", "i6", "i8"}}, 2, 5, []string{"i1", "i3", "i5", "i7", "i1"}},
		{"one batch exactly", takeSetup{items: redistest.Items(4), locked: redistest.Items(4)[:3]}, 4, 2, []string{"i3", "i3"}},
		{"lock key of another type", takeSetup{items: []string{"h", "g"}, hashLock: []string{"h"}}, 3, 2, []string{"g", "g"}},
		// A lock that holds our token can only be left from a call whose
		// reply was lost; both paths pass it by until it expires.
		{"lock holding our token", takeSetup{items: []string{"a", "b", "c"}, locked: []string{"a"}, ours: []string{"b"}}, 2, 2, []string{"c", "c"}},
		{
			"bad items skipped and rotated",
			takeSetup{items: []string{"", "a\x00b", "p", long, "q", "r"}, locked: []string{"p"}},
			2, 3, []string{"q", "r", "q"},
		},
		{"only bad items", takeSetup{items: []string{"", long, "\x00"}}, 2, 1, []string{"(no work)"}},
		{"duplicates", takeSetup{items: []string{"d", "d", "e", "d"}}, 2, 3, []string{"d", "d", "e"}},
		// Cooldown and backoff keys make an item wait, whoever set them.
		{"cooling and backing off passed by", takeSetup{items: redistest.Items(6), cooling: []string{"i0", "i3"}, backing: []string{"i1", "i4"}}, 2, 3, []string{"i2", "i5", "i2"}},
		{"every item waits", takeSetup{items: redistest.Items(4), cooling: []string{"i0", "i2"}, backing: []string{"i1", "i3"}}, 3, 1, []string{"(no work)"}},
		// The batch reads cooldowns with MGET, which reads no value from a
		// key of another type: such a key still makes its item wait.
		{"cooldown key of another type", takeSetup{items: redistest.Items(4), coolHash: []string{"i0", "i2"}, cooling: []string{"i3"}}, 3, 2, []string{"i1", "i1"}},
		// So do pause keys, of any type, without an expiry.
		{"paused passed by", takeSetup{items: redistest.Items(4), paused: []string{"i0", "i2"}}, 2, 3, []string{"i1", "i3", "i1"}},
		{"every item paused or waits", takeSetup{items: redistest.Items(3), cooling: []string{"i0"}, paused: []string{"i1", "i2"}}, 2, 1, []string{"(no work)"}},
		{"waiting and locked", takeSetup{items: redistest.Items(5), locked: []string{"i0", "i1"}, cooling: []string{"i1", "i2"}, backing: []string{"i3"}}, 2, 2, []string{"i4", "i4"}},
		// A cooldown key of any type pauses the item: no warning about a lock
		// key of another type that the item would not get to anyway.
		{"waiting item with a lock key of another type", takeSetup{items: []string{"h", "g"}, hashLock: []string{"h"}, cooling: []string{"h"}}, 3, 1, []string{"g"}},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var outcomes [2]takeOutcome
			for i, colocated := range []bool{false, true} {
				keys := schema.Keys{Prefix: fmt.Sprintf("t%d:%v:", n, colocated)}
				tt.setup.seed(t, rdb, keys)
				var logs bytes.Buffer
				outcomes[i] = takeAll(t, rdb, testTaker(rdb, keys.Prefix, colocated, tt.batch, &logs), tt.takes, &logs)
			}
			each, batched := outcomes[0], outcomes[1]
			if !slices.Equal(each.Taken, tt.want) {
				t.Errorf("per candidate took %q, want %q", each.Taken, tt.want)
			}
			compareOutcomes(t, each, batched)
		})
	}
}

func compareOutcomes(t *testing.T, each, batched takeOutcome) {
	t.Helper()
	if !slices.Equal(batched.Taken, each.Taken) {
		t.Errorf("the batched take took %q, per candidate %q", batched.Taken, each.Taken)
	}
	if !slices.Equal(batched.List, each.List) {
		t.Errorf("the batched take left the list\n%q\nper candidate\n%q", batched.List, each.List)
	}
	if fmt.Sprint(batched.Locks) != fmt.Sprint(each.Locks) {
		t.Errorf("the batched take left the locks %q, per candidate %q", batched.Locks, each.Locks)
	}
	if !slices.Equal(batched.Warnings, each.Warnings) {
		t.Errorf("the batched take warned\n%q\nper candidate\n%q", batched.Warnings, each.Warnings)
	}
}

// interruptingClient runs write once, just before the call that starts the
// second batch: the (batch+1)th LMOVE of the per-candidate path, or the
// second EVALSHA of the batched take. It stands for another program that changes
// the list between two of Take's round trips.
type interruptingClient struct {
	Client
	batch int
	calls int
	write func()
	wrote bool
}

func (c *interruptingClient) tick(before int) {
	c.calls++
	if c.calls == before {
		c.write()
		c.wrote = true
	}
}

func (c *interruptingClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	// The per-candidate path's each.lua is not a batch.
	if sha == batchScript.Hash() {
		c.tick(2)
	}
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

func (c *interruptingClient) LMove(ctx context.Context, src, dst, srcpos, dstpos string) *redis.StringCmd {
	c.tick(c.batch + 1)
	return c.Client.LMove(ctx, src, dst, srcpos, dstpos)
}

// TestBatchedTakeSeesWritesBetweenBatches: another program that changes the list
// between two batches affects the batched take as it does the per-candidate path,
// and the pass still looks at no more candidates than the list held at its
// start.
func TestBatchedTakeSeesWritesBetweenBatches(t *testing.T) {
	r := redistest.Start(t)
	rdb := r.Client
	// The batched take's EVALSHA must not fail with NOSCRIPT, which would count a
	// batch twice.
	if err := batchScript.Load(context.Background(), rdb).Err(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name  string
		write func(list string)
		takes int
		want  []string
	}{
		{"free item pushed at the head", func(list string) { rdb.LPush(ctx, list, "new") }, 1, []string{"new"}},
		{"free item pushed at the tail is past the pass", func(list string) { rdb.RPush(ctx, list, "late") }, 2, []string{"(no work)", "late"}},
		{"list shrinks below the candidates left", func(list string) {
			for _, item := range []string{"i3", "i4", "i5", "i6", "i0"} {
				rdb.LRem(ctx, list, 0, item)
			}
		}, 1, []string{"(no work)"}},
		{"list deleted", func(list string) { rdb.Del(ctx, list) }, 1, []string{"(no work)"}},
		{"list replaced by free items", func(list string) {
			rdb.Del(ctx, list)
			rdb.RPush(ctx, list, "x", "y")
		}, 2, []string{"x", "y"}},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var outcomes [2]takeOutcome
			for i, colocated := range []bool{false, true} {
				keys := schema.Keys{Prefix: fmt.Sprintf("w%d:%v:", n, colocated)}
				takeSetup{items: redistest.Items(7), locked: redistest.Items(7)}.seed(t, rdb, keys)
				client := &interruptingClient{Client: rdb, batch: 3, write: func() { tt.write(keys.List()) }}
				var logs bytes.Buffer
				outcomes[i] = takeAll(t, rdb, testTaker(client, keys.Prefix, colocated, 3, &logs), tt.takes, &logs)
				if !client.wrote {
					t.Fatalf("the write never ran (%d calls)", client.calls)
				}
			}
			if !slices.Equal(outcomes[0].Taken, tt.want) {
				t.Errorf("per candidate took %q, want %q", outcomes[0].Taken, tt.want)
			}
			compareOutcomes(t, outcomes[0], outcomes[1])
		})
	}
}

// TestBatchedTakeSurvivesScriptFlush: SCRIPT FLUSH (or a restarted server) empties
// the script cache; the next Take loads the script again without an error.
func TestBatchedTakeSurvivesScriptFlush(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "flush:"}
	takeSetup{items: []string{"a", "b", "c"}}.seed(t, rdb, keys)
	var logs bytes.Buffer
	r := testTaker(rdb, keys.Prefix, true, 0, &logs)
	for _, want := range []string{"a", "b", "c"} {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		taken, err := r.Pass().Take(ctx, nil)
		if err != nil || taken.Item != want {
			t.Fatalf("Take after SCRIPT FLUSH = %q, %v; want %q", taken.Item, err, want)
		}
	}
}

// TestBatchedTakeStopsBetweenBatches: a closed stop channel ends Take before it
// sends anything.
func TestBatchedTakeStopsBetweenBatches(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "stop:"}
	takeSetup{items: redistest.Items(3)}.seed(t, rdb, keys)
	stop := make(chan struct{})
	close(stop)
	var logs bytes.Buffer
	if _, err := testTaker(rdb, keys.Prefix, true, 0, &logs).Pass().Take(ctx, stop); !errors.Is(err, jobctl.ErrStopped) {
		t.Fatalf("Take with stop closed = %v, want jobctl.ErrStopped", err)
	}
	if got := rdb.LRange(ctx, keys.List(), 0, -1).Val(); !slices.Equal(got, redistest.Items(3)) {
		t.Errorf("list %q after a stopped Take, want it untouched", got)
	}
}

// TestBatchedTakeErrors: a list key of the wrong type is the same fatal error
// with the script or without, by a pass or a look, in the words every
// command gives it; and a lost server is a retryable one.
func TestBatchedTakeErrors(t *testing.T) {
	r := redistest.Start(t)
	ctx := context.Background()
	r.Client.HSet(ctx, "wrong:list", "f", "v")
	var logs bytes.Buffer
	for _, colocated := range []bool{true, false} {
		taker := testTaker(r.Client, "wrong:", colocated, 0, &logs)
		for name, pass := range map[string]func() *Pass{"a pass": taker.Pass, "a look": taker.LookFirst} {
			_, err := pass().Take(ctx, nil)
			if want := `"wrong:list" holds a hash, not a list of items`; !errors.Is(err, redisconn.ErrRefused) || err.Error() != want {
				t.Errorf("%s on a hash (colocated %v) = %v, want redisconn.ErrRefused saying %s", name, colocated, err, want)
			}
		}
	}

	gone := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer gone.Close()
	_, err := testTaker(gone, "gone:", true, 0, &logs).Pass().Take(ctx, nil)
	if !errors.Is(err, redisconn.ErrUnavailable) {
		t.Errorf("Take without a server = %v, want redisconn.ErrUnavailable", err)
	}
}

// clientLoaded is redistest.Client with s loaded, so that the script's
// first EVALSHA, which a test's wrapping client hooks into, does not fail
// with NOSCRIPT and go again as EVAL, past the hook.
func clientLoaded(t *testing.T, s *script.Script) (*redis.Client, context.Context) {
	t.Helper()
	rdb, ctx := redistest.Client(t)
	if err := s.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	return rdb, ctx
}

// timingClient records when each batched call was sent.
type timingClient struct {
	Client
	sent []time.Time
}

func (c *timingClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.sent = append(c.sent, time.Now())
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

// TestBatchedTakeLockExpiry: the lock's expires is counted from when the call that
// took it was sent: not later, when the server may already have counted
// down, and not from an earlier batch, which would give up the lock early.
func TestBatchedTakeLockExpiry(t *testing.T) {
	rdb, ctx := clientLoaded(t, batchScript)
	keys := schema.Keys{Prefix: "exp:"}
	takeSetup{items: redistest.Items(5), locked: redistest.Items(4)}.seed(t, rdb, keys)
	client := &timingClient{Client: rdb}
	var logs bytes.Buffer
	r := testTaker(client, keys.Prefix, true, 2, &logs)
	taken, err := r.Pass().Take(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(client.sent) != 3 {
		t.Fatalf("%d calls, want 3 batches of 2", len(client.sent))
	}
	earliest, latest := client.sent[1].Add(r.TTL), client.sent[2].Add(r.TTL)
	if !taken.Expires.After(earliest) || taken.Expires.After(latest) {
		t.Errorf("expires %s, want after the second call's %s and by the third's %s", taken.Expires, earliest, latest)
	}
}

// TestBatchedTakeIdlePassWritesNothing: a pass over a short list whose locks are
// all taken goes round it whole, which leaves it as it was: the script must
// not rewrite it, since idle workers make such passes all day.
func TestBatchedTakeIdlePassWritesNothing(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "idle:"}
	takeSetup{items: redistest.Items(5), locked: redistest.Items(5)}.seed(t, rdb, keys)
	// The fleet has seen the list: a first pass starts the marks.
	rdb.Set(ctx, keys.Untried(), 0, 0)
	rdb.Set(ctx, keys.Seen(), 5, 0)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if _, err := testTaker(rdb, keys.Prefix, true, 0, &logs).Pass().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
		t.Fatalf("Take = %v, want ErrNoWork", err)
	}
	stats := redistest.CommandStats(t, rdb)
	for _, cmd := range []string{"rpush", "ltrim", "set"} {
		if stats[cmd] != 0 {
			t.Errorf("an idle pass ran %s: %v", cmd, stats)
		}
	}
}

// TestPassTakesSeveral: a pass that goes on after each item it takes (as
// --parallel does) looks at each candidate at most once, takes each free
// item once, and leaves the list as a pass that took nothing would: rotated
// by exactly its length. Both paths alike.
func TestPassTakesSeveral(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	tests := []struct {
		name  string
		setup takeSetup
		batch int
		want  []string
	}{
		{"more free items than takes", takeSetup{items: redistest.Items(5)}, 2, []string{"i0", "i1", "i2", "i3", "i4"}},
		{"some locked or waiting", takeSetup{items: redistest.Items(7), locked: []string{"i1"}, cooling: []string{"i3"}, backing: []string{"i4"}}, 3, []string{"i0", "i2", "i5", "i6"}},
		{"duplicates taken once", takeSetup{items: []string{"d", "e", "d", "d", "f"}}, 2, []string{"d", "e", "f"}},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lists [2][]string
			for i, colocated := range []bool{false, true} {
				keys := schema.Keys{Prefix: fmt.Sprintf("p%d:%v:", n, colocated)}
				tt.setup.seed(t, rdb, keys)
				var logs bytes.Buffer
				pass := testTaker(rdb, keys.Prefix, colocated, tt.batch, &logs).Pass()
				var taken []string
				for {
					got, err := pass.Take(ctx, nil)
					if errors.Is(err, ErrNoWork) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if len(taken) > len(tt.setup.items) {
						t.Fatalf("the pass took %q and goes on", taken)
					}
					// The locks stay held, as children run meanwhile.
					if v := rdb.Get(ctx, got.Key).Val(); v != testToken {
						t.Errorf("lock of %q holds %q", got.Item, v)
					}
					taken = append(taken, got.Item)
				}
				if !slices.Equal(taken, tt.want) {
					t.Errorf("colocated %v: the pass took %q, want %q", colocated, taken, tt.want)
				}
				lists[i] = rdb.LRange(ctx, keys.List(), 0, -1).Val()
				if !slices.Equal(lists[i], tt.setup.items) {
					t.Errorf("colocated %v: the list is %q after a whole pass, want %q", colocated, lists[i], tt.setup.items)
				}
			}
		})
	}
}
