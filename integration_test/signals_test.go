package integration_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// groupChild is a shell that starts a grandchild in its process group,
// records the grandchild's pid in the file $PIDFILE, reports its start and
// waits.
var groupChild = report(`sleep 1000 & echo $! > "$PIDFILE"`, "wait")

// startGroupChild starts w8y with args and groupChild as its command, waits
// for the child to start and returns the item it took and the grandchild's
// pid.
func startGroupChild(t *testing.T, s *server, args ...string) (p *proc, item string, grandchild int) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	p = startW8y(t, append(portEnv(s), "PIDFILE="+pidFile), append(args, groupChild...)...)
	item = s.popStarted(t)
	return p, item, readPID(t, pidFile)
}

// readPID reads the pid that a child wrote to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

// TestSIGTERMEndsTheWholeGroup sends SIGTERM to a one-shot w8y whose child
// has a grandchild: both are gone, the lock is released, the list is intact,
// and w8y exits with the child's code (143: killed by SIGTERM).
func TestSIGTERMEndsTheWholeGroup(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "term:list", "a", "b")
	p, _, grandchild := startGroupChild(t, s, "-u", s.URL, "-k", "term")
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	r.wantExit(t, 143)
	processGone(t, grandchild)
	s.noLocks(t, "term")
	if got := s.list(t, "term:list"); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("list %q", got)
	}
}

// TestContinuousDrainsOnSIGTERM: a continuous worker passes SIGTERM to its
// child, waits for it, releases the lock and exits 0.
func TestContinuousDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "drain:list", "a", "b", "c")
	p, item, grandchild := startGroupChild(t, s, "-u", s.URL, "-k", "drain", "-c")
	if item != "a" {
		t.Errorf("first item %q, want a", item)
	}
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	r.wantExit(t, 0)
	processGone(t, grandchild)
	s.noLocks(t, "drain")
	if n, _ := s.Client.LLen(ctx(t), "started").Result(); n != 0 {
		t.Errorf("%d more items were started after SIGTERM", n)
	}
	if got := s.list(t, "drain:list"); !slices.Equal(got, []string{"b", "c", "a"}) {
		t.Errorf("list %q", got)
	}
}

// TestSecondSignalKillsTheGroup: a child that ignores SIGTERM is killed by
// a second SIGTERM to w8y.
func TestSecondSignalKillsTheGroup(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "stubborn:list", "a")
	p := startW8y(t, portEnv(s), append([]string{"-u", s.URL, "-k", "stubborn", "-c"},
		report(`trap 'redis-cli -p "$REDIS_PORT" rpush started got-term >/dev/null' TERM`, "while :; do sleep 0.05; done")...)...)
	s.popStarted(t)
	p.signal(t, syscall.SIGTERM)
	if got := s.popStarted(t); got != "got-term" {
		t.Fatalf("the child reported %q, want got-term", got)
	}
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	r.wantExit(t, 0)
	if !strings.Contains(r.Stderr, "second stop signal") {
		t.Errorf("no log of the escalation:\n%s", r.Stderr)
	}
	s.noLocks(t, "stubborn")
}

// TestSignalsReachTheChild: SIGUSR1 to w8y reaches the child's group.
func TestSignalsReachTheChild(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "usr:list", "a")
	p := startW8y(t, portEnv(s), append([]string{"-u", s.URL, "-k", "usr", "-q"},
		report(`trap 'echo got-usr1; exit 3' USR1`, "while :; do sleep 0.05; done")...)...)
	s.popStarted(t)
	p.signal(t, syscall.SIGUSR1)
	r := p.wait(t)
	r.wantExit(t, 3)
	r.wantStdout(t, "got-usr1\n")
}

// TestLeftoverProcessesAreStopped: a child that exits leaving a process in
// its group, one that ignores SIGTERM, has that process killed after
// --kill-after, before w8y releases the lock and exits with the child's code.
func TestLeftoverProcessesAreStopped(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "left:list", "a")
	pidFile := filepath.Join(t.TempDir(), "leftover")
	r := runW8y(t, append(portEnv(s), "PIDFILE="+pidFile), "-u", s.URL, "-k", "left", "--kill-after", "200ms",
		"sh", "-c", `sh -c 'trap "" TERM; sleep 1000' & echo $! > "$PIDFILE"; exit 4`)
	r.wantExit(t, 4)
	if !strings.Contains(r.Stderr, "left processes in its group") {
		t.Errorf("no warning about the leftover process:\n%s", r.Stderr)
	}
	processGone(t, readPID(t, pidFile))
	s.noLocks(t, "left")
}
