package integration_test

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// gated is a child that reports its start and then waits until the test
// pushes to gate:<item>, exiting with the code it finds there.
var gated = report(":", `exit "$(redis-cli -p "$REDIS_PORT" blpop "gate:$W8Y_ITEM" 30 | tail -n 1)"`)

// TestParallelOneShotTakesDistinctItems: one-shot --parallel 4 runs four
// distinct items from one pass at once, each under its own lock, takes no
// fifth, and exits 0 when all four succeed.
func TestParallelOneShotTakesDistinctItems(t *testing.T) {
	s := withList(t, "par", "a", "b", "c", "d", "e", "f")
	s.Client.Set(ctx(t), s.key("lock:b"), "someone-else", time.Hour)
	p := s.start(append([]string{"-q", "--parallel", "4"}, gated...)...)
	// All four run now: none can end before the test opens its gate.
	started := s.popEach(t, "started", 4)
	if !slices.Equal(started, []string{"a", "c", "d", "e"}) {
		t.Errorf("started %q, want a c d e: distinct, free, in list order", started)
	}
	holders := map[string]bool{}
	for _, item := range started {
		holder := s.Client.Get(ctx(t), s.key("lock:"+item)).Val()
		if holder == "" {
			t.Errorf("%q runs without its lock", item)
		}
		holders[holder] = true
	}
	if len(holders) != 1 {
		t.Errorf("lock holders %v, want the one w8y's token", holders)
	}
	for _, item := range started {
		s.Client.RPush(ctx(t), "gate:"+item, 0)
	}
	p.wait(t).wantExit(t, 0)
	if n := s.Client.LLen(ctx(t), "started").Val(); n != 0 {
		t.Errorf("%d more items started: one-shot takes at most --parallel", n)
	}
	// The pass went on from item to item and stopped after the fourth
	// taken, e: a b c d e rotated to the end.
	s.wantList("f", "a", "b", "c", "d", "e")
	if locks := s.keys(t, s.key("lock:*")); !slices.Equal(locks, []string{s.key("lock:b")}) {
		t.Errorf("locks left: %q", locks)
	}
}

// TestParallelOneShotExitsAsTheFirstFailure: the exit code is that of the
// first child to fail in time, not in the list.
func TestParallelOneShotExitsAsTheFirstFailure(t *testing.T) {
	s := withList(t, "first", "a", "b", "c")
	p := s.start(append([]string{"-q", "--parallel", "3"}, gated...)...)
	for range 3 {
		s.popStarted(t)
	}
	s.Client.RPush(ctx(t), "gate:a", 0)
	s.Client.RPush(ctx(t), "gate:c", 7)
	poll.WaitFor(t, "c has finished", func() bool { return s.Client.Exists(ctx(t), s.key("lock:c")).Val() == 0 })
	s.Client.RPush(ctx(t), "gate:b", 5)
	p.wait(t).wantExit(t, 7) // the code of c, which failed first in time
	s.noLocks()
}

// TestParallelContinuousNeverRunsAnItemTwice: a continuous --parallel 4
// worker keeps four children running on distinct items, never two runs of
// one item at once (even listed twice), and --max-items ends it after
// exactly that many items, with exit 0.
func TestParallelContinuousNeverRunsAnItemTwice(t *testing.T) {
	s := withList(t, "many", "a", "a", "b", "c", "d", "e", "f")
	// Each run counts itself in running:<item> and running while it lasts,
	// and records the counts it saw when it started.
	child := `r="redis-cli -p $REDIS_PORT"
		n=$($r incr "running:$W8Y_ITEM"); all=$($r incr running)
		$r rpush seen "$W8Y_ITEM $n $all" >/dev/null
		sleep 0.3
		$r decr "running:$W8Y_ITEM" >/dev/null; $r decr running >/dev/null`
	const maxItems = 24
	r := s.run("-c", "-q", "--parallel", "4", "--max-items", itoa(maxItems),
		"--idle-wait", "20ms", "sh", "-c", child)
	r.wantExit(t, 0)
	seen := s.server.list(t, "seen")
	if len(seen) != maxItems {
		t.Errorf("%d runs, want --max-items %d", len(seen), maxItems)
	}
	most := 0
	for _, record := range seen {
		f := strings.Fields(record)
		if f[1] != "1" {
			t.Errorf("%q ran twice at once (%s)", f[0], record)
		}
		most = max(most, atoi(t, f[2]))
	}
	if most != 4 {
		t.Errorf("at most %d children ran at once, want 4", most)
	}
	if got := s.list(); len(got) != 7 {
		t.Errorf("list %q lost or gained items", got)
	}
	s.noLocks()
}

// TestParallelSignalsReachEveryChild: SIGTERM reaches every child's group,
// and the drained worker exits 0; a second one kills the groups of
// children that ignore it.
func TestParallelSignalsReachEveryChild(t *testing.T) {
	s := withList(t, "psig", "a", "b", "c")
	// a and b exit on SIGTERM; c ignores it.
	p := s.start(append([]string{"-c", "--parallel", "3"},
		report(`trap 'redis-cli -p "$REDIS_PORT" rpush termed "$W8Y_ITEM" >/dev/null; [ "$W8Y_ITEM" = c ] || exit 0' TERM`,
			"while :; do sleep 0.05; done")...)...)
	for range 3 {
		s.popStarted(t)
	}
	p.signal(t, syscall.SIGTERM)
	termed := s.popEach(t, "termed", 3)
	if !slices.Equal(termed, []string{"a", "b", "c"}) {
		t.Errorf("SIGTERM reached %q, want a b c", termed)
	}
	poll.WaitFor(t, "a and b have finished", func() bool {
		return s.Client.Exists(ctx(t), s.key("lock:a"), s.key("lock:b")).Val() == 0
	})
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	r.wantEnd(t, 0, "second stop signal")
	if n := s.Client.LLen(ctx(t), "started").Val(); n != 0 {
		t.Errorf("%d items started after SIGTERM", n)
	}
	s.noLocks()
}

// TestMaxRuntime: after --max-runtime a continuous worker takes no new
// item, lets the running child finish under its lock and exits 0.
func TestMaxRuntime(t *testing.T) {
	s := withList(t, "rt", "a", "b", "c")
	// a runs until the test lets it go; b and c are short.
	began := time.Now()
	p := s.start("-c", "--parallel", "2", "--max-runtime", "1s", "--idle-wait", "20ms",
		"sh", "-c", `case "$W8Y_ITEM" in a) redis-cli -p "$REDIS_PORT" blpop gate:a 30 >/dev/null;; *) sleep 0.05;; esac`)
	poll.WaitFor(t, "w8y logs the end of its runtime", func() bool {
		return strings.Contains(p.stderrSoFar(), "--max-runtime reached")
	})
	if took := time.Since(began); took < time.Second {
		t.Errorf("the runtime ended after %s, want 1s", took)
	}
	if holder := s.Client.Get(ctx(t), s.key("lock:a")).Val(); holder == "" {
		t.Error("a runs on without its lock")
	}
	select {
	case <-p.done:
		t.Fatal("w8y exited while a still ran")
	default:
	}
	s.Client.RPush(ctx(t), "gate:a", "go")
	r := p.wait(t)
	r.wantExit(t, 0)
	// The worker says how many items it had taken when the runtime ended,
	// and when it exits; no item was taken in between. (A child taken just
	// before the end may log its start after it.)
	taken := regexp.MustCompile(`--max-runtime reached: no new items will be taken items=(\d+)`).FindStringSubmatch(r.Stderr)
	done := regexp.MustCompile(`done; exiting items=(\d+)`).FindStringSubmatch(r.Stderr)
	if taken == nil || done == nil || taken[1] != done[1] || strings.Count(r.Stderr, "item started") != atoi(t, done[1]) {
		t.Errorf("items taken after the runtime ended:\n%s", r.Stderr)
	}
	r.wantStderr(t, "item=b")
	s.noLocks()
}

// TestParallelOneShotMakesOnePass: with fewer eligible items than
// --parallel, a one-shot run takes what one pass over the list finds, and
// looks at each candidate once: it warns about an item it cannot run once.
func TestParallelOneShotMakesOnePass(t *testing.T) {
	s := withList(t, "once", "a", "", "c")
	r := s.run(append([]string{"--parallel", "4"}, report(":", "")...)...)
	r.wantExit(t, 0)
	started := s.server.list(t, "started")
	slices.Sort(started)
	if !slices.Equal(started, []string{"a", "c"}) {
		t.Errorf("started %q, want a and c once each", started)
	}
	if n := strings.Count(r.Stderr, "it is empty"); n != 1 {
		t.Errorf("%d warnings about the empty item, want 1 from one pass:\n%s", n, r.Stderr)
	}
	if got := s.list(); !slices.Equal(got, []string{"a", "", "c"}) {
		t.Errorf("list %q after one whole pass", got)
	}
	s.noLocks()
}

// TestParallelRunsAreRecordedAndShown: with --parallel 3, each child's run
// has its own start and end in the events stream and in its item's state
// hash, under the worker's one token; the metrics count every running
// child; /healthz stays healthy while the worker drains after --max-items;
// and --status shows the cooldown and backoff that the runs' ends set.
func TestParallelRunsAreRecordedAndShown(t *testing.T) {
	s := withList(t, "pr", "a", "b", "c", "d")
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	p := s.start(append([]string{"-c", "--parallel", "3", "--max-items", "4",
		"--cooldown", "1h", "--failure-backoff", "1h", "--idle-wait", "100ms", "--metrics-addr", addr}, gated...)...)
	started := s.popEach(t, "started", 3)
	if !slices.Equal(started, []string{"a", "b", "c"}) {
		t.Fatalf("started %q, want a b c", started)
	}
	metrics, healthz := "http://"+addr+"/metrics", "http://"+addr+"/healthz"
	// waitMetrics polls the metrics until they show want.
	waitMetrics := func(want map[string]float64) {
		t.Helper()
		var m map[string]float64
		shown := func() bool {
			m = scrape(t, metrics)
			for name, v := range want {
				if m[name] != v {
					return false
				}
			}
			return true
		}
		if !poll.Poll(poll.Timeout, shown) {
			t.Fatalf("metrics %v, want %v", m, want)
		}
	}
	waitMetrics(map[string]float64{"w8y_children_running": 3, "w8y_items_started_total": 3})
	waitHealth(t, healthz, http.StatusOK)

	// a succeeds and cools down, b fails and backs off; the one item left
	// eligible, d, takes a freed slot, and that is --max-items.
	s.Client.RPush(ctx(t), "gate:a", "0")
	s.Client.RPush(ctx(t), "gate:b", "5")
	if got := s.popStarted(t); got != "d" {
		t.Fatalf("started %q, want d", got)
	}
	waitMetrics(map[string]float64{
		"w8y_children_running": 2, "w8y_items_started_total": 4,
		`w8y_items_finished_total{result="success"}`: 1, `w8y_items_finished_total{result="failure"}`: 1,
	})
	poll.WaitFor(t, "the --max-items line", func() bool { return strings.Contains(p.stderrSoFar(), "--max-items reached") })
	// Draining is progress: the worker is alive while its children run.
	waitHealth(t, healthz, http.StatusOK)

	items := statusJSON(t, nil, "-u", s.URL, "-k", "pr")
	byItem := map[string]map[string]any{}
	for _, it := range items {
		byItem[fmt.Sprint(it["item"])] = it
	}
	token := fmt.Sprint(byItem["c"]["holder"])
	for item, want := range map[string]map[string]any{
		"a": {"state": "cooldown", "last_result": "success", "last_exit_code": 0, "runs": 1, "failures": 0, "consecutive_failures": 0, "backoff_ms": nil, "holder": nil},
		"b": {"state": "backoff", "last_result": "failure", "last_exit_code": 5, "runs": 1, "failures": 1, "consecutive_failures": 1, "cooldown_ms": nil, "holder": nil},
		"c": {"state": "locked", "last_result": nil, "runs": 0, "last_holder": token},
		"d": {"state": "locked", "last_result": nil, "runs": 0, "holder": token, "last_holder": token},
	} {
		for k, v := range want {
			if fmt.Sprint(byItem[item][k]) != fmt.Sprint(v) {
				t.Errorf("--status: %s: %s = %v, want %v", item, k, byItem[item][k], v)
			}
		}
	}
	for item, field := range map[string]string{"a": "cooldown_ms", "b": "backoff_ms"} {
		if ms, ok := byItem[item][field].(float64); !ok || ms <= 0 || ms > float64(time.Hour.Milliseconds()) {
			t.Errorf("--status: %s: %s = %v, want up to an hour", item, field, byItem[item][field])
		}
	}

	s.Client.RPush(ctx(t), "gate:c", "0")
	s.Client.RPush(ctx(t), "gate:d", "0")
	r := p.wait(t)
	r.mustExit(t, 0)
	if !strings.Contains(r.Stderr, "done; exiting") {
		t.Fatalf("no log of the end: %s", r)
	}
	s.noLocks()

	// One start and one end per run, each naming its own item, all under
	// the worker's token; every item's hash counts its one run.
	events, err := s.Client.XRange(ctx(t), s.key("events"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range events {
		if e.Values["holder"] != token {
			t.Errorf("event %v: holder is not the worker's token %q", e.Values, token)
		}
		seen[fmt.Sprint(e.Values["type"], " ", e.Values["item"], " ", e.Values["result"])]++
	}
	want := map[string]int{
		"start a <nil>": 1, "start b <nil>": 1, "start c <nil>": 1, "start d <nil>": 1,
		"finish a success": 1, "finish b failure": 1, "finish c success": 1, "finish d success": 1,
	}
	if !maps.Equal(seen, want) {
		t.Errorf("events %v, want %v", seen, want)
	}
	for _, item := range []string{"a", "b", "c", "d"} {
		if st := s.stateOf(t, "pr", item); st["runs"] != "1" || st["last_holder"] != token {
			t.Errorf("%s: state %v, want one run by %q", item, st, token)
		}
	}
}
