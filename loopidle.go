package main

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/redisconn"
)

// What a --continuous worker does after a pass that found nothing: wait
// for a wake, or pause.

// foundNothing handles a pass that found nothing to take: it warns now and
// then if the list is missing, ends a --until-idle worker that has nothing
// left to run, and otherwise waits for a wake until what it knows comes
// due, or for the fallback's look (see worker.idleWait); where takes do
// not look (a Cluster without a hash tag) and under --until-idle, it
// pauses for --idle-wait instead.
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
		l.wait(ctx, w.idleWait(wait))
		return
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

// wait waits up to d for a token that wakes the worker (see internal/wake),
// in a goroutine that the loop owns: its end comes on woken, which the
// loop waits for before it returns; interrupt ends it early. Without a
// Waiter it pauses.
func (l *continuous) wait(ctx context.Context, d time.Duration) {
	if l.w.waker == nil {
		l.pause(d)
		return
	}
	if d <= 0 {
		// Nothing to wait for: the next take probes at once.
		return
	}
	woken := make(chan error, 1)
	l.woken = woken
	// The take that follows the wait would probe first: the probe goes
	// with the wait, and Redis runs it as the wait ends (see
	// take.Taker.ProbeCmd); woke hands its answer to that take.
	var then []redis.Cmder
	if l.probe = l.w.rotator.ProbeCmd(ctx); l.probe != nil {
		then = append(then, l.probe)
	}
	// The registry's beat, if it comes due during the wait, goes with it
	// too (see registry.Presence.BeatCmd), and runs as the wait ends.
	if l.beat = l.w.presence.BeatCmd(ctx, d); l.beat != nil {
		then = append(then, l.beat)
	}
	// /healthz expects the next beat after the wait, however long.
	l.w.health.Beat(d)
	go func() {
		_, err := l.w.waker.Wait(ctx, d, then...)
		woken <- err
	}()
}

// woke ends the wait. A wait that a Cluster slot's move refused is tried
// again shortly, as a take is; one that failed because Redis is
// unreachable is the first failure of an outage, retried as a take's is
// (see retry); one that Redis refused (a wake key of another type) is
// followed by a pause, so that the worker does not spin.
func (l *continuous) woke(err error) {
	l.woken = nil
	if l.probe != nil {
		l.w.rotator.Probed(l.probe)
		l.probe = nil
	}
	if l.beat != nil {
		l.w.presence.Beaten(l.beat)
		l.beat = nil
	}
	if err == nil || l.closing {
		return
	}
	if redisconn.SlotMoving(err) {
		// A reshard: the two lists' slot is half-moved, and Redis refuses a
		// command that names both; the take that follows says so, once,
		// and waits the move out (see worker.slotMoving).
		l.pause(duration.Jitter(slotRetry))
		return
	}
	if err = redisconn.Wrap("wait for a wake", err); errors.Is(err, redisconn.ErrUnavailable) {
		l.retry(err)
		return
	}
	l.w.log.Debug().Err(err).Msg("could not wait for a wake")
	l.pause(duration.Jitter(probeEvery))
}

// interrupt ends the wait under way, if any, now: a free slot, a stop or
// the loop's close must not wait for its timeout. The wait ends when the
// token reaches it, a round trip later; a token that finds no wait ends
// the next one at once. A Redis that does not take the token within
// takeGrace (paused, hung) cannot end the wait either: a loop that closes
// with no child left then hangs up on it, as a take cut short does (see
// worker.take), and the wait ends with the connection.
func (l *continuous) interrupt() {
	if l.woken == nil || l.w.waker == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), takeGrace)
	defer cancel()
	if err := l.w.waker.Interrupt(ctx); err != nil {
		l.w.log.Debug().Err(err).Msg("could not end the wait for a wake early")
		if l.closing && l.running == 0 && l.w.hangUp != nil {
			l.w.hangUp()
		}
	}
}

// pause takes no items for d.
func (l *continuous) pause(d time.Duration) {
	l.paused = time.After(d)
	// /healthz expects the next beat after the pause, however long.
	l.w.health.Beat(d)
}
