// Package finish writes what a run of an item leaves in Redis, in the layout
// of internal/schema: its start (in the take's own round trip, or in one of
// its own) and its end, which releases the lock, sets the item's cooldown or
// failure backoff, counts its consecutive failures, and records the state
// hash and the events, in one round trip where the keys are colocated and
// with a command per key elsewhere.
package finish

import (
	"time"

	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/schema"
)

// End is how one run of an item ended: the one account of it that the
// finish script, the state hash, the events, the metrics, the logs and w8y's
// exit code are all made from.
type End struct {
	Item   string
	Result schema.Result
	// Exit is the child's exit. Exited says that the run has an exit code to
	// record: the child's, or the shell's 126 or 127 when it could not be
	// run; it is false when no child was started at all (a stop signal came
	// first).
	Exit   proc.Exit
	Exited bool
	// Err is why w8y stopped the child (its lock was lost, it timed out),
	// why it never started (a stop signal, proc.ErrNotFound, ...), or nil
	// when the child ended by itself.
	Err error
	// At is when the run ended, and Started when its item was taken, on
	// this host's clock, or zero where the caller does not know.
	At, Started time.Time
	// Taken is when Redis took the item, on Redis' clock (the state hash's
	// last_start), where the take said; zero where it did not, and Started
	// stands for it. A schedule counts the run's start from it: a take sent
	// just before a slot that Redis runs just after it belongs to the new
	// slot, which Started would put in the old one.
	Taken time.Time
	// Cancel is the request that cancelled the run, when its Result is
	// schema.ResultCancelled.
	Cancel *schema.CancelRequest
	// Output is the end of what the child wrote, with --keep-output; nil
	// without it, or when no child ran.
	Output *Output
	// Schedule is the item's own, where its settings stand in for the
	// worker's options (see internal/settings): its end sets the cooldown
	// or backoff that this one says. nil: the Finisher's Schedule.
	Schedule *Schedule
}

// Output is the last bytes of a child's stdout and stderr.
type Output struct {
	Stdout, Stderr []byte
}

// Failed reports whether the run counts against its item: its result does
// (see schema.Result.Failed), or its cancel request asked to count it so.
func (e End) Failed() bool {
	return e.Result.Failed() || e.Result == schema.ResultCancelled && e.Cancel != nil && e.Cancel.AsFailure
}
