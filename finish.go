package main

import (
	"context"
	"fmt"
	"time"

	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/take"
)

// The end of a run: its child run under its lock, then its finish handed to
// internal/finish (with the next take in the same call where the loop asks
// for one), or a lock given back before any child ran.

// stopsBecause says why a --continuous worker stops after end, a failed
// run, and which option would have kept it going.
func (w *worker) stopsBecause(end finish.End) string {
	code := end.Exit.Code
	switch end.Result {
	case schema.ResultTimeout:
		code = exitTimeout
	case schema.ResultLockLost:
		code = exitLockLost
	}
	what := fmt.Sprintf("stopping: item %q failed (exit code %d)", clip.Item(end.Item), code)
	if w.opts.StopOnFailure {
		return what + ", and --stop-on-failure stops the worker on a failed run; without it, --failure-backoff backs the item off and goes on"
	}
	keep := "--failure-backoff MIN[,MAX] (W8Y_FAILURE_BACKOFF) would back the item off and go on"
	if end.Result == schema.ResultTimeout {
		keep += ", and listing 124 in --exit-codes would count a timeout as a success"
	}
	return what + ", and without --failure-backoff a --continuous worker stops on a failed run; " + keep
}

// backoffOf is the failure backoff that end's run set: its item's own, or
// --failure-backoff.
func (w *worker) backoffOf(end finish.End) finish.Backoff {
	if end.Schedule != nil {
		return end.Schedule.Backoff
	}
	return w.opts.FailureBackoff
}

// giveBack ends a take that too few replicas confirmed: running a child on a
// lock that a failover could lose might run the item twice.
//
// The take's start is already recorded, so giveBack records an end for it:
// interrupted, with no child, as when a stop signal comes between a take
// and its child. That keeps every start event followed by an end, counts
// neither as a success nor as a failure of the item, and deletes the lock
// only while it still holds our token, as every release does.
func (w *worker) giveBack(ctx context.Context, lock *Lock) {
	end := finish.End{Item: lock.Item, Result: schema.ResultInterrupted, At: time.Now()}
	if _, err := w.finisher.Finish(ctx, lock.Key, lock.Token, end); err != nil {
		w.log.Warn().Err(err).Str("lock_key", clip.Item(lock.Key)).Msg("could not give back an unconfirmed lock; it will expire by itself")
	}
}

// runItem runs the child on item, whose lock is ours, and finishes the run:
// it releases the lock and records the item's cooldown or backoff, state and
// end event. then, if not nil, says whether the worker takes another item
// after the run's end: the finish then takes it too, where one call can
// (see worker.finish), and runItem returns its Lock.
func (w *worker) runItem(ctx context.Context, item string, lock *Lock, then func(finish.End) bool) (finish.End, *Lock) {
	w.presence.Started(item)
	defer w.presence.Ended(item)
	end := w.children.run(ctx, item, lock)
	if lock.Run != nil {
		// The item's own settings: its end sets their cooldown, slot or
		// backoff, and the loop goes on after a failure as they say.
		end.Schedule = &lock.Run.Schedule
	}
	next := w.finish(ctx, lock, end, then != nil && then(end))
	w.tell(reportedFailure(end))
	return end, next
}

// finish releases lock if it is still ours and records what the run's end
// changes for its item, all in one round trip where it can (see finisher):
// its cooldown or backoff, consecutive failures, state and end event. With
// takeNext, the same call looks for the next item as the worker's take
// would first (see take.Taker.FinishThenLook), and finish returns the Lock
// of the item it took, or nil.
func (w *worker) finish(ctx context.Context, lock *Lock, end finish.End, takeNext bool) (next *Lock) {
	w.metrics.RunEnded(end.Result, end.Exited, end.Exit.Duration)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	log := w.log.With().Str("item", clip.Item(lock.Item)).Str("lock_key", clip.Item(lock.Key)).Logger()
	end.Started, end.Taken = lock.Taken, lock.Start
	var done finish.Reply
	var err error
	if takeNext {
		var taken take.Taken
		var ok bool
		done, taken, ok, err = w.rotator.FinishThenLook(ctx, w.finisher, lock.Key, lock.Token, end)
		if ok {
			next = w.rotator.lock(taken)
		}
	} else {
		done, err = w.finisher.Finish(ctx, lock.Key, lock.Token, end)
	}
	// A restart or failover shorter than releaseTimeout must not leave the
	// run unrecorded and its lock to expire: a finish that was not applied
	// (no connection, or a primary demoted by a failover, see finish.Resend)
	// is sent again, at the lease's retry pace, until it is.
	for err != nil && finish.Resend(err) && sleepCtx(ctx, lease.RetryEvery(lock.TTL)) {
		done, err = w.finisher.Finish(ctx, lock.Key, lock.Token, end)
	}
	if err != nil {
		log.Error().Err(err).Str("result", string(end.Result)).Msg("could not finish the run; the lock will expire by itself")
		return nil
	}
	w.metrics.FailureStreak(done.Failures)
	if !done.Released {
		log.Warn().Msg("the lock was no longer ours at release; left alone")
	}
	if done.Problem != "" {
		log.Warn().Str("state_key", clip.Item(w.finisher.Record.Keys.State(lock.Item))).Msg("could not count the item's failures: " + done.Problem)
	}
	if done.Delay > 0 {
		log.Info().Str("result", string(end.Result)).Int64("consecutive_failures", done.Failures).
			Float64("backoff_s", float64(done.Delay.Milliseconds())/1000).Msg("item backs off")
	}
	return next
}
