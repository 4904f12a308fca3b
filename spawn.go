package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotFound is returned when the executable does not exist.
	ErrNotFound = errors.New("executable not found")
	// ErrNotExecutable is returned when the executable exists but cannot be run.
	ErrNotExecutable = errors.New("executable cannot be run")
)

// placeholder is replaced by the item anywhere inside any argument.
const placeholder = "{}"

// Command is the child to run for each item.
type Command struct {
	// Path is the resolved executable.
	Path string
	// Args are the arguments after the executable, with placeholders.
	Args []string
	// EnvVar, if set, names a variable that is set to the item.
	EnvVar string
	// Environ is the environment the child starts from.
	Environ []string
	// NoStdin gives the child /dev/null as its stdin instead of w8y's: with
	// --parallel, children would otherwise split w8y's input between them
	// unpredictably, or be stopped for reading a terminal from the
	// background.
	NoStdin bool
}

// resolveCommand finds the executable as exec.LookPath does, so that a
// missing or unrunnable one is reported before any item is taken.
func resolveCommand(argv []string, envVar string, environ []string) (Command, error) {
	path, err := exec.LookPath(argv[0])
	switch {
	case err == nil:
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return Command{}, fmt.Errorf("%w: %q", ErrNotFound, argv[0])
	default:
		// It exists, but is a directory or lacks the run bit.
		var eerr *exec.Error
		if errors.As(err, &eerr) {
			err = eerr.Err
		}
		return Command{}, fmt.Errorf("%w: %q: %w", ErrNotExecutable, argv[0], err)
	}
	return Command{Path: path, Args: argv[1:], EnvVar: envVar, Environ: environ}, nil
}

// expandArgs replaces every placeholder in args with item.
func expandArgs(args []string, item string) []string {
	out := make([]string, len(args))
	for i, arg := range args {
		out[i] = strings.ReplaceAll(arg, placeholder, item)
	}
	return out
}

// build returns the exec.Cmd for item. Standard streams are inherited and
// never rewritten; stdin is /dev/null with NoStdin.
func (c Command) build(item, lockKey string) *exec.Cmd {
	cmd := exec.Command(c.Path, expandArgs(c.Args, item)...)
	env := append(c.Environ[:len(c.Environ):len(c.Environ)], "W8Y_ITEM="+item, "W8Y_LOCK_KEY="+lockKey)
	if c.EnvVar != "" {
		env = append(env, c.EnvVar+"="+item)
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if !c.NoStdin {
		cmd.Stdin = os.Stdin
	}
	return cmd
}

// ChildExit is how a child ended.
type ChildExit struct {
	// Code is the exit code, or 128+N for a child killed by signal N, as
	// shells report it.
	Code int
	// Signal is the signal that killed the child, or 0.
	Signal syscall.Signal
	// Duration is how long the child ran.
	Duration time.Duration
}

// String describes the exit for logs.
func (e ChildExit) String() string {
	if e.Signal != 0 {
		return "killed by " + unix.SignalName(e.Signal)
	}
	return fmt.Sprintf("exit code %d", e.Code)
}

// exitOf maps a finished process to a ChildExit.
func exitOf(state *os.ProcessState) ChildExit {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ChildExit{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}
	}
	return ChildExit{Code: state.ExitCode()}
}

// Child is a running child in a process group of its own.
type Child struct {
	PID     int
	Started time.Time

	done chan struct{}
	exit ChildExit
	// guard watches the child's process group.
	guard *guard
}

// spawner starts children: each in a process group of its own that the
// guard watches (see guard), in the terminal's foreground when w8y has it,
// registered with the reaper, and with the parent-death signal set.
type spawner struct {
	term   terminal
	reaper *reaper
	// token is the run's lock token, which the guard finds children by.
	token string

	// mu guards guard, which children that start at once (--parallel)
	// share.
	mu    sync.Mutex
	guard *guard
}

// watcher returns the running guard, starting one if there is none yet or
// the last one died.
func (s *spawner) watcher() (*guard, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guard == nil || !s.guard.usable() {
		g, err := startGuard(s.reaper, s.token)
		if err != nil {
			return nil, err
		}
		s.guard = g
	}
	return s.guard, nil
}

// start starts cmd and returns once it runs. One goroutine owns cmd.Wait.
func (s *spawner) start(cmd *exec.Cmd) (*Child, error) {
	g, err := s.watcher()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = s.term.sysProcAttr()
	cmd.Env = append(cmd.Env, holderVar+"="+s.token)
	c := &Child{done: make(chan struct{}), guard: g}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that started the
		// child exits, not when w8y does, and Go may end idle threads. A
		// goroutine locked to its thread keeps that thread, and so the
		// signal's trigger, alive until the child has been waited for.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// The clock starts before the fork: once Start returns, the child
		// may already have run to its end while this goroutine waited for
		// a CPU, and its duration would read as next to nothing.
		c.Started = time.Now()
		if err := s.reaper.start(cmd); err != nil {
			started <- err
			return
		}
		c.PID = cmd.Process.Pid
		g.watch(c.PID)
		started <- nil
		// Wait's only error besides an exit status is a failure to copy
		// streams, and the streams are inherited, so ProcessState is set.
		_ = cmd.Wait()
		s.reaper.waited(c.PID)
		c.exit = exitOf(cmd.ProcessState)
		c.exit.Duration = time.Since(c.Started)
		close(c.done)
	}()
	if err := <-started; err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrNotExecutable, err)
	}
	return c, nil
}

// forget tells the guard that c's process group has ended, once w8y has
// stopped whatever c left in it.
func (s *spawner) forget(c *Child) { c.guard.forget(c.PID) }

// close ends the guard, telling it that w8y exits normally.
func (s *spawner) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guard != nil && s.guard.usable() {
		s.guard.stop()
	}
}

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exit is how the child ended; valid once Done is closed.
func (c *Child) Exit() ChildExit { return c.exit }

// Signal sends sig to the child's whole process group.
func (c *Child) Signal(sig syscall.Signal) error {
	return signalGroup(c.PID, sig)
}

// Stop ends the child's process group: SIGTERM, then SIGKILL to whatever
// is left of the group after grace. It returns once the child has exited,
// with nothing of its group running past grace.
func (c *Child) Stop(grace time.Duration) ChildExit {
	deadline := time.Now().Add(grace)
	_ = c.Signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		_ = c.Signal(syscall.SIGKILL)
		<-c.done
	}
	c.endStragglers(deadline)
	return c.exit
}

// stragglerPoll is how often endStragglers checks whether a process group has
// emptied: short against any grace period, long enough to cost nothing.
const stragglerPoll = 10 * time.Millisecond

// endStragglers ends processes the child left behind in its process group
// after it exited, so that none runs on once the lock is released: SIGTERM,
// then SIGKILL at deadline. It reports whether there were any.
func (c *Child) endStragglers(deadline time.Time) bool {
	if !groupAlive(c.PID) {
		return false
	}
	_ = c.Signal(syscall.SIGTERM)
	for groupAlive(c.PID) {
		if time.Now().After(deadline) {
			_ = c.Signal(syscall.SIGKILL)
			break
		}
		time.Sleep(stragglerPoll)
	}
	return true
}
