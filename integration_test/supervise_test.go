package integration_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
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
			processGone(t, grandchild)
			s.noLocks()
			s.wantList("b", "a")
		})
	}
}

// TestTimeoutListedInExitCodes: with -i 124, a continuous worker goes on to
// the next item after a timeout.
func TestTimeoutListedInExitCodes(t *testing.T) {
	t.Parallel()
	s := setup(t, "to124")
	s.items("a", "b")
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
	t.Parallel()
	s := setup(t, "sigkill")
	s.items("a")
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
	t.Parallel()
	s := setup(t, "pdeath")
	s.items("a")
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
	t.Parallel()
	s := setup(t, "reap")
	s.items("a")
	p := s.start("--subreaper", "sh", "-c", orphanMaker)
	s.popStarted(t)
	p.signal(t, syscall.SIGTERM)
	p.wait(t).wantExit(t, 143)
	s.noLocks()
}

// TestReaperLeavesOwnChildAlone: reaping never takes the exit status of
// w8y's own child, even one that exits at once, again and again.
func TestReaperLeavesOwnChildAlone(t *testing.T) {
	t.Parallel()
	s := setup(t, "own")
	s.items("a")
	for range 20 {
		r := s.run("-q", "--subreaper", "sh", "-c", "sh -c 'exit 0' & exit 7")
		r.mustExit(t, 7)
	}
}

// TestPID1ReapsOrphans: as PID 1 of a PID namespace, as in a container, w8y
// reaps orphans without being asked.
func TestPID1ReapsOrphans(t *testing.T) {
	t.Parallel()
	s := setup(t, "pid1")
	s.items("a")
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
