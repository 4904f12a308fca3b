package integration_test

import (
	"bufio"
	"fmt"
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
	t.Parallel()
	s := setup(t, "term")
	s.items("a", "b")
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

// TestContinuousDrainsOnSIGTERM: a continuous worker passes SIGTERM to its
// child, waits for it, releases the lock and exits 0.
func TestContinuousDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	s := setup(t, "drain")
	s.items("a", "b", "c")
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

// TestSecondSignalKillsTheGroup: a child that ignores SIGTERM is killed by
// a second SIGTERM to w8y.
func TestSecondSignalKillsTheGroup(t *testing.T) {
	t.Parallel()
	s := setup(t, "stubborn")
	s.items("a")
	p := s.start(append([]string{"-c"},
		report(`trap 'redis-cli -p "$REDIS_PORT" rpush started got-term >/dev/null' TERM`, "while :; do sleep 0.05; done")...)...)
	s.popStarted(t)
	p.signal(t, syscall.SIGTERM)
	if got := s.popStarted(t); got != "got-term" {
		t.Fatalf("the child reported %q, want got-term", got)
	}
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	r.wantExit(t, 0)
	r.wantStderr(t, "second stop signal")
	s.noLocks()
}

// TestSignalsReachTheChild: SIGUSR1 to w8y reaches the child's group.
func TestSignalsReachTheChild(t *testing.T) {
	t.Parallel()
	s := setup(t, "usr")
	s.items("a")
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
	t.Parallel()
	s := setup(t, "left")
	s.items("a")
	pidFile := filepath.Join(t.TempDir(), "leftover")
	s.setenv("PIDFILE=" + pidFile)
	r := s.run("--kill-after", "200ms",
		"sh", "-c", `sh -c 'trap "" TERM; sleep 1000' & echo $! > "$PIDFILE"; exit 4`)
	r.wantExit(t, 4)
	r.wantStderr(t, "left processes in its group")
	processGone(t, readPID(t, pidFile))
	s.noLocks()
}

// closedPipe returns the write end of a pipe whose reader has gone, as
// `w8y ... | head -1` leaves it once head exits: every write to it raises
// SIGPIPE and fails with EPIPE.
func closedPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

// TestSIGPIPEWhenTheReaderGoes: w8y ... | head -1, with the child's output
// passing through w8y's pipes (to keep a failure's last words): once the
// reader has gone, the child's next write fails as it would in a plain
// pipeline, so that a child that writes forever (yes) dies of SIGPIPE and
// the run ends, instead of writing into w8y's pipe for ever.
func TestSIGPIPEWhenTheReaderGoes(t *testing.T) {
	t.Parallel()
	s := setup(t, "head")
	s.items("a")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := startWith(t, []*os.File{w, nil}, s.env, binary, s.at("sh", "-c", `[ -t 1 ] || yes`)...)
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != "y\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	r.Close()
	p.wait(t).wantExit(t, 141)
	if got := s.stateOf(t, "head", "a")["last_result"]; got != "failure" {
		t.Errorf("last_result %q, want failure", got)
	}
	s.noLocks()
}

// TestSIGPIPE: w8y never dies of a write to its own output. With stdout or
// stderr a pipe nobody reads, a run ends as it would have: the child's code
// (a child that writes there dies of SIGPIPE, as it would alone), 124 for a
// timeout, a drain's 0; the lock is released and the end recorded.
func TestSIGPIPE(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		closed string // "stdout", "stderr" or "both"
		args   []string
		child  string
		stop   bool // SIGTERM once the child has started
		code   int
		result string // the run's last_result; "" for --status
	}{
		{name: "stderr: the child's code", closed: "stderr", child: started + "; exit 3", code: 3, result: "failure"},
		{name: "stderr: a timeout", closed: "stderr", args: []string{"--timeout", "300ms", "-x", "3"}, child: started + "; exec sleep 1000", code: 124, result: "timeout"},
		{name: "stderr: a drain", closed: "stderr", args: []string{"-c"}, child: started + "; exec sleep 1000", stop: true, code: 0, result: "interrupted"},
		{name: "stdout: the child dies of SIGPIPE", closed: "stdout", child: started + "; echo x", code: 141, result: "failure"},
		{name: "stdout: a quiet child", closed: "stdout", child: started + "; exit 0", code: 0, result: "success"},
		{name: "both: a timeout", closed: "both", args: []string{"--timeout", "300ms", "-x", "3"}, child: started + "; exec sleep 1000", code: 124, result: "timeout"},
		{name: "stdout: --status", closed: "stdout", args: []string{"--status"}, code: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "pipe")
			s.items("a")
			outputs := []*os.File{nil, nil}
			if tt.closed != "stderr" {
				outputs[0] = closedPipe(t)
			}
			if tt.closed != "stdout" {
				outputs[1] = closedPipe(t)
			}
			args := tt.args
			if tt.result != "" {
				args = append(slices.Clone(args), "sh", "-c", tt.child)
			}
			p := startWith(t, outputs, s.env, binary, s.at(args...)...)
			if tt.result != "" {
				s.popStarted(t)
			}
			if tt.stop {
				p.signal(t, syscall.SIGTERM)
			}
			p.wait(t).wantExit(t, tt.code)
			s.noLocks()
			if tt.result == "" {
				return
			}
			if got, _ := s.Client.HGet(ctx(t), s.key("state:a"), "last_result").Result(); got != tt.result {
				t.Errorf("last_result %q, want %q", got, tt.result)
			}
		})
	}
}

// TestIgnoredSignalsStayIgnored: a signal that w8y was started with ignored
// (nohup, a background job of a shell without job control, trap "" SIG) stays
// ignored for its child, as /proc/<child>/status shows. Go's runtime catches
// SIGPIPE, SIGTERM, SIGQUIT and others before w8y can look, and forgets that
// they were ignored: the child gets those at their defaults (see docs/reference.md).
func TestIgnoredSignalsStayIgnored(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	tests := []struct {
		name    string
		wrap    func(w8y string) []string // the command that starts w8y
		ignored []syscall.Signal
		notIgn  []syscall.Signal
	}{
		{
			name: "nothing ignored", wrap: func(w8y string) []string { return []string{"sh", "-c", w8y} },
			notIgn: []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTSTP, syscall.SIGPIPE},
		},
		{
			name: "nohup", wrap: func(w8y string) []string { return []string{"sh", "-c", "exec nohup " + w8y} },
			ignored: []syscall.Signal{syscall.SIGHUP}, notIgn: []syscall.Signal{syscall.SIGINT},
		},
		{
			// Without job control, sh starts an asynchronous command with
			// SIGINT and SIGQUIT ignored.
			name: "a shell's background job", wrap: func(w8y string) []string { return []string{"sh", "-c", w8y + " & wait $!"} },
			ignored: []syscall.Signal{syscall.SIGINT}, notIgn: []syscall.Signal{syscall.SIGHUP},
		},
		{
			name: "job control signals", wrap: func(w8y string) []string { return []string{"sh", "-c", `trap "" TSTP TTIN TTOU; exec ` + w8y} },
			ignored: []syscall.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU},
		},
		{
			// The limit: Go's runtime has caught SIGPIPE before w8y starts.
			name: "SIGPIPE is not kept", wrap: func(w8y string) []string { return []string{"sh", "-c", `trap "" PIPE; exec ` + w8y} },
			notIgn: []syscall.Signal{syscall.SIGPIPE},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := "ign" + itoa(i)
			s.seed(t, prefix+":list", "a")
			w8y := fmt.Sprintf("%s -q -u %s -k %s grep SigIgn: /proc/self/status", binary, s.URL, prefix)
			cmd := tt.wrap(w8y)
			r := startCommand(t, nil, cmd[0], cmd[1:]...).wait(t)
			r.mustExit(t, 0)
			var mask uint64
			if _, err := fmt.Sscanf(r.Stdout, "SigIgn:\t%x", &mask); err != nil {
				t.Fatalf("the child's SigIgn: %v in %s", err, r)
			}
			for _, sig := range tt.ignored {
				if mask&(1<<(sig-1)) == 0 {
					t.Errorf("the child does not ignore %v (SigIgn %016x)", sig, mask)
				}
			}
			for _, sig := range tt.notIgn {
				if mask&(1<<(sig-1)) != 0 {
					t.Errorf("the child ignores %v (SigIgn %016x)", sig, mask)
				}
			}
			s.noLocks(t, prefix)
		})
	}
}

// TestTimeoutSignal: at --timeout, the child's whole process group gets
// the signal that --timeout-signal names, however it is written, and w8y
// exits 124. The child and a second process of its group each trap that
// signal and record it; the default is SIGTERM.
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
			// Any other signal but the one trapped kills a shell before it
			// records anything. The child ($0) starts the other member of
			// its group ($1) and reports its start once that one traps
			// the signal too; it waits for it to record before it exits,
			// since w8y then stops what is left of the group.
			member := `trap 'redis-cli -p "$REDIS_PORT" rpush got "group ` + tt.trap + `" >/dev/null; exit 0' ` + tt.trap +
				`; redis-cli -p "$REDIS_PORT" rpush ready 1 >/dev/null; while :; do sleep 0.05; done`
			child := `sh -c "$1" & member=$!; trap 'redis-cli -p "$REDIS_PORT" rpush got "child ` + tt.trap + `" >/dev/null; wait $member; exit 0' ` + tt.trap +
				`; redis-cli -p "$REDIS_PORT" blpop ready 0 >/dev/null; redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null; while :; do sleep 0.05; done`
			// A timeout long enough for both to trap the signal first.
			args := []string{"-x", "3", "--kill-after", "1s", "--timeout", "1s"}
			if tt.flag != "" {
				args = append(args, "--timeout-signal", tt.flag)
			}
			p := s.start(append(args, "sh", "-c", child, "sh", member)...)
			if got := s.popStarted(t); got != "a" {
				t.Fatalf("started %q, want a", got)
			}
			want := []string{"child " + tt.trap, "group " + tt.trap}
			if got := s.popEach(t, "got", 2); !slices.Equal(got, want) {
				t.Errorf("the child's group got %q, want %q", got, want)
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
	poll.WaitFor(t, "w8y to say it drains", func() bool { return strings.Contains(p.stderrSoFar(), "draining") })
}

// TestDrainLetsChildrenFinish: with --drain-timeout, SIGTERM stops the
// taking of items, but the running children (two, with --parallel 2 and
// --continuous) get no signal: they keep their locks, refreshed, finish
// their work, and their runs are successes; w8y then exits 0.
func TestDrainLetsChildrenFinish(t *testing.T) {
	t.Parallel()
	s := setup(t, "drainok")
	s.items("a", "b", "c")
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
	t.Parallel()
	s := setup(t, "drainlate")
	s.items("a")
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
	t.Parallel()
	s := setup(t, "drainkill")
	s.items("a")
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
	t.Parallel()
	s := setup(t, "drain")
	s.items("a")
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
