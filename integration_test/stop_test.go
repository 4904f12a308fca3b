package integration_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// TestTimeoutSignal: at --timeout, the child's group gets the signal that
// --timeout-signal names, however it is written, and w8y exits 124. The
// child traps that signal and records it; the default is SIGTERM.
func TestTimeoutSignal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, flag, trap string
	}{
		{"default", "", "TERM"},
		{"name", "USR1", "USR1"},
		{"lower case with SIG", "sigusr2", "USR2"},
		{"number", "10", "USR1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "tsig")
			s.items("a")
			// Any other signal but the one trapped kills the shell before
			// it records anything.
			script := `trap 'redis-cli -p "$REDIS_PORT" rpush got ` + tt.trap + ` >/dev/null; exit 0' ` + tt.trap +
				`; redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null; while :; do sleep 0.05; done`
			args := []string{"-u", s.URL, "-k", "tsig", "-x", "3", "--kill-after", "1s", "--timeout", "300ms"}
			if tt.flag != "" {
				args = append(args, "--timeout-signal", tt.flag)
			}
			p := startW8y(t, []string{"REDIS_PORT=" + itoa(s.Port)}, append(args, "sh", "-c", script)...)
			if got := s.popStarted(t); got != "a" {
				t.Fatalf("started %q, want a", got)
			}
			if got := s.pop(t, "got"); got != tt.trap {
				t.Errorf("the child got %s, want %s", got, tt.trap)
			}
			p.wait(t).wantExit(t, 124)
		})
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
	redistest.WaitFor(t, "w8y to say it drains", func() bool { return strings.Contains(p.stderrSoFar(), "draining") })
}

// TestDrainLetsChildrenFinish: with --drain-timeout, SIGTERM stops the
// taking of items, but the running children (two, with --parallel 2 and
// --continuous) get no signal: they keep their locks, refreshed, finish
// their work, and their runs are successes; w8y then exits 0.
func TestDrainLetsChildrenFinish(t *testing.T) {
	t.Parallel()
	s := setup(t, "drainok")
	s.items("a", "b", "c")
	p := startW8y(t, []string{"REDIS_PORT=" + itoa(s.Port)}, "-u", s.URL, "-k", "drainok", "-c", "--parallel", "2",
		"-x", "2", "--drain-timeout", "1m", "sh", "-c", drainChild)
	started := s.popEach(t, "started", 2)
	p.signal(t, syscall.SIGTERM)
	waitDraining(t, p)
	// The leases go on while the children drain: each lock's expiry is
	// pushed back again, which is seen as its PTTL going up.
	for _, item := range started {
		lock := s.key("lock:" + item)
		last := s.Client.PTTL(ctx(t), lock).Val()
		redistest.WaitFor(t, "the lock of "+item+" to be refreshed during the drain", func() bool {
			now := s.Client.PTTL(ctx(t), lock).Val()
			refreshed := now > last
			last = now
			return refreshed
		})
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
	t.Parallel()
	s := setup(t, "drainlate")
	s.items("a")
	const drain = 500 * time.Millisecond
	p := startW8y(t, []string{"REDIS_PORT=" + itoa(s.Port)}, "-u", s.URL, "-k", "drainlate", "-x", "3",
		"--drain-timeout", drain.String(), "sh", "-c", drainChild)
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
	t.Parallel()
	s := setup(t, "drainkill")
	s.items("a")
	p := startW8y(t, []string{"REDIS_PORT=" + itoa(s.Port)}, "-u", s.URL, "-k", "drainkill", "-x", "3",
		"--drain-timeout", "1h", "sh", "-c", drainChild)
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
	t.Parallel()
	s := setup(t, "drain")
	s.items("a")
	script := `(trap "" TERM; exec sleep 60) & redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null; wait`
	p := startW8y(t, []string{"REDIS_PORT=" + itoa(s.Port)}, "-u", s.URL, "-k", "drain", "--continuous", "-x", "3", "sh", "-c", script)
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
	redistest.WaitFor(t, "the lock to be released", func() bool { return s.Client.Exists(ctx(t), s.key("lock:a")).Val() == 0 })
}
