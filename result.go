package main

import (
	"errors"
	"slices"
)

// result is how a run ended, as the finish script records it. The names are
// part of w8y's interface: other programs read them from Redis.
type result string

const (
	// resultSuccess: the child exited with a code in --exit-codes.
	resultSuccess result = "success"
	// resultFailure: the child exited with any other code, or could not be
	// run at all.
	resultFailure result = "failure"
	// resultTimeout: --timeout fired and the child was stopped.
	resultTimeout result = "timeout"
	// resultLockLost: the lock was lost while the child ran.
	resultLockLost result = "lock_lost"
	// resultInterrupted: w8y itself was told to stop (a stop signal, which
	// it forwarded to the child) before the child succeeded, or before it
	// started. Such a run says nothing about the item, so it neither cools
	// down nor backs off and the failure count stays as it was: the item runs
	// again soon, elsewhere.
	resultInterrupted result = "interrupted"
)

// failed reports whether r counts as a failed run: it backs off and adds one
// to the item's consecutive failures.
func (r result) failed() bool {
	return r == resultFailure || r == resultTimeout || r == resultLockLost
}

// classify names how a run ended: exit is the child's exit, err what
// running it returned, and stopped whether a stop signal reached w8y
// while the child ran. Timeouts and lost locks come first, since they
// stopped the child whatever it would have done; a child that succeeded
// despite a stop signal finished its work, so it counts as a success.
func classify(exit ChildExit, err error, exitCodes []int, stopped bool) result {
	switch {
	case errors.Is(err, ErrLockLost):
		return resultLockLost
	case errors.Is(err, ErrTimeout):
		return resultTimeout
	case errors.Is(err, errStopped):
		return resultInterrupted
	case err != nil:
		return resultFailure
	case slices.Contains(exitCodes, exit.Code):
		return resultSuccess
	case stopped:
		return resultInterrupted
	}
	return resultFailure
}
