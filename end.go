package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/w8y/w8y/internal/items"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/runs"
	"github.com/w8y/w8y/internal/schema"
)

// newRunEnd describes the end of item's run from what childRunner.run saw:
// the child's exit (zero when it never started), err, whether w8y had a stop
// signal before the child ended, and exitCodes, the codes that count as
// success (--exit-codes).
func newRunEnd(item string, exit proc.Exit, err error, stopped bool, exitCodes []int) runs.End {
	end := runs.End{Item: item, Result: classify(exit, err, stopped, exitCodes), Exit: exit, Err: err, At: time.Now()}
	var cancelled *cancelledError
	if errors.As(err, &cancelled) {
		end.Cancel = &cancelled.req
	}
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

// reportedFailure says, for a run that failed as a run (its child's exit
// code, a timeout, a lost lock) or was cancelled, what one line on stderr
// tells of it: the item, the cause and the code. It returns "" for a success, an
// interruption, and a child that could not be started at all, which w8y
// explains as its own failure when it exits.
func reportedFailure(end runs.End) string {
	item := strconv.Quote(items.Clip(end.Item))
	switch {
	case end.Result == schema.ResultTimeout:
		return fmt.Sprintf("item %s failed: %v (exit code %d)", item, end.Err, exitTimeout)
	case end.Result == schema.ResultLockLost:
		return fmt.Sprintf("item %s failed: %v; the child was stopped (exit code %d)", item, end.Err, exitLockLost)
	case end.Result == schema.ResultCancelled:
		// No exit code: a --continuous worker goes on after a cancel.
		return fmt.Sprintf("item %s was %v", item, end.Err)
	case end.Result != schema.ResultFailure || end.Err != nil:
		return ""
	case end.Exit.Signal != 0:
		return fmt.Sprintf("item %s failed: the child was %s (exit code %d)", item, end.Exit, end.Exit.Code)
	}
	return fmt.Sprintf("item %s failed: the child ended with %s", item, end.Exit)
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
	case errors.Is(err, ErrCancelled):
		return schema.ResultCancelled
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
