package jobctl

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/proctest"
)

// TestMain plays w8y's guard when a Spawner starts this test binary as one.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == proc.GuardArg {
		if err := proc.RunGuard(os.Args[2]); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeLease is a Pausable that records what job control asks of it.
type fakeLease struct {
	mu    sync.Mutex
	calls []string
	// lost, if set, is what Resume reports: the lock was lost meanwhile.
	lost error
}

func (f *fakeLease) note(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeLease) Pause() { f.note("pause") }

func (f *fakeLease) Resume(kill func()) error {
	f.note("resume")
	if f.lost != nil {
		kill()
	}
	return f.lost
}

func (f *fakeLease) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// noTerminal lends nothing, as a w8y without a terminal.
type noTerminal struct{}

func (noTerminal) Lend(*proc.Child) bool { return false }

// testMarker is unique to each test process, so that tests that run at
// once in other packages never find each other's children.
var testMarker = "W8Y_JOBCTL_TEST=" + strconv.Itoa(os.Getpid())

// startChild starts sh -c script through r as the worker does, with lease
// as what keeps its lock alive, and stops routing to it when the test ends.
// It returns once the script has set its traps: the script runs after sh
// has said so on stdout.
func startChild(t *testing.T, r *Router, script string, lease Pausable) *proc.Child {
	t.Helper()
	s := proc.NewSpawner(proc.Terminal{}, nil, testMarker, r.Heard)
	t.Cleanup(s.Close)
	child := proctest.StartReady(t, script, func(cmd *exec.Cmd) (*proc.Child, error) {
		return r.StartChild(func() (*proc.Child, error) { return s.Start(cmd, proc.NoDeadline) }, lease)
	})
	t.Cleanup(func() {
		r.ChildDone(child)
		child.Kill()
		child.Close()
	})
	return child
}

// waitStopped waits for child to report that it was stopped by sig.
func waitStopped(t *testing.T, child *proc.Child, sig syscall.Signal) {
	t.Helper()
	select {
	case got := <-child.Stopped():
		if got != sig {
			t.Fatalf("the child was stopped by %v, want %v", got, sig)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the child was not stopped by %v", sig)
	}
}

// waitExit waits for child to end and returns how it did.
func waitExit(t *testing.T, child *proc.Child) proc.Exit {
	t.Helper()
	select {
	case <-child.Done():
		return child.Exit()
	case <-time.After(10 * time.Second):
		t.Fatal("the child did not end")
		return proc.Exit{}
	}
}

func TestSignalRouter(t *testing.T) {
	r := New(zerolog.Nop())
	r.Handle(syscall.SIGUSR1, nil)
	select {
	case <-r.Stopped():
		t.Fatal("SIGUSR1 stopped w8y")
	default:
	}
	r.Handle(syscall.SIGTERM, nil)
	select {
	case <-r.Stopped():
	default:
		t.Fatal("SIGTERM did not stop w8y")
	}
	r.Handle(syscall.SIGINT, nil)
	if got := r.StopSignal(); got != syscall.SIGTERM {
		t.Errorf("stop signal %s, want the first one, SIGTERM", got)
	}
	started := false
	_, err := r.StartChild(func() (*proc.Child, error) {
		started = true
		return nil, nil
	}, nil)
	if !errors.Is(err, ErrStopped) || started {
		t.Errorf("a child was started after a stop signal (err %v)", err)
	}
	var stop StopError
	if !errors.As(r.StopErr(), &stop) || stop.Signal != syscall.SIGTERM {
		t.Errorf("StopErr = %v, want a StopError of SIGTERM", r.StopErr())
	}
}

// TestRouteForwardsToTheGroup: a signal that w8y receives reaches every
// running child's group, except the child that heard it from the terminal
// itself.
func TestRouteForwardsToTheGroup(t *testing.T) {
	r := New(zerolog.Nop())
	sigs := make(chan os.Signal, 1)
	done := make(chan struct{})
	finished := r.Route(sigs, noTerminal{}, done)
	defer func() { close(done); <-finished }()
	child := startChild(t, r, `trap 'exit 42' USR1; echo ready; while :; do sleep 0.05; done`, &fakeLease{})
	other := startChild(t, r, `trap 'exit 43' USR1; echo ready; while :; do sleep 0.05; done`, &fakeLease{})
	r.Heard(other, syscall.SIGUSR1) // other's group has it already: not sent again
	if exit := waitExit(t, child); exit.Code != 42 {
		t.Errorf("the child ended with %v, want the trap's 42", exit)
	}
	select {
	case <-other.Done():
		t.Errorf("a signal the child heard itself was sent to it again: %v", other.Exit())
	case <-time.After(300 * time.Millisecond):
	}
	sigs <- syscall.SIGUSR1
	if exit := waitExit(t, other); exit.Code != 43 {
		t.Errorf("a routed SIGUSR1 ended the child with %v, want the trap's 43", exit)
	}
}

// TestSecondStopKills: a second stop signal while a child runs kills its
// group, whatever the child does with the first.
func TestSecondStopKills(t *testing.T) {
	r := New(zerolog.Nop())
	child := startChild(t, r, `trap '' TERM; echo ready; while :; do sleep 0.05; done`, &fakeLease{})
	r.Handle(syscall.SIGTERM, nil)
	select {
	case <-child.Done():
		t.Fatalf("the first SIGTERM ended a child that ignores it: %v", child.Exit())
	case <-time.After(300 * time.Millisecond):
	}
	r.Handle(syscall.SIGTERM, nil)
	if exit := waitExit(t, child); exit.Signal != syscall.SIGKILL {
		t.Errorf("after a second stop the child ended with %v, want SIGKILL", exit)
	}
}

// fakeJob returns a Router without a terminal whose job control stops
// nothing: it records each stop instead of stopping the test process, and
// says that a shell could continue it.
func fakeJob() (*Router, *[]bool) {
	r := New(zerolog.Nop())
	r.term = noTerminal{}
	var stops []bool
	r.orphaned = func() bool { return false }
	r.stopJob = func(whole bool) { stops = append(stops, whole) }
	return r, &stops
}

// ctrlZ stops child as a Ctrl-Z at its terminal does, and tells r, as the
// reaper does when it sees the child stop.
func ctrlZ(t *testing.T, r *Router, child *proc.Child) {
	t.Helper()
	if err := child.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, child, syscall.SIGTSTP)
	r.ChildStopped(child, syscall.SIGTSTP)
}

// terminate sends SIGTERM to child and returns how it ended.
func terminate(t *testing.T, child *proc.Child) proc.Exit {
	t.Helper()
	if err := child.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return waitExit(t, child)
}

// stoppable is a child that a stop signal stops at once: one process, no
// loop. A shell loop forks, and dash forks with vfork: a SIGTSTP to the
// group that lands between the fork and the exec stops the new child
// before it execs, and the shell, waiting in vfork, never stops.
const stoppable = `echo ready; exec sleep 600`

// TestTerminalStopPausesTheLeases: a child's Ctrl-Z stops w8y's whole job,
// each child stopped and its lease paused first, and once w8y is continued
// each lease is resumed and its child continued.
func TestTerminalStopPausesTheLeases(t *testing.T) {
	r, stops := fakeJob()
	lease := &fakeLease{}
	child := startChild(t, r, stoppable, lease)
	ctrlZ(t, r, child)
	if got := *stops; !slices.Equal(got, []bool{true}) {
		t.Errorf("job stops %v, want one of the whole group", got)
	}
	if got := lease.called(); !slices.Equal(got, []string{"pause", "resume"}) {
		t.Errorf("lease calls %q, want pause, then resume", got)
	}
	select {
	case <-child.Done():
		t.Fatalf("a child whose lock is still ours was ended: %v", child.Exit())
	case <-time.After(200 * time.Millisecond):
	}
	// A stopped child would not end on SIGTERM: it was continued.
	if exit := terminate(t, child); exit.Signal != syscall.SIGTERM {
		t.Errorf("the continued child ended with %v, want SIGTERM", exit)
	}
}

// TestLockLostWhileStoppedKills: a child whose lock was lost while w8y was
// stopped is killed, not continued.
func TestLockLostWhileStoppedKills(t *testing.T) {
	r, _ := fakeJob()
	lease := &fakeLease{lost: errors.New("lock lost")}
	child := startChild(t, r, stoppable, lease)
	if !r.suspend(false, syscall.SIGTSTP) {
		t.Fatal("suspend stopped nothing")
	}
	if exit := waitExit(t, child); exit.Signal != syscall.SIGKILL {
		t.Errorf("the child ended with %v, want SIGKILL", exit)
	}
}

// TestNoShellNoStop: with no shell to continue w8y, a child's Ctrl-Z is
// discarded, as the kernel does for an orphaned job: nothing is paused and
// the child goes on.
func TestNoShellNoStop(t *testing.T) {
	r, stops := fakeJob()
	r.orphaned = func() bool { return true }
	lease := &fakeLease{}
	child := startChild(t, r, stoppable, lease)
	ctrlZ(t, r, child)
	if len(*stops) > 0 || len(lease.called()) > 0 {
		t.Errorf("an orphaned w8y stopped (%v) or paused leases (%q)", *stops, lease.called())
	}
	if exit := terminate(t, child); exit.Signal != syscall.SIGTERM {
		t.Errorf("the child ended with %v, want SIGTERM: it was not continued", exit)
	}
}

// TestOtherStopLeavesTheChild: a SIGSTOP from someone else is not job
// control: the child stays stopped and its lease goes on.
func TestOtherStopLeavesTheChild(t *testing.T) {
	r, stops := fakeJob()
	lease := &fakeLease{}
	child := startChild(t, r, stoppable, lease)
	r.ChildStopped(child, syscall.SIGSTOP)
	if len(*stops) > 0 || len(lease.called()) > 0 {
		t.Errorf("a SIGSTOP stopped w8y (%v) or paused leases (%q)", *stops, lease.called())
	}
}
