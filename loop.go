package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/take"
)

// --continuous: the loop that keeps up to --parallel children running, as
// the type continuous, whose states are its methods: here the loop itself
// and its taking (fill, start); in loopidle.go what a pass that found
// nothing leads to (foundNothing, wait, pause); in loopend.go how a run's
// end, an error and a stop change it (ended, retry, reachable, close,
// result).

// loop is --continuous: it keeps up to --parallel children running, each
// slot taking the next item as it frees. After a pass that found nothing
// it waits for a wake (see wait), retries Redis errors with backoff, and
// stops taking items after a stop signal, --max-items or --max-runtime, or
// a failed run with --stop-on-failure. It returns once the running
// children have finished, and the wait under way has ended.
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
		if l.closing && l.running == 0 && l.woken == nil {
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
			// A free slot takes at once, not at the wait's end.
			l.interrupt()
		case err := <-l.woken:
			l.woke(err)
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
	// paused is set while no item is taken: after an idle pass where the
	// worker does not wait for a wake, or a Redis error or lost lock.
	paused <-chan time.Time
	// woken is set while an idle worker waits for a wake (see wait): it
	// receives the wait's end.
	woken chan error
	// probe is the take's probe sent with the wait under way, if any (see
	// wait): its answer is the wait's end's.
	probe *redis.Cmd
	// beat is the registry's beat sent with the wait under way, if any.
	beat *redis.Cmd
	// closing is set once no more items are taken; the loop then waits for
	// the running children, and the wait under way. closed is the same,
	// for the slots to read.
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
	for !l.closing && l.paused == nil && l.woken == nil && l.running < w.opts.Parallel {
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
