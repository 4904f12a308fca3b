package integration_test

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/take"
)

// The first promise: every item comes round again, whatever held it once.
// Each case below holds an item in one of the ways an item can be passed
// over, lets a fleet run, then lets the blocker go (it expires, or it is
// deleted by hand): the item must start again within the bound that
// docs/how-it-works.md states, in a busy fleet (continuous workers with no
// cooldown, which always find something else to take) and under cron (one
// one-shot run after another).

// livenessItems are each case's list.
var livenessItems = []string{"a", "b", "c", "d", "e"}

// lookSlack is what the bound allows past the moment an item may run for
// the fleet's next look to take it: a busy worker looks as soon as its
// child (100ms here) ends, an idle one when its wait for the next due entry
// ends, a cron loop at its next run; the rest is a loaded test machine's,
// where the whole suite runs in parallel on two cores (a cron loop's runs
// were seen 2.5s apart there, each a process started under load): an item
// that the fleet passed over for good would wait without end.
const lookSlack = 3 * time.Second

// sweepBound is the bound for what only the fleet's sweep finds, on a list
// of livenessItems: the sweep's interval, then the look that takes it.
var sweepBound = take.SweepEvery(int64(len(livenessItems))) + lookSlack

// livenessCase is one way of holding an item.
type livenessCase struct {
	name string
	// fresh: the item is held before any worker has tried the list, so
	// that a take passes it over (as the first measurement did);
	// otherwise the fleet runs every item once first.
	fresh bool
	// hold holds an item and returns it with the moment it may run again,
	// or a zero time when release ends the hold.
	hold func(t *testing.T, b *bundle) (item string, free time.Time)
	// release, if set, ends the hold by hand once the fleet has passed the
	// item over, and returns when: only the sweep finds such an item.
	release func(t *testing.T, b *bundle) time.Time
}

func livenessCases() []livenessCase {
	set := func(t *testing.T, b *bundle, key string, d time.Duration) time.Time {
		if err := b.Client.Set(ctx(t), b.key(key), "by-hand", d).Err(); err != nil {
			t.Fatal(err)
		}
		return time.Now().Add(d)
	}
	del := func(key string) func(t *testing.T, b *bundle) time.Time {
		return func(t *testing.T, b *bundle) time.Time {
			if err := b.Client.Del(ctx(t), b.key(key)).Err(); err != nil {
				t.Fatal(err)
			}
			return time.Now()
		}
	}
	return []livenessCase{
		{name: "a lock that w8y did not take", fresh: true, hold: func(t *testing.T, b *bundle) (string, time.Time) {
			return "b", set(t, b, "lock:b", 2*time.Second)
		}},
		{name: "the lock of a holder that died", fresh: true, hold: func(t *testing.T, b *bundle) (string, time.Time) {
			p := b.start("--item", "b", "-x", "2", "-q", "sleep", "100")
			poll.WaitFor(t, "b's lock", func() bool { return b.Client.Exists(ctx(t), b.key("lock:b")).Val() == 1 })
			p.signal(t, syscall.SIGKILL)
			p.wait(t)
			return "b", time.Now().Add(b.Client.PTTL(ctx(t), b.key("lock:b")).Val())
		}},
		{name: "a cooldown that w8y did not write", fresh: true, hold: func(t *testing.T, b *bundle) (string, time.Time) {
			return "b", set(t, b, "cooldown:b", 2*time.Second)
		}},
		{name: "a backoff that w8y did not write", fresh: true, hold: func(t *testing.T, b *bundle) (string, time.Time) {
			return "b", set(t, b, "backoff:b", 2*time.Second)
		}},
		{name: "a pause set by hand, with an expiry", fresh: true, hold: func(t *testing.T, b *bundle) (string, time.Time) {
			b.Client.HSet(ctx(t), b.key("pause:b"), "reason", "by hand")
			b.Client.PExpire(ctx(t), b.key("pause:b"), 2*time.Second)
			return "b", time.Now().Add(2 * time.Second)
		}},
		{name: "a cooldown deleted by hand", fresh: true, hold: func(t *testing.T, b *bundle) (string, time.Time) {
			set(t, b, "cooldown:b", time.Hour)
			return "b", time.Time{}
		}, release: del("cooldown:b")},
		{name: "a pause without expiry deleted by hand", fresh: true, hold: func(t *testing.T, b *bundle) (string, time.Time) {
			b.Client.HSet(ctx(t), b.key("pause:b"), "reason", "by hand")
			return "b", time.Time{}
		}, release: del("pause:b")},
		{name: "a lock without expiry deleted by hand", fresh: true, hold: func(t *testing.T, b *bundle) (string, time.Time) {
			set(t, b, "lock:b", 0)
			return "b", time.Time{}
		}, release: del("lock:b")},
		{name: "the due index lost", hold: func(t *testing.T, b *bundle) (string, time.Time) {
			return "", time.Time{}
		}, release: del("due")},
		{name: "an item appended behind an outside LREM", hold: func(t *testing.T, b *bundle) (string, time.Time) {
			// In one step, as no look can come between them: the list's
			// length is back where it was, and the fleet's mark of what it
			// has tried counts f as tried.
			if _, err := b.Client.TxPipelined(ctx(t), func(pipe redis.Pipeliner) error {
				pipe.RPush(ctx(t), b.key("list"), "f")
				pipe.LRem(ctx(t), b.key("list"), 1, "a")
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return "f", time.Time{}
		}, release: func(t *testing.T, b *bundle) time.Time { return time.Now() }},
	}
}

// TestEveryItemComesRound: each way of holding an item, in a busy fleet and
// under cron: once the hold ends, the item starts within lookSlack of the
// moment it may run (a blocker that expires: a take that passed the item
// over gave it a due entry for then), or within the sweep's interval and
// lookSlack (a blocker deleted by hand, an entry lost, an item behind an
// outside LREM: the fleet's sweep finds it, busy or not).
func TestEveryItemComesRound(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"busy", "cron"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			for n, tc := range livenessCases() {
				t.Run(tc.name, func(t *testing.T) { comesRound(t, mode, fmt.Sprintf("lv%d", n), tc) })
			}
		})
	}
}

// comesRound runs one case in mode (busy or cron) under prefix.
func comesRound(t *testing.T, mode, prefix string, tc livenessCase) {
	b := setup(t, prefix)
	b.items(livenessItems...)
	child := []string{"sleep", "0.1"}
	var take func()
	switch mode {
	case "busy":
		started := false
		take = func() {
			if !started {
				for range 3 {
					b.start(append([]string{"-c", "-q", "-x", "2"}, child...)...)
				}
				started = true
			}
			time.Sleep(20 * time.Millisecond) // the polls' pace, not a synchronisation
		}
	case "cron":
		take = func() {
			if r := b.run(append([]string{"-q", "-x", "2"}, child...)...); r.Code != 0 {
				t.Fatalf("a one-shot run: %s", r)
			}
		}
	}
	// ran reports whether item started at or after since, as its state
	// hash records the take.
	ran := func(item string, since time.Time) (time.Time, bool) {
		start, err := strconv.ParseInt(b.Client.HGet(ctx(t), b.key("state:"+item), "last_start").Val(), 10, 64)
		at := time.UnixMilli(start)
		return at, err == nil && !at.Before(since)
	}
	runUntil := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		poll.Repeat(t, within, what, func() bool {
			if cond() {
				return true
			}
			take()
			return false
		})
	}
	if !tc.fresh {
		begin := time.Now()
		runUntil("every item to run once", 30*time.Second, func() bool {
			for _, item := range livenessItems {
				if _, ok := ran(item, begin); !ok {
					return false
				}
			}
			return true
		})
	}
	item, free := tc.hold(t, b)
	watch := []string{item}
	if item == "" {
		watch = livenessItems
	}
	bound := lookSlack
	if tc.release != nil {
		// Held until released: the fleet passes the item over meanwhile.
		held := time.Now()
		runUntil("a second of takes", 2*time.Second, func() bool { return time.Since(held) > time.Second })
		free, bound = tc.release(t, b), sweepBound
	}
	last := free
	for _, it := range watch {
		runUntil(fmt.Sprintf("%s to start after %s", it, free.Format("15:04:05.000")), bound+10*time.Second, func() bool {
			_, ok := ran(it, free)
			return ok
		})
		at, _ := ran(it, free)
		if at.After(last) {
			last = at
		}
		if late := at.Sub(free); late > bound {
			t.Errorf("%s started %s after it could run, want within %s", it, late.Round(time.Millisecond), bound)
		}
	}
	t.Logf("%s: %v started %s after it could run (bound %s)", mode, watch, last.Sub(free).Round(time.Millisecond), bound)
}

// TestFairness: over a busy run, with no cooldown (every item always
// eligible, the workers always busy) and with one (workers go idle and take
// what comes due), the item run least runs at least a third as often as
// the item run most: the due index serves items oldest first, and nothing
// keeps an item out of it.
func TestFairness(t *testing.T) {
	t.Parallel()
	for _, cooldown := range []string{"", "300ms"} {
		t.Run("cooldown "+cooldown, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "fair")
			items := redistest.Items(12)
			b.items(items...)
			args := []string{"-c", "-q", "-x", "2"}
			if cooldown != "" {
				args = append(args, "--cooldown", cooldown)
			}
			var workers []*proc
			for range 4 {
				workers = append(workers, b.start(append(args, "sleep", "0.05")...))
			}
			runs := func() map[string]int {
				out := map[string]int{}
				for _, item := range items {
					n, _ := strconv.Atoi(b.Client.HGet(ctx(t), b.key("state:"+item), "runs").Val())
					out[item] = n
				}
				return out
			}
			// Until the least-run item has run 10 times, or 20 seconds.
			poll.Poll(20*time.Second, func() bool {
				for _, n := range runs() {
					if n < 10 {
						return false
					}
				}
				return true
			})
			drain(t, workers)
			counts := runs()
			least, most := counts[items[0]], counts[items[0]]
			for _, n := range counts {
				least, most = min(least, n), max(most, n)
			}
			if least*3 < most {
				t.Errorf("runs per item %v: the least run %d times, the most %d: want at least a third", counts, least, most)
			}
			t.Logf("cooldown %q: runs per item from %d to %d", cooldown, least, most)
		})
	}
}
