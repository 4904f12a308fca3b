package integration_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
)

// TestTimeout: a child still running at --timeout has its whole group
// stopped (SIGTERM, then SIGKILL after --kill-after for one that ignores
// SIGTERM); w8y releases the lock and exits 124 with one line on stderr. In
// continuous mode a timeout stops the worker too, unless --exit-codes lists
// 124.
func TestTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		child string
		want  int
	}{
		{"group stopped by SIGTERM", nil, `sleep 1000 & echo $! > "$PIDFILE"; ` + started + `; wait`, 124},
		{"SIGTERM ignored, then SIGKILL", nil, `trap "" TERM; sleep 1000 & echo $! > "$PIDFILE"; ` + started + `; wait`, 124},
		{"continuous worker stops", []string{"-c"}, `sleep 1000 & echo $! > "$PIDFILE"; ` + started + `; wait`, 124},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "to")
			s.items("a", "b")
			pidFile := filepath.Join(t.TempDir(), "grandchild")
			s.setenv("PIDFILE=" + pidFile)
			logFile := filepath.Join(t.TempDir(), "w8y.log")
			args := append([]string{"-x", "3", "--kill-after", "300ms", "--timeout", "400ms", "-f", logFile}, tt.args...)
			p := s.start(append(args, "sh", "-c", tt.child)...)
			if item := s.popStarted(t); item != "a" {
				t.Errorf("took %q, want a", item)
			}
			grandchild := readPID(t, pidFile)
			r := p.wait(t)
			r.wantExit(t, tt.want)
			// With the log in a file, stderr tells of the failed item, and a
			// worker that stops because of it says so last.
			lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
			want := []string{`w8y: item "a" failed: timed out after 400ms (--timeout); it was stopped (exit code 124)`}
			if slices.Contains(tt.args, "-c") {
				want = append(want, `w8y: stopping: item "a" failed (exit code 124), and without --failure-backoff a --continuous worker stops on a failed run; `+
					`--failure-backoff MIN[,MAX] (W8Y_FAILURE_BACKOFF) would back the item off and go on, and listing 124 in --exit-codes would count a timeout as a success`)
			}
			if !slices.Equal(lines, want) {
				t.Errorf("stderr:\n%s\nwant:\n%s", r.Stderr, strings.Join(want, "\n"))
			}
			s.groupEnded(grandchild, "b", "a")
		})
	}
}

// TestTimeoutListedInExitCodes: with -i 124, a continuous worker goes on to
// the next item after a timeout.
func TestTimeoutListedInExitCodes(t *testing.T) {
	s := withList(t, "to124", "a", "b")
	p := s.start("-c", "-i", "0", "-i", "124", "--timeout", "200ms", "-x", "3",
		"sh", "-c", started+`; exec sleep 1000`)
	for _, want := range []string{"a", "b", "a"} {
		if got := s.popStarted(t); got != want {
			t.Fatalf("started %q, want %q", got, want)
		}
	}
	p.stop(t)
	s.noLocks()
}

// guardOf returns the pid of w8y's guard: its child named w8y-guard.
func guardOf(t *testing.T, w8y int) int {
	t.Helper()
	for _, pid := range childrenOf(w8y) {
		cmdline, _ := os.ReadFile("/proc/" + itoa(pid) + "/cmdline")
		if strings.HasPrefix(string(cmdline), "w8y-guard\x00") {
			return pid
		}
	}
	t.Fatalf("w8y %d has no guard among its children %v", w8y, childrenOf(w8y))
	return 0
}

// TestKilledW8yTakesTheGroupWithIt: when w8y is SIGKILLed, and so can clean
// nothing up, neither its child nor the child's own children run on: its
// guard kills the child's group and every process with the run's
// W8Y_HOLDER. The lock stays until it expires.
func TestKilledW8yTakesTheGroupWithIt(t *testing.T) {
	s := withList(t, "sigkill", "a")
	dir := t.TempDir()
	s.setenv("DIR=" + dir)
	p := s.start("-x", "30",
		"sh", "-c", `echo $$ > "$DIR/child"; sleep 1000 & echo $! > "$DIR/grandchild"; `+
			`env -i sleep 1000 & echo $! > "$DIR/bare"; `+started+`; wait`)
	s.popStarted(t)
	child, grandchild := readPID(t, filepath.Join(dir, "child")), readPID(t, filepath.Join(dir, "grandchild"))
	// Without W8Y_HOLDER in its environment, only its process group gives
	// this one away.
	bare := readPID(t, filepath.Join(dir, "bare"))
	guard := guardOf(t, p.cmd.Process.Pid)
	t.Cleanup(func() {
		if t.Failed() {
			stat, _ := os.ReadFile("/proc/" + itoa(guard) + "/stat")
			t.Logf("the guard was %d; its /proc stat now: %q", guard, stat)
		}
	})
	p.signal(t, syscall.SIGKILL)
	p.wait(t)
	processGone(t, child)
	processGone(t, grandchild)
	processGone(t, bare)
	if got := s.keys(t, s.key("lock:*")); len(got) != 1 {
		t.Errorf("locks %q: the lock should stay until it expires", got)
	}
}

// TestParentDeathSignal: with the guard gone too, the kernel's parent-death
// signal still ends w8y's direct child when w8y is SIGKILLed.
func TestParentDeathSignal(t *testing.T) {
	s := withList(t, "pdeath", "a")
	dir := t.TempDir()
	s.setenv("DIR=" + dir)
	p := s.start("-x", "30",
		"sh", "-c", `echo $$ > "$DIR/child"; `+started+`; exec sleep 1000`)
	s.popStarted(t)
	child := readPID(t, filepath.Join(dir, "child"))
	guard := guardOf(t, p.cmd.Process.Pid)
	if err := syscall.Kill(guard, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	processGone(t, guard)
	p.signal(t, syscall.SIGKILL)
	p.wait(t)
	processGone(t, child)
}

// orphanMaker is a child that orphans a process (a shell that starts it in
// the background and exits), kills it, and reports its start only once the
// orphan's zombie has been reaped by whoever it was re-parented to. With no
// one reaping, it never reports.
const orphanMaker = `orphan=$(sh -c 'sleep 1000 >/dev/null & echo $!'); ` +
	`kill -KILL "$orphan"; ` +
	`while [ -e "/proc/$orphan" ]; do sleep 0.01; done; ` +
	started + `; exec sleep 1000`

// TestSubreaperReapsOrphans: with --subreaper, a process that the child
// orphans is re-parented to w8y, which reaps it; the child's own exit code
// still comes through.
func TestSubreaperReapsOrphans(t *testing.T) {
	s := withList(t, "reap", "a")
	p := s.start("--subreaper", "sh", "-c", orphanMaker)
	s.popStarted(t)
	p.signal(t, syscall.SIGTERM)
	p.wait(t).wantExit(t, 143)
	s.noLocks()
}

// TestReaperLeavesOwnChildAlone: reaping never takes the exit status of
// w8y's own child, even one that exits at once, again and again.
func TestReaperLeavesOwnChildAlone(t *testing.T) {
	s := withList(t, "own", "a")
	for range 20 {
		r := s.run("-q", "--subreaper", "sh", "-c", "sh -c 'exit 0' & exit 7")
		r.mustExit(t, 7)
	}
}

// TestPID1ReapsOrphans: as PID 1 of a PID namespace, as in a container, w8y
// reaps orphans without being asked.
func TestPID1ReapsOrphans(t *testing.T) {
	s := withList(t, "pid1", "a")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to run w8y as PID 1: %v", err)
	}
	p := startCommand(t, s.env, unshare, append([]string{"--pid", "--fork", "--mount-proc", "--kill-child", binary},
		s.at("sh", "-c", `[ $PPID = 1 ] || exit 99; `+orphanMaker)...)...)
	s.popStarted(t)
	p.signal(t, syscall.SIGKILL)
	p.wait(t)
}

// groupChild is a shell that starts a grandchild in its process group,
// records the grandchild's pid in the file $PIDFILE, reports its start and
// waits.
var groupChild = report(`sleep 1000 & echo $! > "$PIDFILE"`, "wait")

// startGroupChild starts w8y on the bundle's list with args and groupChild
// as its command, waits for the child to start and returns the item it took
// and the grandchild's pid.
func (b *bundle) startGroupChild(args ...string) (p *proc, item string, grandchild int) {
	b.t.Helper()
	pidFile := filepath.Join(b.t.TempDir(), "grandchild")
	p = startW8y(b.t, append(slices.Clone(b.env), "PIDFILE="+pidFile), b.at(append(args, groupChild...)...)...)
	item = b.popStarted(b.t)
	return p, item, readPID(b.t, pidFile)
}

// groupEnded fails the test unless a run's group is gone (its grandchild
// too, which only a signal to the whole group reaches), its lock released
// and the list is list, in its order: how a run that a timeout or a stop
// signal ends must leave things.
func (b *bundle) groupEnded(grandchild int, list ...string) {
	b.t.Helper()
	processGone(b.t, grandchild)
	b.noLocks()
	b.wantList(list...)
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
	s := withList(t, "term", "a", "b")
	p, _, grandchild := s.startGroupChild()
	// A grandchild that outlives w8y (a signal sent to the child's pid, not
	// its group) holds w8y's stdout open, and p.wait would wait for it until
	// the test binary's timeout: this test's own deadline kills it, and fails.
	var outlived atomic.Bool
	deadline := time.AfterFunc(poll.Timeout, func() {
		outlived.Store(true)
		_ = syscall.Kill(grandchild, syscall.SIGKILL)
	})
	defer deadline.Stop()
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	if outlived.Load() {
		t.Fatalf("the grandchild %d outlived w8y by %s: SIGTERM did not reach the whole group", grandchild, poll.Timeout)
	}
	r.wantExit(t, 143)
	s.groupEnded(grandchild, "b", "a")
}

// TestSecondSignalKillsTheGroup: a child that ignores SIGTERM is killed by
// a second SIGTERM to w8y.
func TestSecondSignalKillsTheGroup(t *testing.T) {
	s := withList(t, "stubborn", "a")
	p := s.start(append([]string{"-c"},
		report(`trap 'redis-cli -p "$REDIS_PORT" rpush started got-term >/dev/null' TERM`, "while :; do sleep 0.05; done")...)...)
	s.popStarted(t)
	p.signal(t, syscall.SIGTERM)
	if got := s.popStarted(t); got != "got-term" {
		t.Fatalf("the child reported %q, want got-term", got)
	}
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	r.wantEnd(t, 0, "second stop signal")
	s.noLocks()
}

// TestSignalsReachTheChild: SIGUSR1 to w8y reaches the child's group.
func TestSignalsReachTheChild(t *testing.T) {
	s := withList(t, "usr", "a")
	p := s.start(append([]string{"-q"},
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
	s := withList(t, "left", "a")
	pidFile := filepath.Join(t.TempDir(), "leftover")
	s.setenv("PIDFILE=" + pidFile)
	r := s.run("--kill-after", "200ms",
		"sh", "-c", `sh -c 'trap "" TERM; sleep 1000' & echo $! > "$PIDFILE"; exit 4`)
	r.wantEnd(t, 4, "left processes in its group")
	processGone(t, readPID(t, pidFile))
	s.noLocks()
}
