package integration_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/registry"
	"github.com/w8y/w8y/internal/schema"
)

// workersJSON is w8yctl workers --json on the bundle's prefix.
func (b *bundle) workersJSON() []registry.Entry {
	b.t.Helper()
	r := b.ctl("workers", "--json")
	r.mustExit(b.t, 0)
	var entries []registry.Entry
	if err := json.Unmarshal([]byte(r.Stdout), &entries); err != nil {
		b.t.Fatalf("w8yctl workers --json: %v\n%s", err, r.Stdout)
	}
	return entries
}

// entryOf waits until w8yctl workers --json lists holder with state, and
// returns its entry.
func (b *bundle) entryOf(holder, state string) registry.Entry {
	b.t.Helper()
	// The entry's hash changes first; then w8yctl reads it once.
	poll.WaitFor(b.t, holder+" "+state+" in the registry", func() bool {
		return b.Client.HGet(ctx(b.t), b.key("worker:"+holder), schema.WorkerState).Val() == state
	})
	for _, e := range b.workersJSON() {
		if e.Holder == holder {
			return e
		}
	}
	b.t.Fatalf("w8yctl workers does not list %s", holder)
	return registry.Entry{}
}

// gone reports whether holder has left the registry: no hash, no member.
func (b *bundle) gone(holder string) bool {
	_, err := b.Client.ZScore(ctx(b.t), b.key("workers"), holder).Result()
	return b.Client.Exists(ctx(b.t), b.key("worker:"+holder)).Val() == 0 && err == redis.Nil
}

// TestWorkersRegistry: a worker's entry appears, turns busy with its item
// and idle again, stays while the worker idles for longer than the
// entry's expiry, and leaves the registry at once when the worker stops
// (SIGTERM), or within the expiry when it dies (SIGKILL); w8yctl workers
// shows it as a table and as JSON, and the status counts it.
func TestWorkersRegistry(t *testing.T) {
	s := withList(t, "wr", "a")
	// Each child reports its start, then waits for the test to let it end
	// (an RPUSH of gate:ITEM); with an hour's cooldown the first worker then
	// has nothing left to run.
	gated := report(":", `redis-cli -p "$REDIS_PORT" blpop "gate:$W8Y_ITEM" 30 >/dev/null`)
	first := s.start(append([]string{"-c", "--cooldown", "1h"}, gated...)...)
	if got := s.popStarted(t); got != "a" {
		t.Fatalf("started %q, want a", got)
	}
	holder := s.Client.Get(ctx(t), s.key("lock:a")).Val()
	busy := s.entryOf(holder, schema.WorkerBusy)
	host, pid, _ := strings.Cut(holder, ":")
	pid, _, _ = strings.Cut(pid, ":")
	if busy.Host != host || strconv.Itoa(busy.PID) != pid || busy.Mode != "continuous" || busy.Version == "" ||
		len(busy.Running) != 1 || busy.Running[0].Item != "a" || busy.Started.IsZero() || busy.Since.Before(busy.Started) {
		t.Errorf("the busy entry %+v", busy)
	}
	table := s.ctl("workers")
	table.mustExit(t, 0)
	lines := strings.Split(strings.TrimSpace(table.Stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "HOLDER") || !strings.HasPrefix(lines[1], holder+" ") ||
		!strings.Contains(lines[1], " busy ") || !strings.Contains(lines[1], ` "a" `) || lines[2] != "1 worker live" {
		t.Errorf("w8yctl workers:\n%s", table.Stdout)
	}

	// While the first worker runs a, a second worker, one-shot, takes b and
	// blocks in its child (the first, busy, cannot take b before it), and a
	// third, continuous, finds nothing to take and idles until SIGKILL.
	s.Client.RPush(ctx(t), s.key("list"), "b")
	second := s.start(gated...)
	if got := s.popStarted(t); got != "b" {
		t.Fatalf("started %q, want b", got)
	}
	third := s.start("-c", "true")
	// The one-shot worker shows its run within a quarter of a second of
	// its start.
	poll.WaitFor(t, "three live workers, the one-shot one busy", func() bool {
		entries := s.workersJSON()
		return len(entries) == 3 && slices.ContainsFunc(entries, func(e registry.Entry) bool { return e.Mode == "one-shot" && e.State == schema.WorkerBusy })
	})
	if r := s.ctl("status"); !strings.Contains(r.Stdout, "live workers 3  ") {
		t.Errorf("w8yctl status does not count 3 workers:\n%s", r.Stdout)
	}
	var secondHolder, thirdHolder string
	for _, e := range s.workersJSON() {
		switch {
		case e.Holder == holder:
		case e.Mode == "continuous":
			thirdHolder = e.Holder
		case e.Mode != "one-shot" || len(e.Running) != 1 || e.Running[0].Item != "b":
			t.Errorf("the one-shot worker's entry %+v", e)
		default:
			secondHolder = e.Holder
		}
	}

	// The first worker's run ends; a cools down for an hour, and the
	// worker idles.
	s.Client.RPush(ctx(t), "gate:a", "go")
	idle := s.entryOf(holder, schema.WorkerIdle)
	if len(idle.Running) != 0 || !idle.Since.After(busy.Since) {
		t.Errorf("the idle entry %+v, after the busy %+v", idle, busy)
	}

	third.signal(t, syscall.SIGKILL)
	third.wait(t)
	killed := time.Now()
	poll.WaitFor(t, "the killed worker gone from w8yctl workers", func() bool {
		return !slices.ContainsFunc(s.workersJSON(), func(e registry.Entry) bool { return e.Holder == thirdHolder })
	})
	if took := time.Since(killed); took > registry.TTL+time.Second {
		t.Errorf("the killed worker stayed listed for %s, longer than the registry's expiry %s", took, registry.TTL)
	}
	// Once the first worker has idled for longer than an entry's expiry,
	// its beats keep it listed, and idle, with the same start of its idling.
	poll.WaitFor(t, "the first worker idle for longer than an entry's expiry", func() bool {
		return time.Since(idle.Since) > registry.TTL
	})
	if e := s.entryOf(holder, schema.WorkerIdle); !e.Since.Equal(idle.Since) {
		t.Errorf("the first worker, idle since %s, is listed as idle since %s", idle.Since, e.Since)
	}

	s.Client.RPush(ctx(t), "gate:b", "go")
	second.wait(t).mustExit(t, 0)
	if !s.gone(secondHolder) {
		t.Errorf("the one-shot worker %q is left in the registry after its exit", secondHolder)
	}
	first.signal(t, syscall.SIGTERM)
	first.wait(t).mustExit(t, 0)
	if !s.gone(holder) {
		t.Errorf("the worker stopped with SIGTERM is left in the registry")
	}
	for _, key := range []string{"workers", "looking"} {
		if members := s.Client.ZRange(ctx(t), s.key(key), 0, -1).Val(); slices.Contains(members, holder) || slices.Contains(members, secondHolder) {
			t.Errorf("%s holds %q after the workers stopped", s.key(key), members)
		}
	}
	if r := s.ctl("workers"); r.Stdout != `no live worker under "wr:" (w8y workers announce themselves in "wr:workers")`+"\n" {
		t.Errorf("w8yctl workers with none live: %s", r)
	}
}

// looksPerSecond starts n idle continuous workers (--idle-wait 100ms) over
// a list whose items all cool down for an hour, waits until each has beaten
// at least twice (so that each knows the fleet's size), and returns the
// LLENs a second (the looks, and the rare sweep) over window.
func looksPerSecond(t *testing.T, prefix string, n int, window time.Duration) float64 {
	s := setup(t, prefix)
	items := []string{"i0", "i1", "i2", "i3", "i4"}
	s.items(items...)
	for _, item := range items {
		s.Client.Set(ctx(t), s.key("cooldown:"+item), "x", time.Hour)
	}
	for range n {
		s.start("-c", "--idle-wait", "100ms", "true")
	}
	poll.WaitFor(t, "every worker looking", func() bool { return s.Client.ZCard(ctx(t), s.key("looking")).Val() == int64(n) })
	// Every worker beats again within beatEvery (TTL/3), and reads the
	// fleet's size then: wait for one whole round of beats after the last
	// worker announced itself, by the members' scores.
	deadline := time.Now().Add(registry.TTL/3 + time.Second)
	poll.WaitFor(t, "a round of beats", func() bool { return time.Now().After(deadline) })
	// Each look sends one LLEN, whether a probe or the script (and each
	// sweep's pass one more).
	calls := func() int { return redistest.CommandStats(t, s.Client)["llen"] }
	before := calls()
	time.Sleep(window) // the measurement's window, not a synchronisation
	return float64(calls()-before) / window.Seconds()
}

// TestFleetLooksBounded: twice as many idle workers do not look twice as
// often: each spaces its looks by the number of live workers that look,
// so that the fleet looks about every 50ms, however many they are.
func TestFleetLooksBounded(t *testing.T) {
	t.Parallel()
	const window = 5 * time.Second
	rates := make(chan float64, 2)
	for _, n := range []int{3, 6} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			rates <- looksPerSecond(t, "fl"+strconv.Itoa(n), n, window)
		})
	}
	t.Cleanup(func() {
		if len(rates) < 2 {
			return
		}
		a, b := <-rates, <-rates
		few, many := min(a, b), max(a, b)
		// Without the spacing, 3 workers at 100ms look 30 times a second
		// and 6 workers 60; with it, either fleet looks every 50ms.
		if many > 1.5*few || many > 30 {
			t.Errorf("looks a second: 3 and 6 workers %.1f and %.1f; want the fleet's about 20 (1/50ms) either way", a, b)
		}
		t.Logf("looks a second of 3 and 6 idle workers: %.1f and %.1f", a, b)
	})
}

// TestRunNowPickupInAFleet: with a few idle workers, an item made due with
// run-now starts well within a second, as Redis sees it: the start event's
// ID is the moment the take ran.
func TestRunNowPickupInAFleet(t *testing.T) {
	items := []string{"i0", "i1", "i2", "i3", "i4", "i5"}
	s := withList(t, "pk", items...)
	for _, item := range items {
		s.Client.Set(ctx(t), s.key("cooldown:"+item), "x", time.Hour)
	}
	for range 4 {
		s.start("-c", "--cooldown", "1h", "true")
	}
	poll.WaitFor(t, "4 workers looking", func() bool { return s.Client.ZCard(ctx(t), s.key("looking")).Val() == 4 })
	fleet := &control.Fleet{Client: s.Client, Keys: schema.Keys{Prefix: "pk:", Colocated: true}}
	var waits []time.Duration
	for _, item := range items {
		// From the stream's newest entry, or its start where it has none
		// yet ("$" would miss what the take writes before XREAD blocks).
		last := "0"
		if got := s.Client.XRevRangeN(ctx(t), s.key("events"), "+", "-", 1).Val(); len(got) > 0 {
			last = got[0].ID
		}
		asked := time.Now()
		if _, err := fleet.RunNow(ctx(t), []string{item}); err != nil {
			t.Fatal(err)
		}
		// The run-now records itself first (with who asked): the start
		// comes after it.
		var e redis.XMessage
		for e.ID == "" || e.Values["type"] == schema.EventRunNow {
			streams, err := s.Client.XRead(ctx(t), &redis.XReadArgs{Streams: []string{s.key("events"), last}, Count: 1, Block: poll.Timeout}).Result()
			if err != nil {
				t.Fatalf("no start of %s: %v", item, err)
			}
			e = streams[0].Messages[0]
			last = e.ID
		}
		if e.Values["type"] != "start" || e.Values["item"] != item {
			t.Fatalf("event %v, want the start of %s", e.Values, item)
		}
		ms, _ := strconv.ParseInt(strings.Split(e.ID, "-")[0], 10, 64)
		waits = append(waits, time.UnixMilli(ms).Sub(asked.Truncate(time.Millisecond)))
		poll.WaitFor(t, item+" cooling down again", func() bool { return s.Client.Exists(ctx(t), s.key("cooldown:"+item)).Val() == 1 })
	}
	slices.Sort(waits)
	// Four workers looking every 200ms ±25% each, the fleet about every
	// 50ms: the next look comes at the median within about 35ms, and
	// within 250ms; the bounds leave room for a loaded machine.
	if median, most := waits[len(waits)/2], waits[len(waits)-1]; median > 500*time.Millisecond || most > 1500*time.Millisecond {
		t.Errorf("run-now to start: %v; want the median within 500ms and all within 1.5s", waits)
	}
	t.Logf("run-now to start, as Redis timed it: %v", waits)
}

// TestDocsWorkersExample runs docs/operating.md's w8yctl workers example,
// with one busy and one idle worker, and checks that it prints a table of
// the page's columns and a JSON array of both.
func TestDocsWorkersExample(t *testing.T) {
	s := withList(t, "work", "report:alpha")
	s.start(append([]string{"-c"}, report(":", `redis-cli -p "$REDIS_PORT" blpop gate 30 >/dev/null`)...)...)
	s.popStarted(t)
	s.start("-c", "true")
	poll.WaitFor(t, "two workers, one busy", func() bool {
		entries, err := registry.Read(ctx(t), s.Client, schema.Keys{Prefix: "work:"})
		return err == nil && len(entries) == 2 && entries[0].State == schema.WorkerBusy
	})
	example := doctest.Block(t, "docs/operating.md", "sh", "w8yctl -k work workers")
	path := commandsPath(t)
	r := startCommand(t, []string{path, "W8Y_REDIS_URL=" + s.URL}, "bash", "-c", "set -e\n"+example).wait(t)
	r.mustExit(t, 0)
	if r.Stderr != "" {
		t.Errorf("the example wrote on stderr: %s", r)
	}
	gap := regexp.MustCompile(` {2,}`)
	shown := strings.Split(strings.TrimSpace(doctest.Block(t, "docs/operating.md", "", "HOLDER   ")), "\n")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 5 {
		t.Fatalf("the example printed:\n%s\nwant a header, two workers, the count and a JSON line", r.Stdout)
	}
	if got, want := gap.Split(lines[0], -1), gap.Split(shown[0], -1); !slices.Equal(got, want) {
		t.Errorf("columns %q, want the page's %q", got, want)
	}
	busy := gap.Split(lines[1], -1)
	if len(busy) != 7 || busy[1] != "busy" || busy[3] != `"report:alpha"` || busy[4] != "continuous" {
		t.Errorf("the busy worker's row %q", busy)
	}
	if lines[3] != "2 workers live" || shown[len(shown)-1] != "3 workers live" {
		t.Errorf("the count %q (the page's %q)", lines[3], shown[len(shown)-1])
	}
	var entries []registry.Entry
	if err := json.Unmarshal([]byte(lines[4]), &entries); err != nil || len(entries) != 2 {
		t.Errorf("--json printed %s (%v)", lines[4], err)
	}
	s.Client.RPush(ctx(t), "gate", "go")
}
