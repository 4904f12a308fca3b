package status

import (
	"context"
	"errors"
)

// errPending ends a read of the list at the first item that is still to
// run (see NothingLeft).
var errPending = errors.New("an item is still to run")

// NothingLeft reports, for w8y --until-idle, whether nothing is left to run
// after a pass that found nothing to take: whether every item of the list
// cools down, or can never run (empty, with a NUL byte, longer than
// maxItemLen, the longest item the command can carry, or with a lock key of
// another type, each of which the passes warn of), or is paused by a key
// without expiry (w8yctl pause without --for, or a cooldown or backoff key
// set by hand). An item that is locked is not finished (its run may yet
// fail, or its worker die, and then it must run again), nor one that backs
// off after a failure (it will be retried), nor one that became free since
// the pass. It reads the list as --status does, up to the first item still
// to run.
func (r *Reader) NothingLeft(ctx context.Context, maxItemLen int) (bool, error) {
	err := r.Read(ctx, func(batch []Item) error {
		for _, st := range batch {
			if stillToRun(st, maxItemLen) {
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

// stillToRun says whether st is still to run in a batch that runs each item
// once (see NothingLeft).
func stillToRun(st Item, maxItemLen int) bool {
	switch st.State {
	case StateLocked:
		return true
	case StateBackoff:
		// A backoff without expiry is an operator's pause.
		return *st.Backoff >= 0
	case StatePaused:
		// As a backoff: a pause that ends by itself (w8yctl pause --for)
		// is waited out, one until resumed is not.
		return *st.Pause >= 0
	case StateIdle:
		return len(st.Item) <= maxItemLen
	}
	return false
}
