package integration_test

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
)

// stamp is shell that records a child's start as "<item> <cooling>
// <unix ms>" in the list "runs", where cooling is whether its cooldown key
// exists as it starts.
func stamp(prefix string) string {
	return `redis-cli -p "$REDIS_PORT" rpush runs "$W8Y_ITEM $(redis-cli -p "$REDIS_PORT" exists "` + prefix +
		`:cooldown:$W8Y_ITEM") $(date +%s%3N)" >/dev/null`
}

// run is one start that stamp recorded.
type run struct {
	item    string
	cooling bool
	at      time.Time
}

// popRun waits for the next start that stamp records.
func (s *server) popRun(t *testing.T) run {
	t.Helper()
	record := s.pop(t, "runs")
	f := strings.Fields(record)
	if len(f) != 3 {
		t.Fatalf("bad run record %q", record)
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		t.Fatalf("bad run record %q", record)
	}
	return run{item: f[0], cooling: f[1] != "0", at: time.UnixMilli(ms)}
}

// TestCooldownAcrossWorkers: with three workers on two items, no item runs
// again inside its cooldown, on any worker, and each runs again after it.
func TestCooldownAcrossWorkers(t *testing.T) {
	s := withList(t, "cd", "a", "b")
	const cooldown = time.Second
	var workers []*proc
	for range 3 {
		workers = append(workers, s.start("-c", "-q", "--cooldown", "1s",
			"--idle-wait", "50ms", "sh", "-c", stamp("cd")))
	}
	runs := map[string][]run{}
	for len(runs["a"]) < 3 || len(runs["b"]) < 3 {
		r := s.popRun(t)
		if r.cooling {
			t.Errorf("%q started while its cooldown key existed", r.item)
		}
		runs[r.item] = append(runs[r.item], r)
	}
	for _, w := range workers {
		w.stop(t)
	}
	for item, rs := range runs {
		for i := 1; i < len(rs); i++ {
			gap := rs[i].at.Sub(rs[i-1].at)
			// The cooldown starts when the run ends, after it started;
			// date(1) truncates to the millisecond.
			if gap < cooldown-time.Millisecond {
				t.Errorf("%q ran again %s after its last start, inside its %s cooldown", item, gap, cooldown)
			}
			// Well after the cooldown would mean that it is not run again
			// once it may: idle workers look every 50ms.
			if gap > cooldown+2*time.Second {
				t.Errorf("%q ran again only %s after its last start", item, gap)
			}
		}
	}
	if pttl := s.Client.PTTL(ctx(t), s.key("cooldown:a")).Val(); pttl > cooldown {
		t.Errorf("cooldown key of a expires in %s, more than %s", pttl, cooldown)
	}
	s.noLocks()
}

// TestCooldownDeletedRunsAtOnce: an operator's DEL of the cooldown key makes
// the item eligible at once, an hour early.
func TestCooldownDeletedRunsAtOnce(t *testing.T) {
	s := withList(t, "now", "a")
	p := s.start(append([]string{"-c", "-q", "--cooldown", "1h", "--idle-wait", "20ms"},
		report(":", "")...)...)
	if got := s.popStarted(t); got != "a" {
		t.Fatalf("started %q, want a", got)
	}
	poll.WaitFor(t, "the cooldown key is set", func() bool { return s.Client.Exists(ctx(t), s.key("cooldown:a")).Val() == 1 })
	pttl := s.Client.PTTL(ctx(t), s.key("cooldown:a")).Val()
	if pttl > time.Hour || pttl < 59*time.Minute {
		t.Errorf("cooldown key expires in %s, want about 1h", pttl)
	}
	if holder := s.Client.Get(ctx(t), s.key("cooldown:a")).Val(); !strings.Contains(holder, ":") {
		t.Errorf("cooldown key holds %q, want the run's token", holder)
	}
	if n := s.Client.LLen(ctx(t), "started").Val(); n != 0 {
		t.Fatalf("a ran again inside its cooldown")
	}
	s.Client.Del(ctx(t), s.key("cooldown:a"))
	if got := s.popStarted(t); got != "a" {
		t.Errorf("after DEL, started %q, want a", got)
	}
	p.stop(t)
}

// backedOff is the "item backs off" log line of a run, if any.
func backedOff(t *testing.T, stderr string) (failures int, delay time.Duration) {
	t.Helper()
	for line := range strings.Lines(stderr) {
		var ev struct {
			Message  string  `json:"message"`
			Failures int     `json:"consecutive_failures"`
			Backoff  float64 `json:"backoff_s"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if ev.Message == "item backs off" {
			return ev.Failures, time.Duration(math.Round(ev.Backoff*1000)) * time.Millisecond
		}
	}
	return 0, 0
}

// TestFailureBackoffGrowsAndResets: each failure of an item doubles its
// delay (less up to a quarter of jitter) up to MAX, the count lives in Redis
// across runs of w8y, and a success resets it.
func TestFailureBackoffGrowsAndResets(t *testing.T) {
	s := withList(t, "bo", "f")
	// The child fails unless the key "fix" holds yes.
	args := []string{"-u", s.URL, "-k", "bo", "--log-format", "json", "--failure-backoff", "2s,7s", "--no-work-exit-code", "3",
		"sh", "-c", `test "$(redis-cli -p "$REDIS_PORT" get fix)" = yes`}
	count := func() string { return s.Client.HGet(ctx(t), s.key("state:f"), "consecutive_failures").Val() }
	fail := func(n int, nominal time.Duration) {
		t.Helper()
		r := runW8y(t, s.env, args...)
		r.mustExit(t, 1)
		failures, delay := backedOff(t, r.Stderr)
		if failures != n || delay > nominal || delay < nominal*3/4 {
			t.Errorf("failure %d: logged failure %d with a delay of %s, want %s less up to a quarter", n, failures, delay, nominal)
		}
		if got := count(); got != strconv.Itoa(n) {
			t.Errorf("failure %d: consecutive_failures is %q in Redis", n, got)
		}
		pttl := s.Client.PTTL(ctx(t), s.key("backoff:f")).Val()
		if pttl > delay || pttl < delay-time.Second {
			t.Errorf("failure %d: backoff key expires in %s, want %s", n, pttl, delay)
		}
		// While the backoff lasts, nothing is eligible.
		runW8y(t, s.env, args...).wantExit(t, 3)
		// Expire it now rather than wait: as an operator does, so that
		// the next run takes it rather than the fleet's next sweep.
		s.ctl("run-now", "f").wantExit(t, 0)
	}
	fail(1, 2*time.Second)
	fail(2, 4*time.Second)
	fail(3, 7*time.Second) // 8s, capped at MAX
	fail(4, 7*time.Second)

	s.Client.Set(ctx(t), "fix", "yes", 0)
	runW8y(t, s.env, args...).mustExit(t, 0)
	if got := count(); got != "0" {
		t.Errorf("after a success, consecutive_failures is %q, want 0", got)
	}
	if n := s.Client.Exists(ctx(t), s.key("backoff:f")).Val(); n != 0 {
		t.Errorf("a success set a backoff")
	}
	s.Client.Del(ctx(t), "fix")
	fail(1, 2*time.Second)
	if ttl := s.Client.PTTL(ctx(t), s.key("state:f")).Val(); ttl < 6*24*time.Hour {
		t.Errorf("state hash expires in %s, want about 7 days", ttl)
	}
	s.noLocks()
}

// TestFailureBackoffRetriesInTime: a continuous worker with
// --failure-backoff goes on after failures, and retries the failing item
// after each delay, which grows.
func TestFailureBackoffRetriesInTime(t *testing.T) {
	s := withList(t, "retry", "f")
	p := s.start("-c", "-q", "--failure-backoff", "300ms,1200ms",
		"--idle-wait", "20ms", "sh", "-c", stamp("retry")+"; exit 1")
	var starts []time.Time
	for len(starts) < 4 {
		starts = append(starts, s.popRun(t).at)
	}
	for i, nominal := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 1200 * time.Millisecond} {
		gap := starts[i+1].Sub(starts[i])
		if gap < nominal*3/4-time.Millisecond || gap > nominal+2*time.Second {
			t.Errorf("retry %d came %s after the last start, want %s less up to a quarter (and the idle wait)", i+1, gap, nominal)
		}
	}
	p.stop(t)
}

// TestStopOnFailure: without --failure-backoff a continuous worker still
// exits with a failing child's code, and --stop-on-failure keeps that with
// it; the failure is recorded either way.
func TestStopOnFailure(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	for _, extra := range [][]string{nil, {"--failure-backoff", "1h", "--stop-on-failure"}} {
		s.seed(t, "sof:list", "a")
		s.Client.Del(ctx(t), "sof:backoff:a")
		r := runW8y(t, nil, append(append([]string{"-u", s.URL, "-k", "sof", "-c", "-t"}, extra...), "sh", "-c", "exit 4")...)
		r.wantExit(t, 4)
		// The last line says which item stopped the worker, how, and what
		// would have kept it going.
		lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
		last := lines[len(lines)-1]
		keep := "--failure-backoff MIN[,MAX] (W8Y_FAILURE_BACKOFF) would back the item off and go on"
		if extra != nil {
			keep = "without it, --failure-backoff backs the item off and goes on"
		}
		if !strings.HasPrefix(last, "ERR stopping: item \"a\" failed (exit code 4)") || !strings.Contains(last, keep) {
			t.Errorf("the last line %q does not say why the worker stopped and what would keep it going", last)
		}
	}
	if got := s.Client.HGet(ctx(t), "sof:state:a", "consecutive_failures").Val(); got != "2" {
		t.Errorf("consecutive_failures %q, want 2", got)
	}
}

// TestInterruptedRunIsNotAFailure: a child stopped by the SIGTERM that w8y
// forwards neither backs off nor cools down, and its count is unchanged.
func TestInterruptedRunIsNotAFailure(t *testing.T) {
	s := withList(t, "intr", "a")
	s.Client.HSet(ctx(t), s.key("state:a"), "consecutive_failures", 2)
	p := s.start(append([]string{"-c", "-q", "--cooldown", "1h", "--failure-backoff", "1h"},
		report(":", "exec sleep 1000")...)...)
	s.popStarted(t)
	p.stop(t)
	// No cooldown, no backoff: only the run's record, its events, the
	// fencing token its take incremented, and a due entry that says the
	// item may run again at once.
	// And the fleet's marks of what it has tried of the list, and when its
	// next sweep is due (see internal/take's look.lua), and the version of
	// the layout of the keys (schema). And a token in the wake list, as the
	// end leaves the item due now: it wakes an idle worker, if one waits.
	if keys := s.keys(t, s.key("*")); !slices.Equal(keys, []string{s.key("due"), s.key("events"), s.key("fence"), s.key("list"), s.key("schema"), s.key("seen"), s.key("state:a"), s.key("sweep"), s.key("untried"), s.key("wake")}) {
		t.Errorf("keys after an interrupted run: %q", keys)
	}
	if due, err := s.Client.ZScore(ctx(t), s.key("due"), "a").Result(); err != nil || due > float64(time.Now().UnixMilli()) {
		t.Errorf("due entry of a: %v (%v), want a moment no later than now", due, err)
	}
	if got := s.Client.HGet(ctx(t), s.key("state:a"), "consecutive_failures").Val(); got != "2" {
		t.Errorf("consecutive_failures %q, want 2 as before", got)
	}
	if got := s.Client.HGet(ctx(t), s.key("state:a"), "last_result").Val(); got != "interrupted" {
		t.Errorf("last_result %q, want interrupted", got)
	}
}
