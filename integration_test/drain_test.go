package integration_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/redistest"
)

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
