package main

import (
	"context"
	"errors"

	"github.com/w8y/w8y/internal/status"
)

// errPending ends a read of the list at the first item that is still to
// run (see nothingLeft).
var errPending = errors.New("an item is still to run")

// nothingLeft reports, for --until-idle, whether nothing is left to run after
// a pass that found nothing to take: whether every item of the list cools
// down, or can never run (empty, with a NUL byte, too long for the
// command, or with a lock key of another type, each of which the passes
// warn of), or is paused by a key without expiry (w8yctl pause without
// --for, or a cooldown or backoff key set by hand). An item that is locked
// is not finished (its run may yet fail, or its worker die, and then it
// must run again), nor one that backs off after a failure (it will be
// retried), nor one that became free since the pass. It reads the list as
// --status does, up to the first item still to run.
// list reads the list; maxItemLen is the longest item the command can carry.
func nothingLeft(ctx context.Context, list *status.Reader, maxItemLen int) (bool, error) {
	err := list.Read(ctx, func(batch []status.Item) error {
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

// stillToRun says whether st, an item as --status reads it, is still to
// run in a batch that runs each item once (see nothingLeft).
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
