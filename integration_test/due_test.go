package integration_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/take"
)

// coolAll gives every item of items a cooldown key set by hand, which no
// due entry announces: only a pass over the list would find them free.
func (s *server) coolAll(t *testing.T, prefix string, items []string, d time.Duration) {
	t.Helper()
	pipe := s.Client.Pipeline()
	for _, item := range items {
		pipe.Set(ctx(t), prefix+":cooldown:"+item, "by hand", d)
	}
	if _, err := pipe.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// seedCooling seeds prefix's list with n items and gives each a cooldown
// of d set by hand (see coolAll), and returns the items in list order.
func (s *server) seedCooling(t *testing.T, prefix string, n int, d time.Duration) []string {
	t.Helper()
	items := redistest.Items(n)
	s.seed(t, prefix+":list", items...)
	s.coolAll(t, prefix, items, d)
	return items
}

// looks is how many looks (calls of internal/take's look.lua) and idle
// workers' probes (probe.lua) the server has run (see looksIn).
func (s *server) looks(t *testing.T) int {
	return looksIn(redistest.CommandStats(t, s.Client))
}

// looksIn is how many looks and probes the command stats stats count: each
// reads the due index once, a look with the one ZRANGEBYSCORE and a probe
// with the one ZRANGE that nothing else sends.
func looksIn(stats map[string]int) int {
	return stats["zrangebyscore"] + stats["zrange"]
}

// TestIdleWorkerDoesNotReadTheList: once the fleet has tried every item of
// a large list (its untried head, in a pass) and found it cooling, an idle
// worker looks at what came due every --idle-wait instead of passing over
// the list again: no LRANGE, and no EXISTS or MGET of candidates' keys,
// however many looks it makes (a look that probes sends one EXISTS, of the
// sweep key, and one MGET, of the fleet's marks), until the fleet's next
// sweep, two minutes away for 20,000 items (take.SweepEvery).
func TestIdleWorkerDoesNotReadTheList(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := s.seedCooling(t, "big", 20_000, 10*time.Minute)
	w := startW8y(t, nil, "-u", s.URL, "-k", "big", "-c", "-q", "--idle-wait", "100ms", "true")

	poll.WaitFor(t, "the worker to try the whole list", func() bool { return s.Client.Get(ctx(t), "big:untried").Val() == "0" })
	if every, left := take.SweepEvery(int64(len(items))), s.Client.PTTL(ctx(t), "big:sweep").Val(); left < every-10*time.Second || left > every {
		t.Fatalf("the fleet's first sweep is %s away, want take.SweepEvery(20,000): %s", left, every)
	}
	// The pass over the head ended with a look; the next comes after it.
	passed := s.looks(t)
	poll.WaitFor(t, "a look after the pass", func() bool { return s.looks(t) > passed })
	before := redistest.CommandStats(t, s.Client)
	poll.WaitFor(t, "five more looks", func() bool { return s.looks(t) >= looksIn(before)+5 })
	after := redistest.CommandStats(t, s.Client)
	for _, cmd := range []string{"lrange", "exists", "mget", "llen"} {
		if cmd == "llen" || cmd == "exists" || cmd == "mget" {
			// One LLEN per look: the list's length, to see items appended;
			// and one EXISTS and one MGET per probe, of the sweep key and
			// the fleet's marks.
			if got, looks := after[cmd]-before[cmd], looksIn(after)-looksIn(before); got > looks {
				t.Errorf("%d looks sent %d %s, want at most one each", looks, got, cmd)
			}
			continue
		}
		if after[cmd] != before[cmd] {
			t.Errorf("idle looks sent %d %s: an idle worker read the list or its items' keys", after[cmd]-before[cmd], cmd)
		}
	}
	w.stop(t)
	if got := s.list(t, "big:list"); !slices.Equal(got, items) {
		t.Errorf("the list changed: %d items, want the %d seeded in order", len(got), len(items))
	}
}

// listReads are the commands that read or move a list's items one by one,
// which a take whose cost does not grow with the list never sends: a pass
// reads the list with LRANGE and rotates it with RPUSH and LTRIM (or LMOVE
// per candidate), and checks each candidate's keys with EXISTS and MGET.
var listReads = []string{"lrange", "ltrim", "lmove", "rpoplpush", "exists", "mget", "lpos", "lrem"}

// TestOneShotDoesNotReadTheList: once the fleet has tried a long list (its
// untried head, in one pass), a one-shot run over it that finds nothing to
// take reads none of its items, however long it is: one look at the due
// index and the appended items (none), and no step of the sweep, which is
// a whole interval away (take.SweepEvery: two minutes for 20,000 items). An
// item made eligible by hand (its cooldown key deleted) is left to the
// next sweep; one appended with RPUSH is taken by the next run.
func TestOneShotDoesNotReadTheList(t *testing.T) {
	items := redistest.Items(20_000)
	b := withList(t, "oneshot", items...)
	b.coolAll(t, b.prefix, items, time.Hour)

	// The first run passes over the untried list, which the fleet saw for
	// the first time: its first sweep is a whole interval away.
	b.run("true").wantExit(t, 0)
	if got := b.Client.Get(ctx(t), b.key("seen")).Val(); got != strconv.Itoa(len(items)) {
		t.Fatalf("after the first run, seen is %q, want %d: every item tried", got, len(items))
	}
	if every, left := take.SweepEvery(int64(len(items))), b.Client.PTTL(ctx(t), b.key("sweep")).Val(); left < every-10*time.Second {
		t.Fatalf("after the first run, the fleet's first sweep is %s away, want take.SweepEvery(20,000): %s", left, every)
	}

	before := redistest.CommandStats(t, b.Client)
	for range 3 {
		r := b.run("--idle-wait", "1h", "true")
		r.wantExit(t, 0)
		if !strings.Contains(r.Stderr, "no item could be taken") {
			t.Errorf("a run that found nothing did not say so: %s", r)
		}
	}
	b.Client.Del(ctx(t), b.key("cooldown:i12345"))
	b.run("--idle-wait", "1h", "--no-work-exit-code", "3", "true").wantExit(t, 3)
	after := redistest.CommandStats(t, b.Client)
	for _, cmd := range listReads {
		// A look reads its marks and whether a step of the sweep is due
		// (the sweep key) in one MGET of those three keys; a step would
		// send more.
		if n, most := after[cmd]-before[cmd], map[bool]int{true: 4}[cmd == "mget"]; n > most {
			t.Errorf("four one-shot runs over a cooling list sent %d %s, want at most %d", n, cmd, most)
		}
	}
	if got := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]; got > 4 {
		t.Errorf("four one-shot runs sent %d scripts, want one look each", got)
	}
	if got := b.list(); !slices.Equal(got, items) {
		t.Errorf("the list changed: %d items, want the %d seeded in order", len(got), len(items))
	}

	// An appended item is found by the next run, without a sweep.
	b.Client.RPush(ctx(t), b.key("list"), "new")
	r := b.run("--idle-wait", "1h", "sh", "-c", `echo "ran $W8Y_ITEM"`)
	r.wantExit(t, 0)
	r.wantStdout(t, "ran new\n")
}

// TestFreshListKeepsTheFleetBusy: a list that w8y has never run (thousands
// of items, no due index, no seen mark) gets every worker of a fleet
// running at once, each on an item of its own: the looks try the list as
// appended items, each item once for the fleet, rather than leaving it to
// one sweeping worker at a time. The children count themselves in Redis.
func TestFreshListKeepsTheFleetBusy(t *testing.T) {
	items := redistest.Items(5_000)
	b := withList(t, "fresh", items...)
	const workers = 12
	// Each child counts itself running, and the most ever running, then
	// waits until the test lets it go.
	child := []string{"sh", "-c", `redis-cli -p "$REDIS_PORT" EVAL "local n = redis.call('INCR', KEYS[1]) if n > tonumber(redis.call('GET', KEYS[2]) or 0) then redis.call('SET', KEYS[2], n) end" 2 fresh:running fresh:most >/dev/null
redis-cli -p "$REDIS_PORT" SADD fresh:ran "$W8Y_ITEM" >/dev/null
while [ "$(redis-cli -p "$REDIS_PORT" EXISTS fresh:stop)" = 0 ]; do sleep 0.05; done
redis-cli -p "$REDIS_PORT" DECR fresh:running >/dev/null`}
	var ps []*proc
	for range workers {
		// --idle-wait 1h: the sweep, once elected, does not come back; the
		// fleet must get busy from the looks alone.
		ps = append(ps, b.start(append([]string{"-c", "-q", "--idle-wait", "1h", "--cooldown", "1h"}, child...)...))
	}
	poll.WaitFor(t, "every worker running a child", func() bool {
		return b.Client.Get(ctx(t), "fresh:most").Val() == strconv.Itoa(workers)
	})
	// Each counted itself before it said which item it runs.
	poll.WaitFor(t, "every child's item", func() bool { return b.Client.SCard(ctx(t), "fresh:ran").Val() >= workers })
	if n := b.Client.SCard(ctx(t), "fresh:ran").Val(); n != workers {
		t.Errorf("%d children ran %d items, want one each", workers, n)
	}
	b.Client.Set(ctx(t), "fresh:stop", "1", 0)
	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		p.wait(t).wantExit(t, 0)
	}
	if got := b.list(); !redistest.IsRotation(got, items) {
		t.Errorf("the list lost, gained or reordered items: %d of %d", len(got), len(items))
	}
	b.noLocks()
}

// TestOneSweepForTheFleet: idle workers sweep the whole list for the fleet,
// a step a look, once every take.SweepEvery (5s for 300 items), not once
// each: the steps' LRANGEs over a window add up to about one sweep per
// interval, whatever the number of workers.
func TestOneSweepForTheFleet(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := s.seedCooling(t, "sw", take.SweepStep+44, 10*time.Minute)
	const workers = 4
	var ps []*proc
	for range workers {
		ps = append(ps, startW8y(t, nil, "-u", s.URL, "-k", "sw", "-c", "-q", "true"))
	}
	// A sweep of a step and 44 items is two steps (take.SweepStep), an
	// LRANGE each; the looks and probes of idle workers send none.
	const steps = 2
	// Settled: the head tried, and no item left after the fleet's mark (four
	// workers passing over the head at once can leave the mark short, and
	// the looks then read what they take for appended items).
	poll.WaitFor(t, "the fleet to try the list", func() bool {
		return s.Client.Get(ctx(t), "sw:untried").Val() == "0" && s.Client.Get(ctx(t), "sw:seen").Val() == itoa(len(items))
	})
	// and every worker's pass over it is over: a worker that started its
	// pass while the whole list was untried goes on reading it in batches
	// (an LRANGE each) after the others have tried the rest, and waits
	// (BLPOP) only once its pass has ended.
	poll.WaitFor(t, "every worker to wait", func() bool {
		waiting, _ := blocked(t, s)
		return waiting == workers
	})
	before, start := redistest.CommandStats(t, s.Client), time.Now()
	poll.WaitFor(t, "twelve seconds of looks", func() bool {
		return time.Since(start) > 12*time.Second && s.looks(t) >= looksIn(before)+4*workers
	})
	after, elapsed := redistest.CommandStats(t, s.Client), time.Since(start)
	reads := after["lrange"] - before["lrange"]
	// Shared, a sweep per interval and one more for the window's edges;
	// each worker on its own would make one per interval each.
	if most := steps * (int(elapsed/take.SweepEvery(int64(len(items)))) + 2); reads < steps || reads > most {
		t.Errorf("%d workers read the list %d times in %s: want between %d and %d, one sweep of %d steps every %s for the fleet",
			workers, reads, elapsed.Round(time.Millisecond), steps, most, steps, take.SweepEvery(int64(len(items))))
	}
	for _, p := range ps {
		p.stop(t)
	}
	if got := s.Client.ZCard(ctx(t), "sw:due").Val(); got != int64(len(items)) {
		t.Errorf("the due index holds %d entries for %d cooling items", got, len(items))
	}
	t.Logf("%d steps of the sweep and %d looks in %s", reads, looksIn(after)-looksIn(before), elapsed.Round(time.Millisecond))
}

// TestClusterIdleLook: on a Cluster, an idle worker with a hash-tagged
// prefix looks at the due index as on one server, and takes an item made
// due; without a hash tag, where one script cannot reach an item's keys,
// it passes over the list every --idle-wait instead and never sets the
// sweep key, and still takes an item whose cooldown is deleted.
func TestClusterIdleLook(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	tagged := "{look}:"
	if err := c.Client.RPush(ctx(t), tagged+"list", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	checkLook(t, c.Client, nil, []string{"--redis-cluster", "-u", c.URL, "-k", tagged}, tagged, "a")

	plain := "look:"
	items := []string{"a", "b", "c"}
	if err := c.Client.RPush(ctx(t), plain+"list", redistest.Values(items)...).Err(); err != nil {
		t.Fatal(err)
	}
	for _, item := range items {
		c.Client.Set(ctx(t), plain+"cooldown:"+item, "x", time.Hour)
	}
	runs := filepath.Join(t.TempDir(), "runs")
	p := startW8y(t, nil, "--redis-cluster", "-u", c.URL, "-k", plain, "-c", "-q", "--idle-wait", "100ms",
		"sh", "-c", `echo "$W8Y_ITEM" >> "$0"`, runs)
	poll.WaitFor(t, "two idle passes", func() bool { return c.commandCalls(t, "lmove") >= 2*len(items) })
	if err := c.Client.Del(ctx(t), plain+"cooldown:b").Err(); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, "b taken by a pass", func() bool { return slices.Contains(lines(t, runs), "b") })
	p.stop(t)
	if n := c.Client.Exists(ctx(t), plain+"sweep").Val(); n != 0 {
		t.Errorf("the per-candidate path set the sweep key")
	}
}

// TestIdleBacklogs: an idle worker drains work that comes in bulk. Fifty
// items pushed at once are all taken by looks (ten tried a look, the
// oldest first), with the sweep an hour away; and when a sweep finds an
// item that no due entry announced (every cooldown deleted by hand), the
// worker goes back to passes and takes the rest at once rather than one a
// sweep.
func TestIdleBacklogs(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	runs := filepath.Join(t.TempDir(), "runs")
	child := []string{"sh", "-c", `echo "$W8Y_ITEM" >> "$0"`, runs}
	ran := func(n int) func() bool { return func() bool { return len(lines(t, runs)) >= n } }

	s.seed(t, "bulk:list", "first")
	w := startW8y(t, nil, append([]string{"-u", s.URL, "-k", "bulk", "-c", "-q", "--cooldown", "1h", "--idle-wait", "1h"}, child...)...)
	poll.WaitFor(t, "the worker to go idle", func() bool { return s.Client.Exists(ctx(t), "bulk:sweep").Val() == 1 })
	pushed := redistest.Items(50)
	if err := s.Client.RPush(ctx(t), "bulk:list", redistest.Values(pushed)...).Err(); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, "the 50 pushed items to run", ran(51))
	w.stop(t)
	if got := lines(t, runs)[1:]; !slices.Equal(got, pushed) {
		t.Errorf("the pushed items ran as %q, want each once, in order", got)
	}

	// A short list's sweep comes every --idle-wait or so; the 30 items
	// would take 30 of them one by one.
	items := s.seedCooling(t, "hand", 30, time.Hour)
	if err := os.Remove(runs); err != nil {
		t.Fatal(err)
	}
	w = startW8y(t, nil, append([]string{"-u", s.URL, "-k", "hand", "-c", "-q", "--cooldown", "1h", "--idle-wait", "1s"}, child...)...)
	poll.WaitFor(t, "the worker to go idle", func() bool { return s.Client.Exists(ctx(t), "hand:sweep").Val() == 1 })
	for _, item := range items {
		s.Client.Del(ctx(t), "hand:cooldown:"+item)
	}
	// The next look sweeps: the wait between sweeps is a multiple of how
	// long the last pass took (see take's sweepEvery), which a loaded machine
	// can stretch past the test's timeout.
	s.Client.Del(ctx(t), "hand:sweep")
	poll.WaitFor(t, "the first item taken by a sweep", ran(1))
	start := time.Now()
	poll.WaitFor(t, "the other 29 items to run", ran(30))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the other 29 items took %s after the sweep that found the first: one a sweep, not passes", took.Round(time.Millisecond))
	}
	w.stop(t)
}

// TestBusyWorkerOneCallAnItem: a busy worker whose items come due one
// after another finishes each run and takes the next in one script call:
// twenty items cost Redis about twenty calls, not forty (a take and a
// finish each), and each run is recorded and its item rotated as before.
func TestBusyWorkerOneCallAnItem(t *testing.T) {
	t.Parallel()
	b := setup(t, "busy1")
	const n = 20
	items := redistest.Items(n + 5)
	b.items(items...)
	// As a list that the fleet has run is: every item tried, and the first
	// twenty due in the index, in their order.
	b.Client.Set(ctx(t), b.key("seen"), len(items), 0)
	b.Client.Set(ctx(t), b.key("untried"), 0, 0)
	for i, item := range items {
		score := float64(i + 1)
		if i >= n {
			b.Client.Set(ctx(t), b.key("cooldown:"+item), "x", time.Hour)
			score = float64(time.Now().Add(time.Hour).UnixMilli())
		}
		b.Client.ZAdd(ctx(t), b.key("due"), redis.Z{Score: score, Member: item})
	}
	before := redistest.CommandStats(t, b.Client)
	b.run("-c", "-q", "--cooldown", "1h", "--max-items", strconv.Itoa(n), "true").wantExit(t, 0)
	after := redistest.CommandStats(t, b.Client)
	calls := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]
	// The first take and the last finish go alone (n+1 calls), and the
	// first call of each of the three scripts twice, as EVALSHA and then
	// EVAL, when the server does not have it yet; and the worker's beats
	// in the registry, a script call each (its first twice), at its start
	// and within a quarter of a second of its first run and of its end. A
	// take and a finish an item would be 2n calls.
	if most := n + 4 + 4; calls > most {
		t.Errorf("%d items cost %d script calls, want at most %d: one an item", n, calls, most)
	}
	for _, item := range items[:n] {
		if got := b.Client.HGet(ctx(t), b.key("state:"+item), "runs").Val(); got != "1" {
			t.Errorf("%s ran %q times, want once", item, got)
		}
	}
	// Each item taken moved to the tail, in the order taken.
	b.wantList(append(slices.Clone(items[n:]), items[:n]...)...)
	b.noLocks()
}
