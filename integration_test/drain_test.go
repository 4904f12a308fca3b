package integration_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
)

// TestContinuousDrainsOnSIGTERM: a continuous worker passes SIGTERM to its
// child, waits for it, releases the lock and exits 0.
func TestContinuousDrainsOnSIGTERM(t *testing.T) {
	s := withList(t, "drain", "a", "b", "c")
	p, item, grandchild := s.startGroupChild("-c")
	if item != "a" {
		t.Errorf("first item %q, want a", item)
	}
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	r.wantExit(t, 0)
	s.groupEnded(grandchild, "b", "c", "a")
	if n, _ := s.Client.LLen(ctx(t), "started").Result(); n != 0 {
		t.Errorf("%d more items were started after SIGTERM", n)
	}
}

// drainChild reports its start, records any SIGTERM it gets, then waits for
// the test to push to "go" and exits 0.
const drainChild = `trap 'redis-cli -p "$REDIS_PORT" rpush got TERM >/dev/null; exit 9' TERM; ` +
	`redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null; ` +
	`redis-cli -p "$REDIS_PORT" blpop go 0 >/dev/null & wait $!`

// waitDraining waits until w8y says it drains.
func waitDraining(t *testing.T, p *proc) {
	t.Helper()
	poll.WaitFor(t, "w8y to say it drains", func() bool { return strings.Contains(p.stderrSoFar(), "draining") })
}

// TestDrainLetsChildrenFinish: with --drain-timeout, SIGTERM stops the
// taking of items, but the running children (two, with --parallel 2 and
// --continuous) get no signal: they keep their locks, refreshed, finish
// their work, and their runs are successes; w8y then exits 0.
func TestDrainLetsChildrenFinish(t *testing.T) {
	s := withList(t, "drainok", "a", "b", "c")
	p := s.start("-c", "--parallel", "2", "-x", "2", "--drain-timeout", "1m", "sh", "-c", drainChild)
	started := s.popEach(t, "started", 2)
	p.signal(t, syscall.SIGTERM)
	waitDraining(t, p)
	// The leases go on while the children drain: each lock's expiry is
	// pushed back again, which is seen as its PTTL going up.
	for _, item := range started {
		waitRefresh(t, s.server, s.key("lock:"+item))
	}
	s.Client.RPush(ctx(t), "go", "1", "1")
	p.wait(t).wantExit(t, 0)
	if n := s.Client.LLen(ctx(t), "got").Val(); n != 0 {
		t.Errorf("%d children got SIGTERM during the drain", n)
	}
	for _, item := range started {
		if got := s.Client.HGet(ctx(t), s.key("state:"+item), "last_result").Val(); got != "success" {
			t.Errorf("item %s's run is recorded as %q, want success", item, got)
		}
	}
	if n := s.Client.Exists(ctx(t), s.key("state:c")).Val(); n != 0 {
		t.Error("an item was taken after the stop signal")
	}
	s.noLocks()
}

// TestDrainTimeoutPassesTheSignal: a child that outlives --drain-timeout
// gets the stop signal then, not before, and its code is w8y's.
func TestDrainTimeoutPassesTheSignal(t *testing.T) {
	s := withList(t, "drainlate", "a")
	const drain = 500 * time.Millisecond
	p := s.start("-x", "3", "--drain-timeout", drain.String(), "sh", "-c", drainChild)
	s.popStarted(t)
	signalled := time.Now()
	p.signal(t, syscall.SIGTERM)
	if got := s.pop(t, "got"); got != "TERM" {
		t.Fatalf("the child got %q, want TERM", got)
	}
	if waited := time.Since(signalled); waited < drain {
		t.Errorf("the child got SIGTERM %s after w8y, before --drain-timeout %s", waited, drain)
	}
	p.wait(t).wantExit(t, 9)
	s.noLocks()
}

// TestDrainSecondSignalKills: a second stop signal during a drain kills the
// children's groups at once.
func TestDrainSecondSignalKills(t *testing.T) {
	s := withList(t, "drainkill", "a")
	p := s.start("-x", "3", "--drain-timeout", "1h", "sh", "-c", drainChild)
	s.popStarted(t)
	p.signal(t, syscall.SIGTERM)
	waitDraining(t, p)
	p.signal(t, syscall.SIGINT)
	p.wait(t).wantExit(t, 128+int(syscall.SIGKILL))
	if n := s.Client.LLen(ctx(t), "got").Val(); n != 0 {
		t.Errorf("the child got SIGTERM: it should have been killed at once")
	}
	s.noLocks()
}

// TestDrainLogsAtInfo: an ordinary SIGTERM drain is no warning. The run
// that the signal interrupted, and a process of its group still on its way
// out (here one that ignores SIGTERM, so that there is one every time),
// are logged at info: a rollout must not fill the logs with warnings.
func TestDrainLogsAtInfo(t *testing.T) {
	s := withList(t, "drain", "a")
	script := `(trap "" TERM; exec sleep 60) & redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null; wait`
	p := s.start("--continuous", "-x", "3", "sh", "-c", script)
	if got := s.popStarted(t); got != "a" {
		t.Fatalf("started %q, want a", got)
	}
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	r.wantExit(t, 0)
	if !strings.Contains(r.Stderr, "INF the child left processes in its group") || !strings.Contains(r.Stderr, "result=interrupted") {
		t.Errorf("the drain's log does not tell of the leftover process and the interrupted run:\n%s", r.Stderr)
	}
	for _, line := range strings.Split(r.Stderr, "\n") {
		if strings.Contains(line, " WRN ") || strings.Contains(line, " ERR ") {
			t.Errorf("a drain logs %q", line)
		}
	}
	poll.WaitFor(t, "the lock to be released", func() bool { return s.Client.Exists(ctx(t), s.key("lock:a")).Val() == 0 })
}
