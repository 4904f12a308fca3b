package main

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/take"
)

// --continuous: the loop that keeps up to --parallel children running, as
// the type continuous, whose states (fill, start, ended, pause, retry,
// close) are its methods below.

// loop is --continuous: it keeps up to --parallel children running, each
// slot taking the next item as it frees. It pauses after a pass that found
// nothing, retries Redis errors with backoff, and stops taking items after a
// stop signal, --max-items or --max-runtime, or a failed run with
// --stop-on-failure. It returns once the running children have finished.
func (w *worker) loop(ctx context.Context) error {
	l := &continuous{w: w, done: make(chan slotEnd, w.opts.Parallel)}
	stopped := w.stops.Stopped()
	var deadline <-chan time.Time
	if d := time.Duration(w.opts.MaxRuntime); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		deadline = timer.C
	}
	for {
		// Each turn is progress as far as /healthz goes. Where the loop
		// then waits, either a pause was announced or children run, and
		// each running child beats while it runs (see childRunner), so a
		// worker that drains after a stop, --max-items or --max-runtime
		// stays healthy until its last child ends.
		w.health.Beat(0)
		l.fill(ctx)
		if l.closing && l.running == 0 {
			return l.result()
		}
		select {
		case s := <-l.done:
			l.running--
			l.ended(s.end)
			if s.next != nil {
				// Taken by the run's finish, in the same call: run as an
				// item that fill took.
				l.reachable()
				l.retries = 0
				l.start(ctx, s.next)
			}
		case <-l.paused:
			l.paused = nil
		case <-stopped:
			stopped = nil
			l.close("")
		case <-deadline:
			deadline = nil
			l.close("--max-runtime reached: no new items will be taken")
		}
	}
}

// continuous is the state of a --continuous worker's loop.
type continuous struct {
	w *worker
	// done receives the end of each run that a slot started, and the item
	// that its finish took, if it took one.
	done    chan slotEnd
	running int
	taken   int
	// retries counts Redis errors in a row, which the retry pause doubles
	// with.
	retries int
	// quiet is until when a retry goes unlogged: a worker that cannot
	// reach Redis tries it every probeEvery, but says so only as often as
	// the back-off would retry.
	quiet time.Time
	// unreachable is when Redis last became unreachable, or zero while it
	// answers: its return is worth a line, as its loss was.
	unreachable time.Time
	// paused is set while no item is taken: after an idle pass, or a Redis
	// error or lost lock.
	paused <-chan time.Time
	// closing is set once no more items are taken; the loop then waits for
	// the running children. closed is the same, for the slots to read.
	closing bool
	closed  atomic.Bool
	// exit, once set, is how the loop ends when it is not a drain or a
	// limit reached.
	exit error
	// failed is the run whose failure ends the loop, if one does.
	failed *finish.End
	// listChecked is when an idle pass last checked that the list exists
	// (see warnIfListMissing).
	listChecked time.Time
}

// fill takes items while slots are free and nothing pauses or closes the
// loop: up to --max-items, each taken item run in a slot of its own, a
// pass that found nothing handled by idle, a Redis error retried.
func (l *continuous) fill(ctx context.Context) {
	w := l.w
	for !l.closing && l.paused == nil && l.running < w.opts.Parallel {
		if w.opts.MaxItems > 0 && l.taken >= w.opts.MaxItems {
			l.close("--max-items reached: no new items will be taken")
			return
		}
		// Every take looks first (see take.Taker.LookFirst), but --until-idle's,
		// which must know that nothing is left: it passes over the whole
		// list, as status.Reader.NothingLeft reads it.
		pass := w.rotator.LookFirst()
		if w.opts.UntilIdle {
			pass = w.rotator.Pass()
		}
		_, lock, err := w.take(ctx, pass, l.running == 0)
		if err == nil || errors.Is(err, take.ErrNoWork) {
			l.reachable()
		}
		switch {
		case err == nil:
			l.retries = 0
			l.start(ctx, lock)
		case errors.Is(err, take.ErrNoWork):
			l.retries = 0
			l.foundNothing(ctx)
		case errors.Is(err, jobctl.ErrStopped):
			l.close("")
		default:
			l.retryOrEnd(err)
		}
	}
}

// slotEnd is how a slot's run ended, and the Lock of the next item, which
// its finish took, or nil.
type slotEnd struct {
	end  finish.End
	next *Lock
}

// start runs the item of lock, which is ours, in a slot of its own. A
// worker of one slot that may take more items takes the next one as the
// run finishes, in the same call (see worker.finish), after a run that
// ended well, unless a stop or the loop's close came first: a busy
// worker's item costs Redis one round trip instead of two.
func (l *continuous) start(ctx context.Context, lock *Lock) {
	w := l.w
	l.running++
	l.taken++
	var then func(finish.End) bool
	if w.opts.Parallel == 1 && !w.opts.UntilIdle && (w.opts.MaxItems == 0 || l.taken < w.opts.MaxItems) {
		then = func(end finish.End) bool {
			return end.Result == schema.ResultSuccess && end.Err == nil && !w.stops.Stopping() && !l.closed.Load()
		}
	}
	go func() {
		end, next := w.runItem(ctx, lock.Item, lock, then)
		l.done <- slotEnd{end: end, next: next}
	}()
}

// foundNothing handles a pass that found nothing to take: it warns now and
// then if the list is missing, ends a --until-idle worker that has nothing
// left to run, and otherwise pauses, no longer than the next look at what
// came due.
func (l *continuous) foundNothing(ctx context.Context) {
	w := l.w
	w.metrics.IdlePass()
	if !w.opts.UntilIdle && (l.listChecked.IsZero() || time.Since(l.listChecked) >= listCheckEvery) {
		w.warnIfListMissing(ctx)
		l.listChecked = time.Now()
	}
	if w.opts.UntilIdle && l.running == 0 {
		done, err := w.items.NothingLeft(ctx, w.rotator.MaxItemLen)
		if err != nil {
			l.retryOrEnd(err)
			return
		}
		if done {
			l.untilIdleDone(ctx)
			return
		}
	}
	wait := time.Duration(w.opts.IdleWait)
	if w.rotator.Looks() && !w.opts.UntilIdle {
		wait = w.lookPause(wait)
	}
	l.pause(duration.Jitter(wait))
}

// untilIdleDone ends a --until-idle worker that found nothing left to run:
// well if it took an item, and otherwise as a one-shot run that took none
// ends (see worker.noWork), so that a Job whose worker found no work, or
// no list, does not pass for one that did it.
func (l *continuous) untilIdleDone(ctx context.Context) {
	l.close("--until-idle: nothing is left to run (every item cools down or cannot run): no new items will be taken")
	if l.taken == 0 {
		l.end(l.w.noWork(ctx))
	}
}

// retryOrEnd retries after err, a Redis error, if a retry may mend it, and
// otherwise ends the loop with it.
func (l *continuous) retryOrEnd(err error) {
	if errors.Is(err, redisconn.ErrUnavailable) {
		l.retry(err)
		return
	}
	l.end(err)
}

// ended decides what the end of a run means for the loop: go on, pause and
// retry, or end with the run's failure.
func (l *continuous) ended(end finish.End) {
	w := l.w
	switch {
	case w.stops.Stopping():
		// Draining: however the child ended, w8y exits 0.
		l.close("")
	case end.Result == schema.ResultSuccess, errors.Is(end.Err, jobctl.ErrStopped):
	case end.Result == schema.ResultCancelled:
		// An operator stopped the run, not the item: the worker goes on,
		// even when the request counts the run as the item's failure.
		w.log.Info().Str("item", clip.Item(end.Item)).Msg("going on: the run was cancelled")
	case errors.Is(end.Err, lease.ErrLost):
		l.retry(end.Err)
	case errors.Is(end.Err, ErrTimeout) && slices.Contains(w.opts.ExitCodes, exitTimeout):
		w.log.Warn().Err(end.Err).Msg("going on: --exit-codes lists 124")
	case end.Err != nil && !errors.Is(end.Err, ErrTimeout):
		// The child could not be started: no item can be run.
		l.end(end.Err)
	case !w.opts.stopsOnFailure():
		w.log.Warn().Str("item", clip.Item(end.Item)).Str("result", string(end.Result)).Msg("going on: the item backs off (--failure-backoff)")
	case end.Err != nil:
		l.stopFor(end, end.Err)
	default:
		l.stopFor(end, &childExitError{end: end})
	}
}

// stopFor ends the loop with err because end, a failed run, stops the
// worker (--stop-on-failure, or no --failure-backoff).
func (l *continuous) stopFor(end finish.End, err error) {
	if l.exit == nil {
		l.failed = &end
	}
	l.end(err)
}

// pause takes no items for d.
func (l *continuous) pause(d time.Duration) {
	l.paused = time.After(d)
	// /healthz expects the next beat after the pause, however long.
	l.w.health.Beat(d)
}

// retry pauses after err, longer with each error in a row, and says for
// how long; while Redis is unreachable, it pauses no longer than
// probeEvery, and says so as often as the back-off would have retried.
// After a stop signal nothing is retried: the loop closes instead.
func (l *continuous) retry(err error) {
	if l.w.stops.Stopping() {
		l.close("")
		return
	}
	backoff := duration.Jitter(min(retryBase<<l.retries, retryCap))
	if retryBase<<l.retries < retryCap {
		l.retries++
	}
	wait := backoff
	if errors.Is(err, redisconn.ErrUnavailable) {
		if l.unreachable.IsZero() {
			l.unreachable = time.Now()
		}
		wait = min(backoff, duration.Jitter(probeEvery))
	}
	if now := time.Now(); !now.Before(l.quiet) {
		if l.w.needs != nil {
			err = l.w.needs.full(context.Background(), err)
		}
		l.w.log.Error().Err(err).Float64("retry_in_s", wait.Seconds()).Msgf("retrying in %s", wait.Round(time.Millisecond))
		l.quiet = now.Add(backoff)
	}
	l.pause(wait)
}

// reachable notes that Redis answered, and says so, with how long it was
// unreachable since the first failure, if it had not.
func (l *continuous) reachable() {
	l.quiet = time.Time{}
	if l.unreachable.IsZero() {
		return
	}
	down := time.Since(l.unreachable)
	l.w.log.Info().Float64("down_s", down.Seconds()).Msgf("Redis is reachable again, after %s", down.Round(time.Millisecond))
	l.unreachable = time.Time{}
	// A restart or a failover may bring a server that evicts, or a
	// replica: the worker stops taking items, as it would not have
	// started.
	if l.w.needs != nil {
		if err := l.w.needs.check(context.Background()); err != nil {
			l.w.log.Error().Msg(err.Error())
			l.end(err)
		}
	}
}

// close stops taking items, saying why (and how many it took) unless why
// is "" or it was closed already.
func (l *continuous) close(why string) {
	if !l.closing && why != "" {
		l.w.log.Info().Int("items", l.taken).Msg(why)
	}
	l.closing = true
	l.closed.Store(true)
}

// end closes the loop so that it ends with err, unless it is ending with
// another error already.
func (l *continuous) end(err error) {
	if l.exit == nil {
		l.exit = err
	}
	l.close("")
}

// result is how the loop ends once its last child has finished.
func (l *continuous) result() error {
	if l.failed != nil {
		// The last line of a worker that a failed item stopped says which,
		// how, and what would have kept it going: with systemd's restart
		// limits, one item that always fails can stop a whole list.
		why := l.w.stopsBecause(*l.failed)
		l.w.log.Error().Str("item", clip.Item(l.failed.Item)).Str("result", string(l.failed.Result)).
			Int("exit_code", l.failed.Exit.Code).Msg(why)
		l.w.tell(why)
	}
	if l.exit != nil {
		return l.exit
	}
	if l.w.stops.Stopping() {
		l.w.log.Info().Msg("drained; exiting")
	} else {
		l.w.log.Info().Int("items", l.taken).Msg("done; exiting")
	}
	return nil
}
