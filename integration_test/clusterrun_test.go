package integration_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// checkPause fails the test unless key exists with an expiry in [min, max],
// as Redis reports it (PTTL, which a cluster client reads from the key's
// node).
func checkPause(t *testing.T, c redis.Cmdable, key string, min, max time.Duration) {
	t.Helper()
	left, err := c.PTTL(ctx(t), key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	// go-redis reports PTTL's -2 (no key) and -1 (no expiry) as these.
	if left < min || left > max {
		t.Errorf("%s expires in %v, want between %v and %v", key, left, min, max)
	}
}

// checkStreak fails the test unless the state hash of item under prefix
// counts want consecutive failures.
func checkStreak(t *testing.T, c redis.Cmdable, prefix, item, want string) {
	t.Helper()
	if got := c.HGet(ctx(t), prefix+"state:"+item, "consecutive_failures").Val(); got != want {
		t.Errorf("%s has %q consecutive failures, want %q", prefix+item, got, want)
	}
}

// TestClusterSchedule runs the fleet schedule on a Cluster, with a hash tag
// (internal/take's batch.lua checks the cooldown and backoff in the take,
// internal/finish's finish.lua sets them in the finish) and without (the keys
// in different slots: the pipelined EXISTS of take's per-candidate pass, and
// count.lua and pause.lua one key each). A success
// with --cooldown and a failure with --failure-backoff must leave their keys
// with the right expiry and the right count, another worker given neither
// flag must pass both items by, and deleting a key must let its item run at
// once.
func TestClusterSchedule(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, tt := range []struct {
		name, prefix string
		oneSlot      bool
	}{
		{"hash tag", "{sch}:", true},
		{"no hash tag", "sch:", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.prefix
			if err := c.Client.RPush(ctx(t), p+"list", "a", "b").Err(); err != nil {
				t.Fatal(err)
			}
			// Without a hash tag, the keys must really live apart, or the
			// test would prove nothing about the per-key path.
			c.spreadOrNot(t, tt.oneSlot, p+"list", p+"lock:a", p+"cooldown:a", p+"backoff:b", p+"state:a", p+"state:b")
			c.resetStats(t)
			base := []string{"--redis-cluster", "-u", c.URL, "-k", p}
			run := func(env []string, args ...string) result {
				return runW8y(t, env, append(slices.Clone(base), args...)...)
			}

			r := run(nil, "--cooldown", "1h", "printf", "%s", "{}")
			r.mustExit(t, 0)
			r.wantStdout(t, "a")
			checkPause(t, c.Client, p+"cooldown:a", 59*time.Minute, time.Hour)
			checkStreak(t, c.Client, p, "a", "0")

			// The delay after a first failure is MIN, less up to a quarter
			// of jitter.
			r = run([]string{"CODE=3"}, "--failure-backoff", "20m,1h", "sh", "-c", `printf %s "$W8Y_ITEM"; exit $CODE`)
			r.mustExit(t, 3)
			r.wantStdout(t, "b")
			checkPause(t, c.Client, p+"backoff:b", 15*time.Minute-time.Second, 20*time.Minute)
			checkStreak(t, c.Client, p, "b", "1")
			if n := c.Client.Exists(ctx(t), p+"lock:a").Val() + c.Client.Exists(ctx(t), p+"lock:b").Val(); n != 0 {
				t.Errorf("%d lock(s) left behind", n)
			}

			// Another worker, given neither flag, honours both keys: the
			// pass finds nothing to take.
			r = run(nil, "--no-work-exit-code", "4", "printf", "ran %s", "{}")
			r.wantExit(t, 4)
			r.wantStdout(t, "")

			// Deleting the cooldown and making the item due (as w8yctl
			// run-now does: with a hash tag, a key deleted by hand alone
			// waits for the fleet's sweep) runs its item at once; the
			// backoff too, and its success resets the count.
			runNow := func(item, key string) {
				t.Helper()
				if err := c.Client.Del(ctx(t), key).Err(); err != nil {
					t.Fatal(err)
				}
				if err := c.Client.ZAdd(ctx(t), p+"due", redis.Z{Score: 0, Member: item}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			runNow("a", p+"cooldown:a")
			r = run(nil, "printf", "%s", "{}")
			r.wantExit(t, 0)
			r.wantStdout(t, "a")
			runNow("b", p+"backoff:b")
			r = run(nil, "--cooldown", "1h", "printf", "%s", "{}")
			r.wantExit(t, 0)
			r.wantStdout(t, "b")
			checkStreak(t, c.Client, p, "b", "0")
			checkPause(t, c.Client, p+"cooldown:b", 59*time.Minute, time.Hour)

			// The path that ran: the scan takes with scripts alone, which
			// keep the fleet's marks; the per-key path keeps none, and
			// rotates with LMOVE.
			if scripted, lmoves := c.scripted(t, p), c.commandCalls(t, "lmove"); scripted != tt.oneSlot || !scripted && lmoves == 0 {
				t.Errorf("scripted takes %v, %d LMOVE calls: the wrong path ran", scripted, lmoves)
			}
			if got := c.Client.LRange(ctx(t), p+"list", 0, -1).Val(); len(got) != 2 {
				t.Errorf("list %q lost or gained items", got)
			}
		})
	}
}

// TestClusterParallel runs --parallel on a Cluster without a hash tag, where
// each child's lock, refresh and finish go to the node of its item's keys:
// one-shot, up to N distinct free items from one pass, all running at once
// under the worker's token; continuous, N children at a time, never an item
// twice at once.
func TestClusterParallel(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	const p = "cpar:"
	items := []string{"a", "b", "c", "d", "e", "f"}
	if err := c.Client.RPush(ctx(t), p+"list", redistest.Values(items)...).Err(); err != nil {
		t.Fatal(err)
	}
	var locks []string
	for _, item := range items {
		locks = append(locks, p+"lock:"+item)
	}
	c.spreadOrNot(t, false, locks...)
	if err := c.Client.Set(ctx(t), p+"lock:b", "someone-else", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Each child says it started, then waits for the test's go-ahead.
	w := startW8y(t, []string{"DIR=" + dir}, "--redis-cluster", "-u", c.URL, "-k", p, "-q", "--parallel", "4", "sh", "-c",
		`touch "$DIR/started.$W8Y_ITEM"; while [ ! -e "$DIR/go" ]; do sleep 0.02; done`)
	started := func() []string {
		names, _ := filepath.Glob(filepath.Join(dir, "started.*"))
		var got []string
		for _, name := range names {
			got = append(got, filepath.Ext(name)[1:])
		}
		slices.Sort(got)
		return got
	}
	poll.WaitFor(t, "four children", func() bool { return len(started()) >= 4 })
	if got := started(); !slices.Equal(got, []string{"a", "c", "d", "e"}) {
		t.Errorf("started %q, want a c d e: distinct, free, in list order", got)
	}
	holders := map[string]bool{}
	for _, item := range started() {
		holder := c.Client.Get(ctx(t), p+"lock:"+item).Val()
		if holder == "" {
			t.Errorf("%q runs without its lock", item)
		}
		holders[holder] = true
	}
	if len(holders) != 1 {
		t.Errorf("lock holders %v, want the one w8y's token", holders)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.wait(t).wantExit(t, 0)
	if got := started(); len(got) != 4 {
		t.Errorf("started %q: one-shot takes at most --parallel", got)
	}
	if got := c.Client.LRange(ctx(t), p+"list", 0, -1).Val(); !slices.Equal(got, []string{"f", "a", "b", "c", "d", "e"}) {
		t.Errorf("list %q, want the pass to stop after e", got)
	}
	for _, item := range items {
		if n := c.Client.Exists(ctx(t), p+"lock:"+item).Val(); (n == 1) != (item == "b") {
			t.Errorf("lock of %q: %d, want only b's, someone else's, left", item, n)
		}
	}

	// Continuous: three children at a time over eight free items, until
	// --max-items; the two slow ones run long enough for their locks to be
	// refreshed (-x 1: every third of a second).
	if err := c.Client.Del(ctx(t), p+"lock:b").Err(); err != nil {
		t.Fatal(err)
	}
	items = append(items, "x-slow", "y-slow")
	if err := c.Client.RPush(ctx(t), p+"list", "x-slow", "y-slow").Err(); err != nil {
		t.Fatal(err)
	}
	const maxItems = 30
	run := t.TempDir()
	r := runW8y(t, []string{"DIR=" + run, "SLOW=0.5"}, "--redis-cluster", "-u", c.URL, "-k", p, "-c", "-x", "1",
		"--parallel", "3", "--max-items", itoa(maxItems), "--idle-wait", "20ms", "--log-level", "warn", "sh", "-c", overlapChild)
	r.wantExit(t, 0)
	if n := len(lines(t, run+"/runs")); n != maxItems {
		t.Errorf("%d runs, want --max-items %d", n, maxItems)
	}
	noOverlaps(t, run)
	got := c.Client.LRange(ctx(t), p+"list", 0, -1).Val()
	slices.Sort(got)
	slices.Sort(items)
	if !slices.Equal(got, items) {
		t.Errorf("list %q lost or gained items", got)
	}
	for _, item := range items {
		if n := c.Client.Exists(ctx(t), p+"lock:"+item).Val(); n != 0 {
			t.Errorf("lock of %q left behind", item)
		}
	}
}
