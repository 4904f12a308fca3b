package jobctl

import (
	"syscall"

	"github.com/w8y/w8y/internal/proc"
	"golang.org/x/sys/unix"
)

// Job control. A shell's Ctrl-Z stops the job in the terminal's foreground
// and gives the shell the terminal back; fg continues the job in the
// foreground, bg in the background. w8y's job is w8y, but its children run
// in process groups of their own, which the terminal does not know belong to
// it, so w8y stops and continues them with itself, as sudo and the shells
// do for the commands they run:
//
//   - When a child that holds the terminal is stopped by it (Ctrl-Z), or a
//     child in the background is stopped for reading it, w8y stops its
//     process group too, so that the shell sees its job stopped.
//   - When w8y itself gets SIGTSTP (Ctrl-Z while w8y holds the terminal:
//     between items, or with --parallel), it stops every child first.
//
// A stopped w8y refreshes no lock, so a lock may expire while the job is
// stopped, and another worker take the item. So every child is stopped
// before w8y stops, and continued only once its lock is known to be still
// its own (see Pausable.Resume): a child whose lock was lost meanwhile is
// killed while still stopped, and its run ends as on a lost lock (122).
//
// A stopped child runs nothing, but it still holds what it had open (a file
// lock, a half-written file, a transaction), and the next holder of its item
// may meet it there. So the guard's deadline holds through a terminal stop
// too (see proc.Deadline): should the lease run out before fg or bg, the
// guard SIGKILLs the stopped group at the last moment before the lock could
// expire, as w8y itself would kill it at fg, and the run ends as on a lost
// lock once w8y is continued. The guard is told that the group is stopped
// (proc.Child.Suspend), so that it sends no SIGTERM that the group could not
// act on without a SIGCONT, and waits until the lease's last moment (its
// end less half the stop margin: at most a quarter of a second): a person
// at the terminal loses the child to a stop that outlasts the lease, as
// before, and not to a shorter one.

// ChildStopped handles the stop of child by sig, which the child's owner
// read from child.Stopped().
func (r *Router) ChildStopped(child *proc.Child, sig syscall.Signal) {
	if !proc.IsTerminalStop(sig) {
		// SIGSTOP from someone: the child stays stopped under its lock,
		// which w8y keeps alive, until they continue it.
		r.log.Debug().Int("pid", child.PID).Str("signal", unix.SignalName(sig)).Msg("the child was stopped")
		return
	}
	// A child stopped for using the terminal from the background, while w8y
	// holds it: w8y was continued in the foreground after the child
	// started. The child gets the terminal and goes on, as sudo does.
	if sig != syscall.SIGTSTP && r.term.Lend(child) {
		_ = child.Signal(syscall.SIGCONT)
		return
	}
	if r.suspend(true, sig) {
		return
	}
	// No shell could continue w8y (see proc.Orphaned), which is why the
	// kernel discards the terminal's stop key for such a job: do the same
	// for the child's Ctrl-Z.
	if sig == syscall.SIGTSTP {
		_ = child.Signal(syscall.SIGCONT)
		return
	}
	r.log.Warn().Int("pid", child.PID).Str("signal", unix.SignalName(sig)).
		Msg("the child was stopped for using the terminal from the background, and no shell can continue w8y; it stays stopped under its lock until it gets SIGCONT")
}

// suspend stops w8y with its children, as a terminal stops a job, because
// of sig: w8y's whole process group when whole (see proc.StopJob). Once w8y
// is continued, it continues each child whose lock is still its own, in the
// terminal's foreground if w8y is there, and kills the others. It reports
// false, and stops nothing, when no shell could continue w8y.
func (r *Router) suspend(whole bool, sig syscall.Signal) bool {
	if r.orphaned() {
		r.log.Debug().Str("signal", unix.SignalName(sig)).Msg("not stopping: no shell could continue w8y")
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.Info().Str("signal", unix.SignalName(sig)).Int("children", len(r.children)).
		Msg("stopping with the children: their locks are not refreshed until w8y is continued")
	for child, lease := range r.children {
		child.Suspend()
		lease.Pause()
	}
	r.stopJob(whole)
	r.log.Info().Msg("continued")
	for child, lease := range r.children {
		err := lease.Resume(func() { _ = child.Signal(syscall.SIGKILL) })
		if err != nil {
			// The lease reports the loss, and the child's run ends on it.
			continue
		}
		r.term.Lend(child)
		child.Continue()
	}
	return true
}
