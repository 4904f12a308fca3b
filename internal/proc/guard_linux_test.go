package proc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/proctest"
)

// TestMain lets this test binary serve as its own guard and relay, as w8y
// does when the Spawner re-executes it with GuardArg or RelayArg.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == GuardArg {
		if err := RunGuard(os.Args[2]); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) == 2 && os.Args[1] == RelayArg {
		if err := RunRelay(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestGuardKillsWhatAnOrphanLeft: when the pipe ends without the goodbye,
// as when w8y is SIGKILLed, the guard kills the groups it was told of and
// every process that carries the marker, in its group or not.
func TestGuardKillsWhatAnOrphanLeft(t *testing.T) {
	marker := testMarker + "-orphan"
	g, err := startGuard(nil, marker)
	if err != nil {
		t.Fatal(err)
	}
	inGroup := sleeper(t, "")
	// Outside any group the guard knows, found by its marker alone, as a
	// grandchild that called setsid would be.
	strayed := sleeper(t, marker)
	g.watch(inGroup.Process.Pid, NoDeadline)
	// w8y dies: its end of the pipe closes without "q".
	g.pipe.Close()
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the guard did not leave after its pipe closed")
	}
	for name, cmd := range map[string]*exec.Cmd{"in the watched group": inGroup, "with the marker": strayed} {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
			if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGKILL {
				t.Errorf("the process %s ended with %v, want SIGKILL", name, cmd.ProcessState)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the process %s was not killed", name)
		}
	}
}

// TestGuardLeavesAfterTheGoodbye: after the goodbye, the guard kills
// nothing, however the pipe ends.
func TestGuardLeavesAfterTheGoodbye(t *testing.T) {
	marker := testMarker + "-goodbye"
	g, err := startGuard(nil, marker)
	if err != nil {
		t.Fatal(err)
	}
	kept := sleeper(t, marker)
	g.watch(kept.Process.Pid, NoDeadline)
	g.stop()
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the guard did not leave after the goodbye")
	}
	if err := kept.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the guard killed a process after the goodbye: %v", err)
	}
}

// sleeper starts a sleep in a process group of its own, with marker as its
// whole environment unless it is "", and kills it when the test ends.
func sleeper(t *testing.T, marker string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if marker != "" {
		cmd.Env = []string{marker}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

// testSpawner returns a Spawner, with a guard of its own, that is closed
// when the test ends.
func testSpawner(t *testing.T) *Spawner {
	s := NewSpawner(Terminal{}, nil, testMarker, nil)
	t.Cleanup(s.Close)
	return s
}

// spawnUnder starts sh -c script through s under deadline, and returns once
// the script has said it is ready (on stdout): its traps are set.
func spawnUnder(t *testing.T, s *Spawner, script string, deadline Deadline) *Child {
	t.Helper()
	c := proctest.StartReady(t, script, func(cmd *exec.Cmd) (*Child, error) { return s.Start(cmd, deadline) })
	t.Cleanup(func() {
		c.Kill()
		c.Close()
	})
	return c
}

// endedBy waits for c to end and returns the signal that ended it.
func endedBy(t *testing.T, c *Child) syscall.Signal {
	t.Helper()
	select {
	case <-c.Done():
		return c.Exit().Signal
	case <-time.After(10 * time.Second):
		t.Fatal("the guard did not stop the child")
		return 0
	}
}

// TestGuardStopsAChildPastItsDeadline: once the deadline that w8y last gave
// comes, less the margin, the guard stops the child's group itself, as w8y
// would have, had it not been stopped: SIGTERM, then SIGKILL after the grace
// for a group that ignores SIGTERM. It reports the stop, which the child's
// owner reads: when the guard began, and until when the lock was held.
func TestGuardStopsAChildPastItsDeadline(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script string
		want   syscall.Signal
	}{
		{"it ends on SIGTERM", "echo ready; exec sleep 30", syscall.SIGTERM},
		{"it ignores SIGTERM", `trap "" TERM; echo ready; sleep 30 & wait`, syscall.SIGKILL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			d := Deadline{Until: start.Add(1500 * time.Millisecond), Margin: time.Second, Grace: 300 * time.Millisecond}
			c := spawnUnder(t, testSpawner(t), tt.script, d)
			if got := endedBy(t, c); got != tt.want {
				t.Errorf("the child ended by %v, want %v", got, tt.want)
			}
			stop, ok := c.StoppedByGuard()
			if !ok {
				t.Fatal("the guard's stop was not reported")
			}
			// Never early; the test's clock and the guard's are the host's.
			if due := d.Until.Add(-d.Margin); stop.At.Before(due.Add(-50 * time.Millisecond)) {
				t.Errorf("the guard began at %s, before the deadline less the margin, %s", stop.At, due)
			}
			if !stop.HeldUntil.Equal(d.Until) {
				t.Errorf("held until %s, want %s", stop.HeldUntil, d.Until)
			}
		})
	}
}

// TestGuardFollowsHoldUntil: a newer word of w8y's moves the deadline: the
// guard stops the child at the new one, not the first.
func TestGuardFollowsHoldUntil(t *testing.T) {
	start := time.Now()
	d := Deadline{Until: start.Add(2 * time.Second), Margin: time.Second, Grace: 300 * time.Millisecond}
	c := spawnUnder(t, testSpawner(t), "echo ready; exec sleep 30", d)
	later := d.Until.Add(500 * time.Millisecond)
	c.HoldUntil(later)
	if got := endedBy(t, c); got != syscall.SIGTERM {
		t.Errorf("the child ended by %v, want SIGTERM", got)
	}
	stop, ok := c.StoppedByGuard()
	if !ok {
		t.Fatal("the guard's stop was not reported")
	}
	if due := later.Add(-d.Margin); stop.At.Before(due.Add(-50 * time.Millisecond)) {
		t.Errorf("the guard began at %s, before the newer deadline less the margin, %s", stop.At, due)
	}
	if !stop.HeldUntil.Equal(later) {
		t.Errorf("held until %s, want %s", stop.HeldUntil, later)
	}
}

// TestGuardKillsASuspendedChildAtTheLastMoment: a child that job control
// stopped (Suspend) cannot act on SIGTERM: the guard sends none, and
// SIGKILLs the group at the last moment, the deadline less the margin plus
// the grace.
func TestGuardKillsASuspendedChildAtTheLastMoment(t *testing.T) {
	d := Deadline{Until: time.Now().Add(1500 * time.Millisecond), Margin: time.Second, Grace: 500 * time.Millisecond}
	c := spawnUnder(t, testSpawner(t), "echo ready; exec sleep 30", d)
	c.Suspend()
	if got := endedBy(t, c); got != syscall.SIGKILL {
		t.Errorf("the child ended by %v, want SIGKILL", got)
	}
	stop, ok := c.StoppedByGuard()
	if !ok {
		t.Fatal("the guard's stop was not reported")
	}
	if last := d.Until.Add(-d.Margin + d.Grace); stop.At.Before(last.Add(-50 * time.Millisecond)) {
		t.Errorf("the guard killed at %s, before the last moment, %s", stop.At, last)
	}
}

// TestGuardSparesAChildThatEnded: a child that ended before its deadline,
// its group gone, is not reported stopped, though w8y never said that it
// ended.
func TestGuardSparesAChildThatEnded(t *testing.T) {
	d := Deadline{Until: time.Now().Add(time.Hour), Margin: time.Second, Grace: 100 * time.Millisecond}
	s := testSpawner(t)
	c := spawnUnder(t, s, "echo ready", d)
	if got := endedBy(t, c); got != 0 {
		t.Errorf("the child ended by %v, want its own exit", got)
	}
	// Its deadline comes now. A child started after that word by the same
	// guard, its deadline past, is stopped at once: by the time it is, the
	// guard has been through the first one's.
	c.HoldUntil(time.Now())
	late := spawnUnder(t, s, "echo ready; exec sleep 30", Deadline{Until: time.Now(), Margin: time.Second, Grace: 100 * time.Millisecond})
	endedBy(t, late)
	if _, ok := late.StoppedByGuard(); !ok {
		t.Error("the late child's stop was not reported")
	}
	if stop, ok := c.StoppedByGuard(); ok {
		t.Errorf("a child that ended by itself was reported stopped by the guard at %s", stop.At)
	}
}
