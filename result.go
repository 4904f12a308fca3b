package main

import (
	"errors"
	"slices"

	"github.com/w8y/w8y/internal/proc"
)

// result is how one run of an item ended, as the finish script, the state
// hash, the events stream and the metrics name it. The names are part of
// w8y's interface: other programs read them from Redis.
type result string

const (
	// resultSuccess: the child exited with a code in --exit-codes.
	resultSuccess result = "success"
	// resultFailure: the child exited with any other code, or could not be
	// run at all.
	resultFailure result = "failure"
	// resultTimeout: --timeout fired and the child was stopped.
	resultTimeout result = "timeout"
	// resultLockLost: the lock was lost and the child was stopped.
	resultLockLost result = "lock_lost"
	// resultInterrupted: the child was stopped because w8y itself got a stop
	// signal (which it forwarded to the child), or the stop came before the
	// child started. Such a run says nothing about the item, so it counts
	// neither as a success nor as a failure: no cooldown, no backoff, the
	// count of consecutive failures stays as it was, and the item runs again
	// soon, elsewhere.
	resultInterrupted result = "interrupted"
)

// classify names how a run ended: exit is the child's exit (zero when it
// never started), err what runChild reported, stopped whether w8y had a stop
// signal before the child ended, and exitCodes the codes that count as
// success (--exit-codes). Timeouts and lost locks come first, since they
// stopped the child whatever it would have done; a child that succeeded
// despite a stop signal finished its work, so it counts as a success.
func classify(exit proc.Exit, err error, stopped bool, exitCodes []int) result {
	switch {
	case errors.Is(err, ErrLockLost):
		return resultLockLost
	case errors.Is(err, ErrTimeout):
		return resultTimeout
	case errors.Is(err, errStopped):
		// The stop came between taking the item and starting its child.
		return resultInterrupted
	case err != nil:
		// The child could not be run.
		return resultFailure
	case slices.Contains(exitCodes, exit.Code):
		return resultSuccess
	case stopped:
		return resultInterrupted
	}
	return resultFailure
}

// failed reports whether r counts against the item: it backs off (with
// --failure-backoff), and its failures and consecutive failures go up.
func (r result) failed() bool {
	return r == resultFailure || r == resultTimeout || r == resultLockLost
}

// event is the type of the events stream entry that ends a run with r.
func (r result) event() string {
	switch r {
	case resultTimeout, resultLockLost:
		return string(r)
	}
	return "finish"
}
