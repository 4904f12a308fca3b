package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redisconn"
)

const (
	// releaseTimeout bounds releasing a lock after the child has exited. It
	// does not depend on the run's context, so a stop still releases.
	releaseTimeout = 5 * time.Second
	// backoffBase and backoffCap bound the pause between retries after a
	// Redis error in --continuous mode: quick enough to ride out a restart,
	// slow enough not to hammer a Redis that is down.
	backoffBase = 250 * time.Millisecond
	backoffCap  = 30 * time.Second
)

// ErrTimeout is reported when a child ran past --timeout and was stopped.
var ErrTimeout = errors.New("timed out")

// worker takes items, runs the child for each and finishes their runs.
type worker struct {
	opts     *Options
	rotator  *Rotator
	finisher *finisher
	command  Command
	router   *signalRouter
	spawn    *proc.Spawner
	log      zerolog.Logger
	// metrics and health are nil unless --metrics-addr is given.
	metrics *metrics
	health  *heartbeat
}

// outcome is how the run of one item ended.
type outcome struct {
	item   string
	exit   proc.Exit
	err    error // ErrLockLost, ErrTimeout, errStopped, or why the child could not start
	result result
}

// nonZero reports whether o makes a one-shot w8y exit with something else
// than 0.
func (o outcome) nonZero() bool { return o.err != nil || o.exit.Code != 0 }

// run runs up to --parallel items from one pass, or keeps running items
// with --continuous. It returns the exit code, or an error that run maps to
// one.
func (w *worker) run(ctx context.Context) (int, error) {
	if w.opts.Continuous {
		return w.loop(ctx)
	}
	return w.once(ctx)
}

// once is one-shot mode: it takes up to --parallel items from one pass over
// the list, runs them together and waits for them all. It exits 0 if every
// child exited 0, and otherwise as the first run to end with something else
// (first in time, not in the list), so that one --parallel 1 run exits with
// its child's code as before.
func (w *worker) once(ctx context.Context) (int, error) {
	pass := w.rotator.Pass()
	done := make(chan outcome, w.opts.Parallel)
	running := 0
	var takeErr error
	for running < w.opts.Parallel {
		item, lock, err := pass.Take(ctx, w.router.Stopped())
		if err != nil {
			takeErr = err
			break
		}
		running++
		go func() { done <- w.runItem(ctx, item, lock) }()
	}
	var first *outcome
	for range running {
		o := <-done
		if first == nil && o.nonZero() {
			first = &o
		}
	}
	switch {
	case running == 0 && errors.Is(takeErr, ErrNoWork):
		w.metrics.idlePass()
		w.log.Info().Msg("no item could be taken")
		return w.opts.NoWorkExitCode, nil
	case running == 0 && errors.Is(takeErr, errStopped):
		return 128 + int(w.router.StopSignal()), nil
	case takeErr != nil && !errors.Is(takeErr, ErrNoWork) && !errors.Is(takeErr, errStopped):
		// w8y's own failure outranks the children's codes.
		return 0, takeErr
	case first == nil:
		return exitOK, nil
	case errors.Is(first.err, errStopped):
		return 128 + int(w.router.StopSignal()), nil
	case first.err != nil:
		return 0, first.err
	}
	return first.exit.Code, nil
}

// loop is --continuous: it keeps up to --parallel children running, each
// slot taking the next item as it frees. It pauses after a pass that found
// nothing, retries Redis errors with backoff, and stops taking items after a
// stop signal, --max-items or --max-runtime, or a failed run with
// --stop-on-failure. It returns once the running children have finished.
func (w *worker) loop(ctx context.Context) (int, error) {
	done := make(chan outcome, w.opts.Parallel)
	running, taken, streak := 0, 0, 0
	// paused is set while no item is taken: after an idle pass, or a Redis
	// error or lost lock (with backoff).
	var paused <-chan time.Time
	pause := func(d time.Duration) {
		timer := time.NewTimer(d)
		paused = timer.C
		// /healthz expects the next beat after the pause, however long.
		w.health.beat(d)
	}
	retry := func(err error) {
		w.log.Error().Err(err).Msg("retrying after backoff")
		pause(jitter(min(backoffBase<<streak, backoffCap)))
		if backoffBase<<streak < backoffCap {
			streak++
		}
	}
	// closing is set once no more items are taken; the loop then waits for
	// the running children, and returns code or fail if exiting is set.
	closing, exiting := false, false
	code, fail := 0, error(nil)
	closeWith := func(why string) {
		if !closing && why != "" {
			w.log.Info().Msg(why)
		}
		closing = true
	}
	exitWith := func(c int, err error) {
		if !exiting {
			exiting, code, fail = true, c, err
		}
		closeWith("")
	}
	stopped := w.router.Stopped()
	var deadline <-chan time.Time
	if d := time.Duration(w.opts.MaxRuntime); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		deadline = timer.C
	}

	for {
		// Each turn is progress as far as /healthz goes. Where the loop
		// then waits, either a pause was announced or children run, and
		// each running child beats while it runs (see runChild), so a
		// worker that drains after a stop, --max-items or --max-runtime
		// stays healthy until its last child ends.
		w.health.beat(0)
		for !closing && paused == nil && running < w.opts.Parallel {
			if w.opts.MaxItems > 0 && taken >= w.opts.MaxItems {
				closeWith("--max-items reached: no new items will be taken")
				break
			}
			item, lock, err := w.rotator.Take(ctx, w.router.Stopped())
			switch {
			case err == nil:
				streak = 0
				running++
				taken++
				go func() { done <- w.runItem(ctx, item, lock) }()
			case errors.Is(err, ErrNoWork):
				w.metrics.idlePass()
				streak = 0
				pause(jitter(time.Duration(w.opts.IdleWait)))
			case errors.Is(err, errStopped):
				closeWith("")
			case errors.Is(err, redisconn.ErrUnavailable):
				retry(err)
			default:
				exitWith(0, err)
			}
		}
		if closing && running == 0 {
			break
		}
		select {
		case o := <-done:
			running--
			switch {
			case w.stopping():
				// Draining: however the child ended, w8y exits 0.
				closeWith("")
			case o.result == resultSuccess, errors.Is(o.err, errStopped):
			case errors.Is(o.err, ErrLockLost):
				retry(o.err)
			case errors.Is(o.err, ErrTimeout) && slices.Contains(w.opts.ExitCodes, exitTimeout):
				w.log.Warn().Err(o.err).Msg("going on: --exit-codes lists 124")
			case o.err != nil && !errors.Is(o.err, ErrTimeout):
				// The child could not be started: no item can be run.
				exitWith(0, o.err)
			case !w.opts.stopsOnFailure():
				w.log.Warn().Str("item", o.item).Str("result", string(o.result)).Msg("going on: the item backs off (--failure-backoff)")
			case o.err != nil:
				exitWith(0, o.err)
			default:
				exitWith(o.exit.Code, nil)
			}
		case <-paused:
			paused = nil
		case <-stopped:
			stopped = nil
			closeWith("")
		case <-deadline:
			deadline = nil
			closeWith("--max-runtime reached: no new items will be taken")
		}
	}
	if exiting {
		return code, fail
	}
	if w.stopping() {
		w.log.Info().Msg("drained; exiting")
	} else {
		w.log.Info().Int("items", taken).Msg("done; exiting")
	}
	return exitOK, nil
}

// stopping reports whether a stop signal has arrived.
func (w *worker) stopping() bool {
	select {
	case <-w.router.Stopped():
		return true
	default:
		return false
	}
}

// jitter spreads d over ±25%, so that workers started together drift apart
// instead of polling Redis in lockstep.
func jitter(d time.Duration) time.Duration {
	return d*3/4 + rand.N(d/2+1)
}

// runItem runs the child on item, whose lock is ours, and finishes the run:
// it releases the lock and records the item's cooldown or backoff, state and
// end event.
func (w *worker) runItem(ctx context.Context, item string, lock *Lock) outcome {
	exit, stopped, err := w.runChild(ctx, item, lock)
	end := w.ending(exit, stopped, err)
	w.finish(ctx, lock, end)
	return outcome{item: item, exit: exit, err: err, result: end.Result}
}

// ending describes the end of a run from what runChild returned.
func (w *worker) ending(exit proc.Exit, stopped bool, err error) runEnd {
	end := runEnd{Result: classify(exit, err, stopped, w.opts.ExitCodes), At: time.Now()}
	switch {
	case errors.Is(err, errStopped):
		// No child was started.
	case errors.Is(err, proc.ErrNotFound), errors.Is(err, proc.ErrNotExecutable):
		end.ExitCode, end.Exited = exitCode(err), true
	default:
		end.ExitCode, end.Exited, end.Duration = exit.Code, true, exit.Duration
	}
	return end
}

// runChild runs the child for item while keeping its lock alive. If the
// lock is lost, the child's group is stopped before the lease could run out,
// and the error wraps ErrLockLost; if --timeout passes first, the group is
// stopped and the error wraps ErrTimeout. stopped reports whether a stop
// signal had reached w8y by the time the child ended.
func (w *worker) runChild(ctx context.Context, item string, lock *Lock) (exit proc.Exit, stopped bool, err error) {
	log := w.log.With().Str("item", item).Str("lock_key", lock.Key).Logger()
	child, err := w.router.startChild(func() (*proc.Child, error) {
		return w.spawn.Start(w.command.build(item, lock.Key))
	})
	if err != nil {
		return proc.Exit{}, w.stopping(), err
	}
	defer w.router.childDone(child)
	defer child.Close()
	w.metrics.childStarted()
	defer w.metrics.childEnded()
	log.Info().Int("pid", child.PID).Str("holder", lock.Token).Msg("item started")

	grace := killGrace(time.Duration(w.opts.KillAfter), lock.TTL)
	lease := lock.keepAlive(ctx, grace+stopMargin(lock.TTL), log)
	var timeout <-chan time.Time
	if d := time.Duration(w.opts.Timeout); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	// Waiting for the child is progress too, as far as /healthz goes: each
	// running child beats, so the worker stays healthy while any runs.
	stopBeating := w.health.beatEvery(childBeat)
	var failed error
	select {
	case <-child.Done():
		if child.EndStragglers(time.Now().Add(grace)) {
			log.Warn().Int("pid", child.PID).Msg("the child left processes in its group; they were stopped")
		}
	case failed = <-lease.Lost():
		log.Error().Err(failed).Int("pid", child.PID).Msg("lock lost: stopping the child")
		child.Stop(grace)
	case <-timeout:
		failed = fmt.Errorf("%w: item %q still ran after %s; it was stopped", ErrTimeout, item, time.Duration(w.opts.Timeout))
		log.Error().Int("pid", child.PID).Msg("timed out: stopping the child")
		// The lease goes on while the child stops: the lock is still ours,
		// and the grace fits in the lease (see killGrace), so a lock lost
		// meanwhile needs no faster kill.
		child.Stop(grace)
	}
	stopped = w.stopping()
	stopBeating()
	lease.Stop()
	if err := w.spawn.Terminal().Reclaim(); err != nil {
		log.Warn().Err(err).Msg("could not take the terminal back from the child")
	}

	exit = child.Exit()
	log.Info().Int("pid", child.PID).Int("exit_code", exit.Code).Str("status", exit.String()).
		Float64("duration_s", exit.Duration.Seconds()).Msg("item finished")
	return exit, stopped, failed
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

// finish releases lock if it is still ours and records what the run's end
// changes for its item, all in one round trip where it can (see finisher):
// its cooldown or backoff, consecutive failures, state and end event.
func (w *worker) finish(ctx context.Context, lock *Lock, end runEnd) {
	w.metrics.runEnded(end)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	log := w.log.With().Str("item", lock.Item).Str("lock_key", lock.Key).Logger()
	done, err := w.finisher.finish(ctx, lock, end)
	if err != nil {
		log.Error().Err(err).Str("result", string(end.Result)).Msg("could not finish the run; the lock will expire by itself")
		return
	}
	if !done.Released {
		log.Warn().Msg("the lock was no longer ours at release; left alone")
	}
	if done.Problem != "" {
		log.Warn().Str("state_key", w.finisher.record.keys.State(lock.Item)).Msg("could not count the item's failures: " + done.Problem)
	}
	if done.Delay > 0 {
		log.Info().Str("result", string(end.Result)).Int64("consecutive_failures", done.Failures).
			Float64("backoff_s", float64(done.Delay.Milliseconds())/1000).Msg("item backs off")
	}
}
