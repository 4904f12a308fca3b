package main

import (
	"context"
	"errors"
	"time"

	"github.com/w8y/w8y/internal/items"
	"github.com/w8y/w8y/internal/status"
)

// listCheckEvery is how often an idle --continuous worker checks again
// that its list exists: a missing list is said at the first idle pass, and
// again now and then while it stays missing, so that a worker with a
// mistyped --key-prefix is not silent forever, nor noisy.
const listCheckEvery = 10 * time.Minute

// warnIfListMissing warns when the list does not exist, after a pass that
// found nothing to take: a mistyped --key-prefix otherwise looks just like
// a list whose items are all taken. Redis keeps no empty list, so an empty
// one reads as missing too. A failed read says nothing: the next pass meets
// the same failure and reports it.
func (w *worker) warnIfListMissing(ctx context.Context) {
	list := w.rotator.Keys.List()
	n, err := w.rotator.Client.LLen(ctx, list).Result()
	if err != nil || n > 0 {
		return
	}
	w.log.Warn().Str("list", items.Clip(list)).Msgf("the list %s does not exist or is empty: is --key-prefix (W8Y_KEY_PREFIX) right? Other programs add items with RPUSH %s ...", quoteKey(list), items.Clip(list))
}

// errPending ends a read of the list at the first item that is still to
// run (see finished).
var errPending = errors.New("an item is still to run")

// finished reports, for --until-idle, whether nothing is left to run after
// a pass that found nothing to take: whether every item of the list cools
// down, or can never run (empty, with a NUL byte, too long for the
// command, or with a lock key of another type, each of which the passes
// warn of), or is paused by a key without expiry (w8yctl pause without
// --for, or a cooldown or backoff key set by hand). An item that is locked
// is not finished (its run may yet fail, or its worker die, and then it
// must run again), nor one that backs off after a failure (it will be
// retried), nor one that became free since the pass. It reads the list as
// --status does, up to the first item still to run.
func (w *worker) finished(ctx context.Context) (bool, error) {
	err := w.items.Read(ctx, func(batch []status.Item) error {
		for _, st := range batch {
			if stillToRun(st, w.rotator.MaxItemLen) {
				return errPending
			}
		}
		return nil
	})
	if errors.Is(err, errPending) {
		return false, nil
	}
	return err == nil, err
}

// stillToRun says whether st, an item as --status reads it, is still to
// run in a batch that runs each item once (see finished).
func stillToRun(st status.Item, maxItemLen int) bool {
	switch st.State {
	case status.StateLocked:
		return true
	case status.StateBackoff:
		// A backoff without expiry is an operator's pause.
		return *st.Backoff >= 0
	case status.StatePaused:
		// As a backoff: a pause that ends by itself (w8yctl pause --for)
		// is waited out, one until resumed is not.
		return *st.Pause >= 0
	case status.StateIdle:
		return len(st.Item) <= maxItemLen
	}
	return false
}
