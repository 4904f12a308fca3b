package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// guardArg, as w8y's first argument, makes the process a guard (see
// runGuard). It is not an option: users never type it.
const guardArg = "--w8y-guard"

// guardQuit is what w8y writes to its guard when it exits normally.
const guardQuit = 'q'

// A guard is a small process (w8y itself, started with guardArg) that leads
// the process group every child of this w8y joins, and SIGKILLs that group
// the moment w8y dies without saying goodbye (SIGKILL, the OOM killer).
//
// The parent-death signal alone cannot do this: it reaches only the direct
// child, and grandchildren would run on without a lock once it expired. No
// signal reaches a process group when a process dies, but a pipe does reach
// a process: the guard reads from a pipe that only w8y can write, and reads
// end-of-file when the kernel closes w8y's end as w8y dies, however it dies.
// Because the guard leads the group before any child exists, there is no
// moment in which a child's group is not covered. One guard serves every
// child a w8y runs, so it costs one process start per w8y, not per item.
type guard struct {
	pid  int
	pipe *os.File
	done chan struct{}
	// doomed is set once w8y has SIGKILLed the group, which kills the guard
	// too: no child may join its group after that.
	doomed atomic.Bool
}

// startGuard starts a guard in a new process group.
func startGuard(reap *reaper) (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the guard's pipe: %w", err)
	}
	defer r.Close()
	cmd := &exec.Cmd{
		// Not os.Executable: /proc/self/exe still runs after the binary
		// was replaced or deleted by an upgrade.
		Path:       "/proc/self/exe",
		Args:       []string{"w8y-guard", guardArg},
		ExtraFiles: []*os.File{r},
		// Its own group, which children join, and never the terminal's
		// foreground: it reads nothing there.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := reap.start(cmd); err != nil {
		w.Close()
		return nil, fmt.Errorf("start w8y's guard: %w", err)
	}
	g := &guard{pid: cmd.Process.Pid, pipe: w, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		reap.waited(g.pid)
		close(g.done)
	}()
	return g, nil
}

// usable reports whether a child may join the guard's group now.
func (g *guard) usable() bool {
	select {
	case <-g.done:
		return false
	default:
		return !g.doomed.Load()
	}
}

// stop tells the guard that w8y is exiting normally, then waits for it.
// Nothing of the group is killed: w8y has already ended its children.
func (g *guard) stop() {
	_, _ = g.pipe.Write([]byte{guardQuit})
	g.pipe.Close()
	<-g.done
}

// runGuard is the guard's side (see guard): it ignores the signals w8y
// forwards to its children's group, waits on the pipe from w8y (fd 3), and
// SIGKILLs its whole process group if the pipe ends without w8y's goodbye.
func runGuard() int {
	signal.Ignore(forwardedSignals...)
	pipe := os.NewFile(3, "w8y-guard-pipe")
	var b [1]byte
	if n, _ := pipe.Read(b[:]); n == 1 && b[0] == guardQuit {
		return exitOK
	}
	// End-of-file, or anything but the goodbye: w8y is gone.
	_ = syscall.Kill(0, syscall.SIGKILL)
	return exitFailure
}
