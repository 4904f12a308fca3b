package proc

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// exited blocks until pid has exited, without reaping it.
func exited(t *testing.T, pid int) {
	t.Helper()
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatalf("waitid %d: %v", pid, err)
	}
}

// TestReaperSparesOwnChildren: a zombie that is w8y's own child is left for
// its Wait, however early the reaper runs, while an orphan's is reaped.
func TestReaperSparesOwnChildren(t *testing.T) {
	r := NewReaper(zerolog.Nop())
	own := exec.Command("sh", "-c", "exit 7")
	if err := r.start(own); err != nil {
		t.Fatal(err)
	}
	// Not started through the reaper: it stands for an orphan re-parented
	// to w8y.
	orphan := exec.Command("true")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited(t, own.Process.Pid)
	exited(t, orphan.Process.Pid)

	r.reap()
	if err := own.Wait(); own.ProcessState == nil || own.ProcessState.ExitCode() != 7 {
		t.Errorf("own child's Wait: %v, state %v; want exit status 7", err, own.ProcessState)
	}
	// An own zombie may hide the orphans behind it until it is waited for.
	r.waited(own.Process.Pid)
	r.reap()
	var status syscall.WaitStatus
	if _, err := syscall.Wait4(orphan.Process.Pid, &status, syscall.WNOHANG, nil); !errors.Is(err, syscall.ECHILD) {
		t.Errorf("the orphan was not reaped: wait4 gave %v", err)
	}
	if len(r.own) != 0 {
		t.Errorf("own children left registered: %v", r.own)
	}
}
