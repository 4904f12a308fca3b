package integration_test

import (
	"fmt"
	"math"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/take"
)

// TestIdlePickups: each way an item becomes eligible gets it taken by an
// idle worker as promptly as a pass every --idle-wait did (that it makes
// no such pass is TestIdleWorkerDoesNotReadTheList's): an item appended
// from outside, an operator's "run it now" (cooldown deleted, due entry at
// 0), a cooldown that w8y set running out, a lock released by another
// worker's finish, and the lock of a worker killed mid-run expiring. Items
// removed from outside meanwhile leave the list exactly as the writers left
// it.
func TestIdlePickups(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := s.seedCooling(t, "up", 2_000, 10*time.Minute)
	// An item with a key hold:<item> waits for the test to push to its gate.
	child := `if [ "$(redis-cli -p "$REDIS_PORT" exists "hold:$W8Y_ITEM")" = 1 ]; then redis-cli -p "$REDIS_PORT" blpop "gate:$W8Y_ITEM" 0 >/dev/null; fi; ` + stamp("up")
	s.Client.Set(ctx(t), "hold:held", 1, 0)
	s.Client.Set(ctx(t), "hold:doomed", 1, 0)
	// The test SIGSTOPs the idle worker while others take an item; a
	// lease of 30s outlasts such a stop on a loaded machine, where 5s
	// (the default) could run out and stop a child of its own.
	idle := startW8y(t, portEnv(s), "-u", s.URL, "-k", "up", "-c", "-x", "30", "--cooldown", "1500ms", "sh", "-c", child)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the idle worker's log:\n%s", idle.stderrSoFar())
		}
	})
	poll.WaitFor(t, "the worker's first look", func() bool { return s.looks(t) > 0 })
	// within waits for item's next start, which must come no later than
	// bound after since; other items' starts meanwhile are passed over.
	within := func(what, item string, since time.Time, bound time.Duration) run {
		t.Helper()
		// Other items' starts would keep the pops going: bound the wait.
		var r run
		poll.Repeat(t, poll.Timeout, fmt.Sprintf("%s: %q to start", what, item), func() bool {
			r = s.popRun(t)
			if r.cooling {
				t.Errorf("%q started while its cooldown key existed", r.item)
			}
			return r.item == item
		})
		if late := r.at.Sub(since); late > bound {
			t.Errorf("%s: %q started %s after it could, want within %s", what, item, late, bound)
		}
		return r
	}

	// Appended from outside: within --idle-wait (1.5s, at most 1.875s),
	// plus a second for a loaded machine.
	pushed := time.Now()
	s.Client.RPush(ctx(t), "up:list", "new")
	first := within("appended", "new", pushed, 3*time.Second)
	// Its own cooldown of 1.5s runs out: due again, taken within a look.
	within("cooldown over", "new", first.at.Add(1500*time.Millisecond), 2*time.Second)

	// Run now by hand: the cooldown goes, and a due entry says now; no
	// token wakes the worker (w8yctl run-now's would), so its fallback's
	// look finds it, as it finds an outside RPUSH.
	s.Client.Del(ctx(t), "up:cooldown:"+items[700])
	asked := time.Now()
	s.Client.ZAdd(ctx(t), "up:due", redis.Z{Score: 0, Member: items[700]})
	within("run now", items[700], asked, 3*time.Second)

	// Removed from outside while idle: the list keeps what the writers
	// left, and the lost item's entry is dropped, not run.
	s.Client.LRem(ctx(t), "up:list", 0, items[5])
	s.Client.Del(ctx(t), "up:cooldown:"+items[5])
	s.Client.ZAdd(ctx(t), "up:due", redis.Z{Score: 0, Member: items[5]})
	poll.WaitFor(t, "the removed item's due entry to go", func() bool {
		return s.Client.ZScore(ctx(t), "up:due", items[5]).Err() == redis.Nil
	})

	// Released by another worker's finish, without a cooldown. The idle
	// worker is stopped while the other one takes the item, so that it is
	// the other one that does.
	idle.signal(t, syscall.SIGSTOP)
	s.Client.RPush(ctx(t), "up:list", "held")
	other := startW8y(t, portEnv(s), "-u", s.URL, "-k", "up", "-q", "sh", "-c", child)
	poll.WaitFor(t, "held to be taken", func() bool { return s.Client.Exists(ctx(t), "up:lock:held").Val() == 1 })
	idle.signal(t, syscall.SIGCONT)
	s.Client.RPush(ctx(t), "gate:held", "go")
	released := within("released", "held", time.Now(), 3*time.Second)
	other.wait(t).wantExit(t, 0)
	// The idle worker runs held now, and it waits at its gate again; from
	// then on held runs through.
	poll.WaitFor(t, "held to be taken again", func() bool {
		return s.Client.Exists(ctx(t), "up:lock:held").Val() == 1
	})
	if time.Since(released.at) > 3*time.Second {
		t.Errorf("held was taken again %s after the other worker released it, want within a look", time.Since(released.at))
	}
	s.Client.Del(ctx(t), "hold:held")
	s.Client.RPush(ctx(t), "gate:held", "go")
	poll.WaitFor(t, "the idle worker's run of held to end", func() bool {
		return s.Client.Exists(ctx(t), "up:lock:held").Val() == 0
	})

	// A worker killed mid-run: its lock expires after --key-expiry, and the
	// due entry its take wrote brings an idle worker to it then.
	idle.signal(t, syscall.SIGSTOP)
	s.Client.RPush(ctx(t), "up:list", "doomed")
	doomed := startW8y(t, portEnv(s), "-u", s.URL, "-k", "up", "-c", "-q", "--key-expiry", "2s", "sh", "-c", child)
	poll.WaitFor(t, "doomed to be taken", func() bool { return s.Client.Exists(ctx(t), "up:lock:doomed").Val() == 1 })
	dead := s.Client.Get(ctx(t), "up:lock:doomed").Val()
	idle.signal(t, syscall.SIGCONT)
	doomed.signal(t, syscall.SIGKILL)
	doomed.wait(t)
	// The lock is gone, or already the idle worker's: one that takes doomed
	// as the lock expires, in a finish's look, leaves no moment without a
	// lock for the test to see.
	poll.WaitFor(t, "the dead worker's lock to expire", func() bool { return s.Client.Get(ctx(t), "up:lock:doomed").Val() != dead })
	expired := time.Now()
	poll.WaitFor(t, "doomed to be taken again", func() bool {
		holder := s.Client.Get(ctx(t), "up:lock:doomed").Val()
		return holder != "" && holder != dead
	})
	if late := time.Since(expired); late > 2*time.Second {
		t.Errorf("doomed was taken again %s after its lock expired, want within a look", late)
	}
	s.Client.Del(ctx(t), "hold:doomed")
	s.Client.RPush(ctx(t), "gate:doomed", "go")
	within("after the dead worker", "doomed", expired, time.Minute)

	idle.stop(t)
	want := append(slices.Clone(items), "new", "held", "doomed")
	want = slices.DeleteFunc(want, func(item string) bool { return item == items[5] })
	got := s.list(t, "up:list")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the list holds %d items, want the %d that the writers left", len(got), len(want))
	}
}

// TestResumeMakesTheItemDue: w8yctl resume puts the item in the due index,
// so that an idle worker takes it within a look (a second or so) and not
// at its next sweep of the whole list. Here no sweep can come: the fleet's
// sweep key is held for a minute, and --idle-wait is 30s, so only the due
// entry can make the resumed item run promptly.
func TestResumeMakesTheItemDue(t *testing.T) {
	s := withList(t, "rd", "p")
	runCtl(t, nil, s.at("pause", "p")...).mustExit(t, 0)
	if err := s.Client.Set(ctx(t), s.key("sweep"), "test", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	start := s.looks(t)
	worker := s.start("-c", "-q", "--idle-wait", "30s", "sh", "-c", `redis-cli -p "$REDIS_PORT" rpush ran "$W8Y_ITEM" >/dev/null`)
	// The worker's first pass finds p paused; it then probes, and waits for
	// a wake (BLPOP), idle.
	poll.WaitFor(t, "the worker to pass p by, probe and wait for a wake", func() bool {
		waiting, _ := blocked(t, s.server)
		return s.looks(t) >= start+2 && waiting == 1
	})
	if n := s.Client.LLen(ctx(t), "ran").Val(); n != 0 {
		t.Fatalf("p ran %d times while paused", n)
	}
	resumed := time.Now()
	runCtl(t, nil, s.at("resume", "p")...).mustExit(t, 0)
	if _, err := s.Client.BLPop(ctx(t), 5*time.Second, "ran").Result(); err != nil {
		t.Fatalf("p did not run within 5s of resume (%v): resume did not make it due", err)
	}
	t.Logf("resume: p started %s after the command", time.Since(resumed).Round(time.Millisecond))
	drain(t, []*proc{worker})
}

// TestLongIdleWaitStillPicksUpPromptly: an idle worker with a long
// --idle-wait (a minute) still takes an item made due, by an operator's
// run-now (which wakes it) or an outside RPUSH, at its next look: the
// fleet's sweep (every 5s on this list) ends its wait take.SweepGrace after
// it comes due, whatever --idle-wait says; its looks are probes, which run
// no script but the probe's while nothing is due. The deadline, far
// shorter than --idle-wait and roomy for a loaded machine, is a functional
// check, not a timing: the benchmark (scripts/bench-fleet.sh) times it.
func TestLongIdleWaitStillPicksUpPromptly(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := s.seedCooling(t, "lw", 200, 10*time.Minute)
	w := startW8y(t, portEnv(s), "-u", s.URL, "-k", "lw", "-c", "-q", "--cooldown", "1h", "--idle-wait", "1m", "sh", "-c", stamp("lw"))
	// The first take passes over the untried list and elects a sweep (held
	// for a minute and more); the looks after it are probes.
	poll.WaitFor(t, "the first sweep, then a probe", func() bool {
		return s.Client.Exists(ctx(t), "lw:sweep").Val() == 1 && s.Client.Get(ctx(t), "lw:untried").Val() == "0" && s.looks(t) > 3
	})
	scripts := redistest.CommandStats(t, s.Client)["evalsha"]
	began := time.Now()
	const deadline = 10 * time.Second
	for _, tc := range []struct {
		what  string
		item  string
		cause func()
	}{
		{"run-now", items[42], func() {
			s.Client.Del(ctx(t), "lw:cooldown:"+items[42])
			s.Client.ZAdd(ctx(t), "lw:due", redis.Z{Score: 0, Member: items[42]})
		}},
		{"an outside RPUSH", "new", func() { s.Client.RPush(ctx(t), "lw:list", "new") }},
	} {
		asked := time.Now()
		tc.cause()
		r := s.popRun(t)
		if r.item != tc.item || r.cooling {
			t.Fatalf("after %s, %q started (cooling %v), want %q", tc.what, r.item, r.cooling, tc.item)
		}
		if late := r.at.Sub(asked.Truncate(time.Millisecond)); late > deadline {
			t.Errorf("after %s, %q started %s later, want within %s (--idle-wait is a minute)", tc.what, r.item, late, deadline)
		}
		t.Logf("%s: started %s later", tc.what, r.at.Sub(asked.Truncate(time.Millisecond)))
	}
	// Per pickup, three scripts: the look that the probe let through, the
	// run's finish, and the look after it, which finds nothing and leaves
	// the next ones to probes; and for each moment of the fleet's sweep that
	// the two pickups spanned (every take.SweepMin on a list this short),
	// the probe that its wait's end sends and the look of its step (a
	// run-now by hand wakes no one: it is the sweep's moment that finds it,
	// 7 s after the sweep began), and the registry's beat (a script too,
	// every 5 s, as often). Quiet runs count 4 in 7 s; one under a loaded
	// CI run counted 7, over a bound of 6 that left out the sweep and the
	// beats. Without probes, the idle worker would have run one a look,
	// eight a second: 56 in 7 s.
	took := time.Since(began)
	most := 6 + 3*int(math.Ceil(took.Seconds()/take.SweepMin.Seconds()))
	n := redistest.CommandStats(t, s.Client)["evalsha"] - scripts
	if n > most {
		t.Errorf("%d script calls for two pickups in %s, want at most %d: the idle looks ran scripts", n, took.Round(time.Millisecond), most)
	}
	t.Logf("%d script calls for two pickups in %s (at most %d)", n, took.Round(time.Millisecond), most)
	w.stop(t)
}
