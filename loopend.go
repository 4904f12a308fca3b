package main

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
)

// How a --continuous worker's loop takes a run's end, a Redis error and a
// stop: go on, retry after a pause, or close, and how it ends.

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
	case !w.opts.stopsAfter(w.backoffOf(end)):
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
	open := !l.closing
	l.closing = true
	l.closed.Store(true)
	if open {
		l.interrupt()
	}
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
