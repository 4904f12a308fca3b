package main

import (
	"errors"
	"slices"
	"time"

	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/schema"
)

// runEnd is how one run of an item ended: the one account of it that the
// finish script, the state hash, the events, the metrics, the logs and w8y's
// exit code are all made from.
type runEnd struct {
	Item   string
	Result schema.Result
	// Exit is the child's exit. Exited says that the run has an exit code to
	// record: the child's, or the shell's 126 or 127 when it could not be
	// run; it is false when no child was started at all (a stop signal came
	// first).
	Exit   proc.Exit
	Exited bool
	// Err is why w8y stopped the child (ErrLockLost, ErrTimeout), why it
	// never started (errStopped, proc.ErrNotFound, ...), or nil when the
	// child ended by itself.
	Err error
	At  time.Time
}

// newRunEnd describes the end of item's run from what childRunner.run saw:
// the child's exit (zero when it never started), err, whether w8y had a stop
// signal before the child ended, and exitCodes, the codes that count as
// success (--exit-codes).
func newRunEnd(item string, exit proc.Exit, err error, stopped bool, exitCodes []int) runEnd {
	end := runEnd{Item: item, Result: classify(exit, err, stopped, exitCodes), Exit: exit, Err: err, At: time.Now()}
	switch {
	case errors.Is(err, errStopped):
		// No child was started.
	case errors.Is(err, proc.ErrNotFound):
		end.Exit.Code, end.Exited = exitNotFound, true
	case errors.Is(err, proc.ErrNotExecutable):
		end.Exit.Code, end.Exited = exitNotExecutable, true
	default:
		end.Exited = true
	}
	return end
}

// classify names how a run ended (see newRunEnd for its inputs). Timeouts
// and lost locks come first, since they stopped the child whatever it would
// have done; a child that succeeded despite a stop signal finished its work,
// so it counts as a success.
func classify(exit proc.Exit, err error, stopped bool, exitCodes []int) schema.Result {
	switch {
	case errors.Is(err, ErrLockLost):
		return schema.ResultLockLost
	case errors.Is(err, ErrTimeout):
		return schema.ResultTimeout
	case errors.Is(err, errStopped):
		// The stop came between taking the item and starting its child.
		return schema.ResultInterrupted
	case err != nil:
		// The child could not be run.
		return schema.ResultFailure
	case slices.Contains(exitCodes, exit.Code):
		return schema.ResultSuccess
	case stopped:
		return schema.ResultInterrupted
	}
	return schema.ResultFailure
}
