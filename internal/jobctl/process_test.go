package jobctl

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/proc"
)

// TestStartRoutesTheProcessSignals: a started Process runs children, and a
// stop signal sent to w8y's process reaches its router, which stops
// taking items instead of w8y dying; Close then returns.
func TestStartRoutesTheProcessSignals(t *testing.T) {
	if proc.IgnoredNow().Has(syscall.SIGTERM) {
		t.Skip("SIGTERM is ignored in this test process, as its parent asked")
	}
	p, err := Start(context.Background(), Setup{Marker: testMarker}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-closed:
		default:
			p.Close()
		}
	})
	cmd := exec.Command("sh", "-c", "exit 3")
	child, err := p.Router.StartChild(func() (*proc.Child, error) { return p.Spawner.Start(cmd, proc.NoDeadline) }, &fakeLease{})
	if err != nil {
		t.Fatal(err)
	}
	if exit := waitExit(t, child); exit.Code != 3 {
		t.Errorf("the child exited with %s, want code 3", exit)
	}
	p.Router.ChildDone(child)
	child.Close()

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Router.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not reach the router")
	}
	if got := p.Router.StopSignal(); got != syscall.SIGTERM {
		t.Errorf("stop signal %s, want SIGTERM", got)
	}
	go func() {
		p.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}
