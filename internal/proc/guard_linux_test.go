package proc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
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
	g.watch(inGroup.Process.Pid)
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
	g.watch(kept.Process.Pid)
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
