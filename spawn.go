package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/keepoutput"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/schema"
)

// childRunner runs an item's child while keeping its lock alive, and stops
// the child's process group when the lock is lost or --timeout passes.
type childRunner struct {
	command childcmd.Command
	spawn   *proc.Spawner
	stops   *jobctl.Router
	// exitCodes are the codes that count as success (--exit-codes).
	exitCodes []int
	// killAfter is --kill-after; timeout is --timeout, 0 for none.
	killAfter, timeout time.Duration
	// timeoutSignal is --timeout-signal: what the child's group gets first
	// when --timeout passes.
	timeoutSignal syscall.Signal
	// keepOutput is how many of the last bytes of the child's stdout and
	// stderr to keep, 0 to leave them untouched, and keepSuccess whether a
	// success keeps them too (see keptOutput).
	keepOutput  int
	keepSuccess bool
	metrics     observer
	// health is nil unless --metrics-addr is given.
	health *health.Heartbeat
	log    zerolog.Logger
}

// run runs the child for item, whose lock is ours, and says how the run
// ended.
func (c *childRunner) run(ctx context.Context, item string, lock *Lock) finish.End {
	exit, stopped, kept, err := c.runChild(ctx, item, lock)
	end := newRunEnd(item, exit, err, stopped, c.exitCodes)
	if end.Result != schema.ResultSuccess || c.keepSuccess {
		end.Output = kept
	}
	return end
}

// outputGrace is how long w8y waits, once the child's group has ended, for
// the pipes of --keep-output to empty and close: long enough to drain what
// the group wrote last, short enough that a process that left the group
// with the pipe open (a daemon) holds the run up little. Its later writes
// fail (EPIPE).
const outputGrace = time.Second

// runChild runs the child for item while keeping its lock alive. If the
// lock is lost, the child's group is stopped before the lease could run out,
// and the error wraps lease.ErrLost; if --timeout passes first, the group is
// stopped and the error wraps ErrTimeout; if a refresh finds a cancel
// request aimed at the lock, the group is stopped the same way and the
// error is a *cancelledError. stopped reports whether a stop
// signal had reached w8y by the time the child ended. With --keep-output,
// kept is the end of the child's output.
func (c *childRunner) runChild(ctx context.Context, item string, lock *Lock) (exit proc.Exit, stopped bool, kept *finish.Output, err error) {
	log := c.log.With().Str("item", clip.Item(item)).Str("lock_key", clip.Item(lock.Key)).Logger()
	grace := killGrace(c.killAfter, lock.TTL)
	// The lease starts with the child, so that job control finds every
	// child with its lease (see jobctl.Router.StartChild).
	lease := lock.keepAlive(ctx, grace+stopMargin(lock.TTL), log)
	defer lease.Stop()
	child, capture, err := c.start(c.command.Build(item, lock.Key, lock.Fence), lease, guardDeadline(lease.Until(), grace, lock.TTL))
	if err != nil {
		return proc.Exit{}, c.stops.Stopping(), nil, err
	}
	// From here on, each refresh tells the guard until when the lock is held.
	lease.Hold(child)
	defer c.stops.ChildDone(child)
	defer child.Close()
	c.metrics.ChildStarted()
	defer c.metrics.ChildEnded()
	log.Info().Int("pid", child.PID).Str("holder", lock.Token).Msg("item started")

	// Waiting for the child is progress too, as far as /healthz goes: each
	// running child beats, so the worker stays healthy while any runs.
	stopBeating := c.health.BeatEvery(health.ChildBeat)
	limit, limitName := c.timeoutOf(lock)
	failed := c.wait(child, lease, grace, limit, limitName, log)
	if capture != nil {
		// While the lease still holds the lock.
		stdout, stderr := capture.Finish(time.Now().Add(outputGrace))
		kept = &finish.Output{Stdout: stdout, Stderr: stderr}
	}
	stopped = c.stops.Stopping()
	stopBeating()
	lease.Stop()
	if err := c.spawn.Reclaim(child); err != nil {
		log.Warn().Err(err).Msg("could not take the terminal back from the child")
	}
	exit = child.Exit()
	logEnd(log, child.PID, exit, classify(exit, failed, stopped, c.exitCodes), failed)
	return exit, stopped, kept, failed
}

// timeoutOf is how long lock's child may run, 0 for ever, and what set
// it: its item's own timeout, or --timeout.
func (c *childRunner) timeoutOf(lock *Lock) (time.Duration, string) {
	if lock.Run != nil && lock.Run.Timeout != c.timeout {
		return lock.Run.Timeout, "the item's own timeout, see w8yctl status"
	}
	return c.timeout, "--timeout"
}

// start starts cmd through the signal router, with lease as what keeps its
// lock alive and deadline as what the guard enforces on it, and with
// --keep-output captures its output (capture is nil without it).
func (c *childRunner) start(cmd *exec.Cmd, lease *lease.Lease, deadline proc.Deadline) (child *proc.Child, capture *keepoutput.Capture, err error) {
	if c.keepOutput > 0 {
		capture, err = keepoutput.Start(cmd.Stdout, cmd.Stderr, c.keepOutput)
		if err != nil {
			return nil, nil, err
		}
		cmd.Stdout, cmd.Stderr = capture.Stdout, capture.Stderr
	}
	child, err = c.stops.StartChild(func() (*proc.Child, error) { return c.spawn.Start(cmd, deadline) }, lease)
	if capture != nil {
		capture.Started()
		if err != nil {
			capture.Finish(time.Now())
		}
	}
	return child, capture, err
}

// wait waits for child to end, or stops it on a lost lock, a cancel
// request or --timeout, giving it grace between SIGTERM and SIGKILL, and
// returns why it was stopped (nil when it ended by itself). Job control's
// stops of the child go to the signal router meanwhile.
func (c *childRunner) wait(child *proc.Child, lease *lease.Lease, grace, limit time.Duration, limitName string, log zerolog.Logger) error {
	var timeout <-chan time.Time
	if limit > 0 {
		timer := time.NewTimer(limit)
		defer timer.Stop()
		timeout = timer.C
	}
	for {
		var failed error
		// A lost lock or a cancel request stops the group with SIGTERM;
		// --timeout with the signal that --timeout-signal chose.
		stopWith := syscall.SIGTERM
		select {
		case <-child.Done():
			// EndStragglers also passes on what the terminal sent the
			// child's group before it exited (see proc.Spawner), so that
			// the caller's stopped knows of a Ctrl-C that ended the child.
			if child.EndStragglers(time.Now().Add(grace)) {
				// While w8y drains after a stop signal, which its group had
				// too, a process still on its way out is no news.
				event := log.Warn()
				if c.stops.Stopping() {
					event = log.Info()
				}
				event.Int("pid", child.PID).Msg("the child left processes in its group; they were stopped")
			}
			// A child that the guard stopped, its lease run out while w8y
			// was stopped, lost its lock; so did one found lost as it
			// ended (killed for it, after w8y was stopped with it: see
			// jobctl).
			if failed = stoppedByGuard(child, log); failed != nil {
				return failed
			}
			select {
			case failed = <-lease.Lost():
				log.Error().Err(failed).Int("pid", child.PID).Msg("lock lost: the child was stopped")
			default:
			}
			return failed
		case sig := <-child.Stopped():
			c.stops.ChildStopped(child, sig)
			continue
		case failed = <-lease.Lost():
			// The lease may have run out while w8y was stopped, and the
			// guard have stopped the child already: that is the story.
			if guarded := stoppedByGuard(child, log); guarded != nil {
				failed = guarded
			} else {
				log.Error().Err(failed).Int("pid", child.PID).Msg("lock lost: stopping the child")
			}
		case req := <-lease.Cancelled():
			failed = &cancelledError{req: req}
			// As for a timeout, the lease goes on while the child stops,
			// and finish.lua then deletes the request with the lock.
			log.Warn().Str("reason", req.Reason).Str("by", req.By).Int("pid", child.PID).Msg("cancelled: stopping the child")
		case <-timeout:
			failed = fmt.Errorf("%w after %s (%s); it was stopped", ErrTimeout, limit, limitName)
			stopWith = c.timeoutSignal
			// The lease goes on while the child stops: the lock is still
			// ours, and the grace fits in the lease (see killGrace), so a
			// lock lost meanwhile needs no faster kill.
			log.Error().Int("pid", child.PID).Msg("timed out: stopping the child")
		}
		child.StopWith(stopWith, grace)
		return failed
	}
}

// logEnd logs how the child pid's run ended. A failed run is a warning, so
// that --log-level warn still shows it; a success is news, and so is a run
// interrupted by a stop signal: a rollout's every drain is one.
func logEnd(log zerolog.Logger, pid int, exit proc.Exit, result schema.Result, failed error) {
	event := log.Info()
	if result != schema.ResultSuccess && result != schema.ResultInterrupted {
		event = log.Warn().AnErr("cause", failed)
	}
	event.Int("pid", pid).Int("exit_code", exit.Code).Str("status", exit.String()).Str("result", string(result)).
		Float64("duration_s", exit.Duration.Seconds()).Msg("item finished")
}

// killGrace is the time a child gets between SIGTERM and SIGKILL when w8y
// stops it: --kill-after, but at most a third of the lock's TTL, so that a
// child whose lock is being lost is gone before the lease ends.
func killGrace(killAfter, ttl time.Duration) time.Duration {
	return min(killAfter, ttl/3)
}

// stopMargin is kept free at the end of a lease on top of the kill grace, for
// the SIGKILL to land and the process to be gone: a tenth of the TTL, at
// most half a second.
func stopMargin(ttl time.Duration) time.Duration {
	return min(ttl/10, 500*time.Millisecond)
}

// guardDeadline is the deadline that the guard enforces on a child whose
// lock is held until until (see proc.Deadline): SIGTERM to its group when
// the lease has grace and half the stop margin left, SIGKILL grace later.
// That is half a stop margin after the lease itself gives up (see
// lease.Keep's giveUp): a w8y that runs stops the child first, and the guard
// acts only for one that could not; and it leaves the other half for the
// SIGKILL to land before the lock could expire.
func guardDeadline(until time.Time, grace, ttl time.Duration) proc.Deadline {
	return proc.Deadline{Until: until, Margin: grace + stopMargin(ttl)/2, Grace: grace}
}

// stoppedByGuard returns the loss of child's lock, and logs it, if the guard
// stopped the child because its lease ran out with no refresh from w8y
// (proc.Child.StoppedByGuard): w8y was stopped (SIGSTOP, a debugger, a
// freezer, Ctrl-Z), or stalled, past the lease. It returns nil otherwise.
func stoppedByGuard(child *proc.Child, log zerolog.Logger) error {
	stop, ok := child.StoppedByGuard()
	if !ok {
		return nil
	}
	err := fmt.Errorf("%w: w8y was stopped or stalled past its lease, and its guard acted %s before the lock could expire",
		lease.ErrLost, stop.HeldUntil.Sub(stop.At).Round(time.Millisecond))
	log.Error().Err(err).Int("pid", child.PID).Time("guard_stopped_at", stop.At).Time("held_until", stop.HeldUntil).
		Msg("lock lost while w8y was stopped or stalled: its guard stopped the child")
	return err
}

// newRunEnd describes the end of item's run from what childRunner.run saw:
// the child's exit (zero when it never started), err, whether w8y had a stop
// signal before the child ended, and exitCodes, the codes that count as
// success (--exit-codes).
func newRunEnd(item string, exit proc.Exit, err error, stopped bool, exitCodes []int) finish.End {
	end := finish.End{Item: item, Result: classify(exit, err, stopped, exitCodes), Exit: exit, Err: err, At: time.Now()}
	var cancelled *cancelledError
	if errors.As(err, &cancelled) {
		end.Cancel = &cancelled.req
	}
	switch {
	case errors.Is(err, jobctl.ErrStopped):
		// No child was started.
	case errors.Is(err, proc.ErrNotFound):
		end.Exit.Code, end.Exited = exitNotFound, true
	case errors.Is(err, proc.ErrNotExecutable):
		end.Exit.Code, end.Exited = exitNotExecutable, true
	default:
		end.Exited = true
	}
	return end
}

// reportedFailure says, for a run that failed as a run (its child's exit
// code, a timeout, a lost lock) or was cancelled, what one line on stderr
// tells of it: the item, the cause and the code. It returns "" for a success, an
// interruption, and a child that could not be started at all, which w8y
// explains as its own failure when it exits.
func reportedFailure(end finish.End) string {
	item := strconv.Quote(clip.Item(end.Item))
	switch {
	case end.Result == schema.ResultTimeout:
		return fmt.Sprintf("item %s failed: %v (exit code %d)", item, end.Err, exitTimeout)
	case end.Result == schema.ResultLockLost:
		return fmt.Sprintf("item %s failed: %v; the child was stopped (exit code %d)", item, end.Err, exitLockLost)
	case end.Result == schema.ResultCancelled:
		// No exit code: a --continuous worker goes on after a cancel.
		return fmt.Sprintf("item %s was %v", item, end.Err)
	case end.Result != schema.ResultFailure || end.Err != nil:
		return ""
	case end.Exit.Signal != 0:
		return fmt.Sprintf("item %s failed: the child was %s (exit code %d)", item, end.Exit, end.Exit.Code)
	}
	return fmt.Sprintf("item %s failed: the child ended with %s", item, end.Exit)
}

// classify names how a run ended (see newRunEnd for its inputs). Timeouts
// and lost locks come first, since they stopped the child whatever it would
// have done; a child that succeeded despite a stop signal finished its work,
// so it counts as a success.
func classify(exit proc.Exit, err error, stopped bool, exitCodes []int) schema.Result {
	switch {
	case errors.Is(err, lease.ErrLost):
		return schema.ResultLockLost
	case errors.Is(err, ErrTimeout):
		return schema.ResultTimeout
	case errors.Is(err, ErrCancelled):
		return schema.ResultCancelled
	case errors.Is(err, jobctl.ErrStopped):
		// The stop came between taking the item and starting its child.
		return schema.ResultInterrupted
	case err != nil:
		// The child could not be run.
		return schema.ResultFailure
	case slices.Contains(exitCodes, exit.Code):
		return schema.ResultSuccess
	case stopped:
		return schema.ResultInterrupted
	}
	return schema.ResultFailure
}
