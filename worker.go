package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rs/zerolog"
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

// worker takes items, runs the child for each and releases their locks.
type worker struct {
	opts    *Options
	rotator *Rotator
	command Command
	router  *signalRouter
	spawn   *spawner
	log     zerolog.Logger
	// metrics and health are nil unless --metrics-addr is given.
	metrics *metrics
	health  *heartbeat
}

// run runs one item, or keeps running items with --continuous. It returns
// the exit code, or an error that run maps to one.
func (w *worker) run(ctx context.Context) (int, error) {
	if w.opts.Continuous {
		return w.loop(ctx)
	}
	exit, err := w.step(ctx)
	switch {
	case errors.Is(err, ErrNoWork):
		w.metrics.idlePass()
		w.log.Info().Msg("no item could be taken")
		return w.opts.NoWorkExitCode, nil
	case errors.Is(err, errStopped):
		return 128 + int(w.router.StopSignal()), nil
	case err != nil:
		return 0, err
	}
	return exit.Code, nil
}

// loop is --continuous: it takes the next item after each child that exits
// with one of --exit-codes, pauses after a pass that found nothing, retries
// Redis errors with backoff, and returns 0 once a stop signal has drained it.
func (w *worker) loop(ctx context.Context) (int, error) {
	failures := 0
	for {
		w.health.beat(0)
		exit, err := w.step(ctx)
		if w.stopping() && (err == nil || errors.Is(err, errStopped) || errors.Is(err, ErrNoWork) || errors.Is(err, ErrLockLost) || errors.Is(err, ErrTimeout)) {
			w.log.Info().Msg("drained; exiting")
			return 0, nil
		}
		var pause time.Duration
		switch {
		case err == nil:
			failures = 0
			if !slices.Contains(w.opts.ExitCodes, exit.Code) {
				return exit.Code, nil
			}
			continue
		case errors.Is(err, ErrTimeout) && slices.Contains(w.opts.ExitCodes, exitTimeout):
			w.log.Warn().Err(err).Msg("going on: --exit-codes lists 124")
			continue
		case errors.Is(err, ErrNoWork):
			w.metrics.idlePass()
			failures = 0
			pause = jitter(time.Duration(w.opts.IdleWait))
		case errors.Is(err, ErrLockLost), errors.Is(err, errRedis):
			w.log.Error().Err(err).Msg("retrying after backoff")
			pause = jitter(min(backoffBase<<failures, backoffCap))
			if backoffBase<<failures < backoffCap {
				failures++
			}
		default:
			return 0, err
		}
		w.health.beat(pause)
		if !w.sleep(pause) {
			w.log.Info().Msg("drained; exiting")
			return 0, nil
		}
	}
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

// sleep pauses for d and reports false if a stop signal cut it short.
func (w *worker) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-w.router.Stopped():
		return false
	}
}

// jitter spreads d over ±25%, so that workers started together drift apart
// instead of polling Redis in lockstep.
func jitter(d time.Duration) time.Duration {
	return d*3/4 + rand.N(d/2+1)
}

// step takes one item, runs the child on it, and releases the lock while
// recording how the run ended.
func (w *worker) step(ctx context.Context) (ChildExit, error) {
	item, lock, err := w.rotator.Take(ctx, w.router.Stopped())
	if err != nil {
		return ChildExit{}, err
	}
	exit, stopped, err := w.runChild(ctx, item, lock)
	w.finish(ctx, lock, w.ending(exit, stopped, err))
	return exit, err
}

// ending describes the end of a run from what runChild returned.
func (w *worker) ending(exit ChildExit, stopped bool, err error) runEnd {
	end := runEnd{Result: classify(exit, err, stopped, w.opts.ExitCodes), At: time.Now()}
	switch {
	case errors.Is(err, errStopped):
		// No child was started.
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrNotExecutable):
		end.ExitCode, end.Exited = exitCode(err), true
	default:
		end.ExitCode, end.Exited, end.Duration = exit.Code, true, exit.Duration
	}
	return end
}

// runChild runs the child for item while keeping its lock alive. If the
// lock is lost, the child's group is stopped before the lease could run out,
// and the error wraps ErrLockLost; if --timeout passes first, the group is
// stopped and the error wraps ErrTimeout. stopped says whether a stop signal
// had come by the time the child ended.
func (w *worker) runChild(ctx context.Context, item string, lock *Lock) (exit ChildExit, stopped bool, err error) {
	log := w.log.With().Str("item", item).Str("lock_key", lock.Key).Logger()
	child, err := w.router.startChild(func() (*Child, error) {
		return w.spawn.start(w.command.build(item, lock.Key))
	})
	if err != nil {
		return ChildExit{}, w.stopping(), err
	}
	defer w.router.childDone()
	defer w.spawn.forget(child)
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
	// Waiting for the child is progress too, as far as /healthz goes.
	stopBeating := w.health.beatEvery(childBeat)
	var failed error
	select {
	case <-child.Done():
		if child.endStragglers(time.Now().Add(grace)) {
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
	if err := w.spawn.term.reclaim(); err != nil {
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

// finish gives up lock if it is still ours, and records how the run ended
// (end) in the same round trip.
func (w *worker) finish(ctx context.Context, lock *Lock, end runEnd) {
	w.metrics.runEnded(end)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	released, err := lock.Release(ctx, &end)
	switch {
	case errors.Is(err, errRecord):
		w.log.Warn().Err(err).Str("lock_key", lock.Key).Msg("the run's end could not be recorded")
		if !released {
			w.log.Warn().Str("lock_key", lock.Key).Msg("the lock was no longer ours at release; left alone")
		}
	case err != nil:
		w.log.Error().Err(err).Str("lock_key", lock.Key).Msg("could not release the lock; it will expire by itself")
	case !released:
		w.log.Warn().Str("lock_key", lock.Key).Msg("the lock was no longer ours at release; left alone")
	}
}
