package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/schema"
)

// The words a run and w8y end with, which the loop, the child's runner, the
// metrics and main's exit table share: w8y's own exit codes, the errors of a
// stopped child, and what the worker counts.

// Exit codes of w8y's own making. Otherwise w8y exits with the child's code.
const (
	exitOK = 0
	// exitNoList is a list that does not exist (see schema.ErrNoList),
	// just below exitHeld: a mistyped --key-prefix must not end 0, and
	// a script or a Job must be able to tell it from the child's own codes
	// and from w8y's other failures.
	exitNoList = 120
	// exitHeld is w8y --item's code when the item's lock stayed held for all of
	// --wait. flock -w uses 1, which w8y cannot: a child's own 1 must stay
	// apart from "never ran". 121 is just below w8y's other codes, and as
	// unused by shells and timeout(1) as they are.
	exitHeld = 121
	// exitLockLost is 122, which shells and timeout(1) leave unused.
	exitLockLost = 122
	// exitCancelled is 123, between the two other codes of a child that
	// w8y stopped itself; only xargs(1) gives it a meaning of its own.
	exitCancelled = 123
	// exitTimeout is timeout(1)'s.
	exitTimeout = 124
	// exitFailure is what env(1) and timeout(1) use for their own failures.
	exitFailure = 125
	// exitNotExecutable and exitNotFound are the shells'.
	exitNotExecutable = 126
	exitNotFound      = 127
)

// ErrTimeout is reported when a child ran past --timeout and was stopped.
var ErrTimeout = errors.New("timed out")

// ErrCancelled is reported when a cancel request stopped a child (see
// schema.Keys.Cancel); the error that wraps it is a *cancelledError.
var ErrCancelled = errors.New("cancelled")

// cancelledError is a run that its cancel request stopped: the request says
// why, who asked, and whether the run counts as a failure.
type cancelledError struct{ req schema.CancelRequest }

func (e *cancelledError) Error() string {
	return fmt.Sprintf("cancelled by %s: %q; the child was stopped", e.req.By, e.req.Reason)
}

func (e *cancelledError) Is(target error) bool { return target == ErrCancelled }

// observer counts what the worker does, for --metrics-addr (see
// metrics_on.go).
type observer interface {
	ChildStarted()
	ChildEnded()
	RunEnded(result schema.Result, ran bool, took time.Duration)
	FailureStreak(failures int64)
	IdlePass()
}

// noMetrics is the observer without --metrics-addr: it counts nothing.
type noMetrics struct{}

func (noMetrics) ChildStarted() {}

func (noMetrics) ChildEnded() {}

func (noMetrics) RunEnded(schema.Result, bool, time.Duration) {}

func (noMetrics) FailureStreak(int64) {}

func (noMetrics) IdlePass() {}

// childExitError is a run whose child's exit code w8y exits with: the
// first child of a one-shot run that did not exit 0, or a failed run that
// ends --continuous.
type childExitError struct{ end finish.End }

func (e *childExitError) Error() string {
	return fmt.Sprintf("item %q: the child ended with %s", clip.Item(e.end.Item), e.end.Exit)
}
