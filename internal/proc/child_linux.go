package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotFound is returned when the executable does not exist.
	ErrNotFound = errors.New("executable not found")
	// ErrNotExecutable is returned when the executable exists but cannot be run.
	ErrNotExecutable = errors.New("executable cannot be run")
)

// Exit is how a process ended.
type Exit struct {
	// Code is the exit code, or 128+N for a process killed by signal N, as
	// shells report it.
	Code int
	// Signal is the signal that killed the process, or 0.
	Signal syscall.Signal
	// Duration is how long the process ran.
	Duration time.Duration
}

// String describes the exit for logs.
func (e Exit) String() string {
	if e.Signal != 0 {
		return "killed by " + unix.SignalName(e.Signal)
	}
	return fmt.Sprintf("exit code %d", e.Code)
}

// exitOf maps a finished process to an Exit.
func exitOf(state *os.ProcessState) Exit {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Exit{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}
	}
	return Exit{Code: state.ExitCode()}
}

// Spawner starts children: each in a process group of its own that the
// guard watches (see guard), in the terminal's foreground when w8y has it,
// registered with the reaper, and with the parent-death signal set.
type Spawner struct {
	term   Terminal
	reaper *Reaper
	// marker is the "NAME=value" environment entry that every child gets,
	// and that the guard finds the processes of this w8y by.
	marker string
	// heard is told of each signal that the terminal sent a child's group
	// while the child held it (see relay).
	heard func(*Child, syscall.Signal)

	// mu guards guard, which children that start at once (--parallel)
	// share.
	mu    sync.Mutex
	guard *guard
}

// NewSpawner returns a Spawner that lends children term (when w8y holds its
// foreground), registers them with reaper (nil: reap nothing) and marks each
// with the environment entry marker, "NAME=value", unique to this w8y.
// heard, if not nil, is told of each SIGINT or SIGQUIT that reaches the
// group of a child that holds the terminal and that w8y did not send: the
// terminal's Ctrl-C and Ctrl-\, which w8y in the background cannot hear.
func NewSpawner(term Terminal, reaper *Reaper, marker string, heard func(*Child, syscall.Signal)) *Spawner {
	return &Spawner{term: term, reaper: reaper, marker: marker, heard: heard}
}

// runningGuard returns the running guard, starting one if there is none yet
// or the last one died.
func (s *Spawner) runningGuard() (*guard, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guard == nil || !s.guard.running() {
		g, err := startGuard(s.reaper, s.marker)
		if err != nil {
			return nil, err
		}
		s.guard = g
	}
	return s.guard, nil
}

// Start starts cmd and returns once it runs, with its group watched by the
// guard from the start under deadline (see Deadline; NoDeadline for a child
// that runs under no lock). One goroutine owns cmd.Wait. A missing
// executable gives ErrNotFound, one that cannot be run ErrNotExecutable,
// each wrapping the cause.
func (s *Spawner) Start(cmd *exec.Cmd, deadline Deadline) (*Child, error) {
	g, err := s.runningGuard()
	if err != nil {
		return nil, err
	}
	c := &Child{done: make(chan struct{}), stopped: make(chan syscall.Signal, 1), guard: g, heldUntil: deadline.Until}
	attr, lent := s.term.sysProcAttr()
	if lent && s.heard != nil {
		// The relay makes the child's process group, and the child joins
		// it: w8y hears the terminal's keys from the moment the group
		// holds the terminal, which the child's start gives it. The guard
		// follows the group from the moment it exists.
		if r, err := startRelay(s.reaper, 0, func(sig syscall.Signal) { s.heard(c, sig) }); err == nil {
			c.relay, c.pgid, attr.Pgid = r, r.pid, r.pid
			c.gid = g.watch(c.pgid, deadline)
		}
	}
	cmd.SysProcAttr = attr
	cmd.Env = append(cmd.Env, s.marker)
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
		if c.pgid == 0 {
			c.pgid = c.PID
			c.gid = g.watch(c.pgid, deadline)
		}
		started <- nil
		watchStops(c.PID, c.stopped)
		// Wait's only error besides an exit status is a failure to copy
		// streams, which leaves ProcessState set all the same.
		_ = cmd.Wait()
		s.reaper.waited(c.PID)
		c.exit = exitOf(cmd.ProcessState)
		c.exit.Duration = time.Since(c.Started)
		close(c.done)
	}()
	if err := <-started; err != nil {
		if c.relay != nil {
			c.endRelay()
			_ = signalGroup(c.pgid, syscall.SIGKILL)
			g.forget(c.gid)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrNotExecutable, err)
	}
	return c, nil
}

// hear starts a relay in c's group unless it has one: w8y then hears the
// terminal's keys (see relay). A relay that cannot start leaves w8y deaf to
// them, and the child as it was.
func (s *Spawner) hear(c *Child) {
	if s.heard == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.relay != nil {
		return
	}
	r, err := startRelay(s.reaper, c.pgid, func(sig syscall.Signal) { s.heard(c, sig) })
	if err == nil {
		c.relay = r
	}
}

// Lend gives c's process group the terminal's foreground, as at its start,
// when the terminal is w8y's to lend and w8y holds it now: after w8y was
// stopped with its children and continued in the foreground (fg). It reports
// whether it did.
func (s *Spawner) Lend(c *Child) bool {
	if !s.term.Owned() {
		return false
	}
	s.hear(c)
	return s.term.give(c.pgid) == nil
}

// Reclaim takes the terminal back from c's group, which it was lent to,
// once c has exited; see Terminal.Reclaim.
func (s *Spawner) Reclaim(c *Child) error { return s.term.Reclaim(c.pgid) }

// watchStops passes on each stop of the child pid (SIGTSTP, SIGTTIN,
// SIGTTOU, SIGSTOP) to stopped, until it exits. It reaps nothing: cmd.Wait
// does, after. A stop not yet read when the next comes is enough for both.
func watchStops(pid int, stopped chan<- syscall.Signal) {
	for {
		var info childInfo
		err := unix.Waitid(unix.P_PID, pid, (*unix.Siginfo)(unsafe.Pointer(&info)), unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || info.code != cldStopped {
			return
		}
		// Taken without WNOWAIT, and without WEXITED, the stop is taken
		// off the queue, and an exit never is.
		_ = unix.Waitid(unix.P_PID, pid, (*unix.Siginfo)(unsafe.Pointer(&childInfo{})), unix.WSTOPPED|unix.WNOHANG, nil)
		select {
		case stopped <- syscall.Signal(info.status):
		default:
		}
	}
}

// cldStopped is the si_code of a child that a signal stopped.
const cldStopped = 5

// Close ends the guard, telling it that w8y exits normally.
func (s *Spawner) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guard != nil && s.guard.running() {
		s.guard.stop()
	}
}

// Child is a running child in a process group of its own.
type Child struct {
	PID     int
	Started time.Time
	// pgid is the child's process group: its own pid, or its relay's.
	pgid int

	done    chan struct{}
	exit    Exit
	stopped chan syscall.Signal
	// guard watches the child's process group, which it knows as gid.
	guard *guard
	gid   int

	// mu guards relay and heldUntil.
	mu sync.Mutex
	// relay is set while the child's group holds the terminal.
	relay *relay
	// heldUntil is until when the child's lock is held, as w8y last told the
	// guard; zero for a child without a deadline.
	heldUntil time.Time
}

// HoldUntil tells the guard that the child's lock is now held until until
// (see Deadline): w8y calls it after each refresh of the lock. It does
// nothing for a child started with NoDeadline.
func (c *Child) HoldUntil(until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heldUntil.IsZero() {
		return
	}
	c.heldUntil = until
	c.guard.hold(c.gid, until)
}

// GuardStop is the guard's account of a child whose deadline came with no
// newer word from w8y, which was stopped or stalled past the lease: the
// guard began to stop the child's group At; the lock was held until
// HeldUntil, as w8y last told the guard.
type GuardStop struct {
	At, HeldUntil time.Time
}

// StoppedByGuard reports whether the guard stopped the child's group
// because its deadline came (see Deadline), and when. Ask once the child
// has ended, or once the lease was found run out.
func (c *Child) StoppedByGuard() (GuardStop, bool) {
	at, ok := c.guard.stoppedAt(c.gid)
	if !ok {
		return GuardStop{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return GuardStop{At: at, HeldUntil: c.heldUntil}, true
}

// Suspend stops the child's process group (SIGSTOP) for job control. It
// tells the guard first: a stopped group cannot act on SIGTERM, so should
// the lease run out before Continue, the guard SIGKILLs the group at the
// last moment (its deadline's Until less Margin, plus Grace) instead.
func (c *Child) Suspend() {
	c.guard.signalled(c.gid)
	_ = c.Signal(syscall.SIGSTOP)
}

// Continue continues the child's process group after Suspend (SIGCONT),
// once its lock is known to be still its own, and tells the guard that it
// runs again.
func (c *Child) Continue() {
	c.guard.continued(c.gid)
	_ = c.Signal(syscall.SIGCONT)
}

// Done is closed when the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Stopped delivers the signal that stopped the child, each time it is
// stopped (see watchStops).
func (c *Child) Stopped() <-chan syscall.Signal { return c.stopped }

// Exit is how the child ended; valid once Done is closed.
func (c *Child) Exit() Exit { return c.exit }

// Signal sends sig to the child's whole process group.
func (c *Child) Signal(sig syscall.Signal) error {
	c.mu.Lock()
	if c.relay != nil {
		c.relay.sent(sig)
	}
	c.mu.Unlock()
	return signalGroup(c.pgid, sig)
}

// endRelay ends the relay in the child's group, if any, once everything it
// heard has been passed on. Call it once the child has exited: the relay
// would otherwise count as a process left in the group.
func (c *Child) endRelay() {
	c.mu.Lock()
	r := c.relay
	c.relay = nil
	c.mu.Unlock()
	if r != nil {
		r.end()
	}
}

// Stop ends the child's process group: SIGTERM (and SIGCONT, see
// terminate), then SIGKILL to whatever is left of the group after grace. It returns once the child has exited,
// with nothing of its group running past grace.
func (c *Child) Stop(grace time.Duration) Exit {
	return c.StopWith(syscall.SIGTERM, grace)
}

// StopWith is Stop with sig in place of SIGTERM, as timeout -s sends: the
// signal the child's group gets first, followed by SIGCONT and, after
// grace, SIGKILL.
func (c *Child) StopWith(sig syscall.Signal, grace time.Duration) Exit {
	deadline := time.Now().Add(grace)
	// The guard's SIGTERM would be a second one; its SIGKILL stays due,
	// should w8y be stopped before its own.
	c.guard.signalled(c.gid)
	_ = c.Signal(sig)
	_ = c.Signal(syscall.SIGCONT)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		_ = c.Signal(syscall.SIGKILL)
		<-c.done
	}
	c.EndStragglers(deadline)
	return c.exit
}

// Kill SIGKILLs the child's process group at once, stopped or not, and
// returns once the child has exited and nothing of its group is left.
func (c *Child) Kill() Exit {
	_ = c.Signal(syscall.SIGKILL)
	<-c.done
	c.EndStragglers(time.Now())
	return c.exit
}

// stragglerPoll is how often EndStragglers checks whether a process group
// has emptied: short against any grace period, long enough to cost nothing.
// The kernel gives no notice when the last member of a group that is not
// our child exits, so this is a poll.
const stragglerPoll = 10 * time.Millisecond

// EndStragglers ends processes the child left behind in its process group
// after it exited, so that none runs on once the lock is released: SIGTERM,
// then SIGKILL at deadline. It returns once the group is empty, and reports
// whether there were any.
//
// SIGKILL is certain but not instant: a process runs until the kernel next
// schedules it, so the group is watched until it is gone, not trusted to be
// gone once signalled. SIGKILL is sent again at every look, for a process
// that a straggler forked as the first SIGKILL landed.
func (c *Child) EndStragglers(deadline time.Time) bool {
	c.endRelay()
	if !groupAlive(c.pgid) {
		return false
	}
	c.terminate()
	for groupAlive(c.pgid) {
		if time.Now().After(deadline) {
			_ = c.Signal(syscall.SIGKILL)
		}
		time.Sleep(stragglerPoll)
	}
	return true
}

// terminate sends SIGTERM to the child's group, then SIGCONT: a group that
// job control stopped could not act on SIGTERM until continued, as
// timeout(1) and the shells' kill know.
func (c *Child) terminate() {
	_ = c.Signal(syscall.SIGTERM)
	_ = c.Signal(syscall.SIGCONT)
}

// Close tells the guard that the child's process group has ended. Call it
// once Stop or EndStragglers has emptied the group.
func (c *Child) Close() { c.guard.forget(c.gid) }
