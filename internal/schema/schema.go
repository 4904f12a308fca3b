// Package schema is the layout of what w8y keeps in Redis, which other
// programs read and write too: the names of the keys under a prefix, the
// fields of an item's state hash, how a run's result and the events are
// named. It is w8y's interface to everything that is not w8y, so it lives
// in one place, and changes only with care.
package schema

import (
	"strings"
	"time"
)

// Keys names the Redis keys under one prefix.
type Keys struct {
	// Prefix starts every key's name; see NormalizePrefix.
	Prefix string
	// Colocated says that every key under Prefix lives on one server, so
	// that one Lua script may touch the list and all of an item's keys
	// together (see redisconn.Colocated). Where it is false, w8y sends a
	// command per key.
	Colocated bool
}

// NormalizePrefix forces a non-empty prefix to end in ':', as the first w8y
// did, so "-k work" and "-k work:" name the same keys.
func NormalizePrefix(prefix string) string {
	if prefix == "" || strings.HasSuffix(prefix, ":") {
		return prefix
	}
	return prefix + ":"
}

// List is the circular list of work items.
func (k Keys) List() string { return k.Prefix + "list" }

// Lock is the lock key of item: a string holding its holder's token, with
// an expiry.
func (k Keys) Lock(item string) string { return k.Prefix + "lock:" + item }

// Cooldown is the key that keeps item from running after a success until it
// expires: any key there pauses the item, so an operator can set one too.
func (k Keys) Cooldown(item string) string { return k.Prefix + "cooldown:" + item }

// Backoff is the key that keeps item from running after a failure until it
// expires; its expiry is the current failure delay.
func (k Keys) Backoff(item string) string { return k.Prefix + "backoff:" + item }

// Pause is the key that an operator sets (w8yctl pause) to keep item from
// being taken anywhere until it is deleted (w8yctl resume) or expires: a
// hash of who paused it, when and why. Like a cooldown, any key there
// pauses the item, whatever its type.
func (k Keys) Pause(item string) string { return k.Prefix + "pause:" + item }

// Settings is item's own settings (w8yctl set ITEM): a hash of the
// settings that an operator gave the item (see internal/settings for its
// fields: cooldown, timeout, failure_backoff, schedule), each value as the
// command line writes it, which every worker applies when it takes the
// item in place of its own options. No expiry: it lasts until w8yctl unset
// or w8yctl remove deletes it. Workers only read it, in the take's own
// call where the item's keys are colocated with the list.
func (k Keys) Settings(item string) string { return k.Prefix + "settings:" + item }

// State is the hash that records item's runs, among them its consecutive
// failures, which the failure backoff doubles with.
func (k Keys) State(item string) string { return k.Prefix + "state:" + item }

// Events is the capped stream of runs' starts and ends.
func (k Keys) Events() string { return k.Prefix + "events" }

// Due is the sorted set of when items may run again: member an item, score
// the Unix millisecond at which its lock, cooldown or backoff key will have
// expired, as far as w8y knows. w8y writes it where an item's keys are
// colocated, at each take and finish, and idle workers read only the
// entries that have come due instead of the whole list. An entry with a
// score in the past (0 for "now") makes an idle worker try the item at once.
func (k Keys) Due() string { return k.Prefix + "due" }

// Fence is the list's fencing token: a counter, without expiry, that every
// take increments in the take's own round trip. A run's child gets its value
// as W8Y_FENCE, so that a storage system that remembers the highest token
// it has seen can refuse a write from a run that lost its lock to a later
// one.
func (k Keys) Fence() string { return k.Prefix + "fence" }

// Sweep is the key whose expiry says when the fleet's next sweep of the
// whole list is due (see internal/take's index.lua): while it exists, no
// look makes a step of one. The step that ends a sweep sets it, for the
// sweep's interval (take.SweepEvery); its value is when, in Unix
// milliseconds.
func (k Keys) Sweep() string { return k.Prefix + "sweep" }

// Swept is how far the sweep under way has come, from the list's tail:
// "COVERED LENGTH", the items read and the list's length then. It expires
// after twice the longest interval between sweeps.
func (k Keys) Swept() string { return k.Prefix + "swept" }

// Seen is how much of the list, from its head, workers have already tried
// (an integer, without expiry): the items from there to the tail are the
// ones appended since, which every take tries before the due index (see
// internal/take's look.lua). A rotation moves it back by the items it moved
// to the tail while appended items wait after it.
func (k Keys) Seen() string { return k.Prefix + "seen" }

// Untried is how many items at the list's head no worker has tried since
// w8y first saw the list (an integer, without expiry): the whole list, the
// first time. Takes pass over them, rotating them, before the fleet relies
// on the due index, the appended items and the sweep.
func (k Keys) Untried() string { return k.Prefix + "untried" }

// Running is the set of the places in use under --fleet-max-running: the
// lock key of each run that took a place. A place is in use while that lock
// exists, so the lock is the place's lease: a run that ends deletes its lock
// and its member in one script, and a member whose lock is gone (its worker
// died, or gave the lock back) is dropped by the next take that finds the
// places all taken. A worker that dies frees its place when its lock
// expires, and never before. Takes write it only where an item's keys are
// colocated with the list.
func (k Keys) Running() string { return k.Prefix + "running" }

// FleetMax is the --fleet-max-running that the last take under a cap
// enforced (an integer), which w8yctl status and the dashboard show beside
// the places in use; a take without a cap deletes it.
func (k Keys) FleetMax() string { return k.Prefix + "fleet-max-running" }

// Starts is the log of the fleet's latest starts under --fleet-rate: a list
// of Unix milliseconds on Redis' clock, newest first, which every take
// under a rate checks (may the N-th newest start be more than the rate's
// window ago?) and pushes its own start to, in the same call as it takes
// the lock (see internal/take's rate.lua). It keeps N entries (or as many
// as a larger N once made it keep), and expires a second after the longest
// window that a take pushed into it. Takes write it only where an item's
// keys are colocated with the list.
func (k Keys) Starts() string { return k.Prefix + "starts" }

// FleetRate is the --fleet-rate that the last take under a rate enforced,
// "N/MS" (N starts per MS milliseconds), which w8yctl status and the
// dashboard show beside the starts in its window; a take without a rate
// deletes it.
func (k Keys) FleetRate() string { return k.Prefix + "fleet-rate" }

// Worker is the registry entry of the live worker whose holder token is
// holder (see Workers): a hash of what it is and what it runs now (the
// Worker* fields), with an expiry that the worker's beat pushes back, so
// that a worker that dies without a word is gone within that expiry.
func (k Keys) Worker(holder string) string { return k.Prefix + "worker:" + holder }

// Workers is the registry of live workers: a sorted set of holder tokens,
// each scored with the Unix millisecond at which its entry (Worker) expires
// unless its worker beats again. A member whose score has passed is a dead
// worker's: readers skip it, and live workers' beats drop it.
func (k Keys) Workers() string { return k.Prefix + "workers" }

// Looking is the part of the registry that looks for work: a sorted set
// like Workers of the continuous workers that have a free slot (and so
// look at the due index while idle). Its live count spaces each worker's
// looks, so that the fleet's looks together come at a rate that does not
// grow with the fleet.
func (k Keys) Looking() string { return k.Prefix + "looking" }

// Wake is the list that wakes an idle worker: each worker that waits for
// work blocks on it (BLPOP), and w8y's own writes that make an item
// takeable now push a token to it (w8yctl run-now, add and resume, a finish
// that leaves its item due or frees a place of --fleet-max-running). A
// token wakes one waiting worker, the one that has waited longest, so that
// one run-now does not send the whole fleet after one item. It holds at
// most WakeMost tokens and expires WakeTTL after the last push: a token
// that no worker was waiting for wakes the next one to wait, once, for
// nothing.
func (k Keys) Wake() string { return k.Prefix + "wake" }

// WakeOf is the list that wakes the worker whose holder token is holder
// alone: a waiting worker blocks on it beside Wake, and pushes to it itself
// to end its own wait early (a stop signal, a child that ended).
func (k Keys) WakeOf(holder string) string { return k.Prefix + "wake:" + holder }

const (
	// WakeMost is the most tokens Wake holds: enough to wake a worker for
	// each of a burst of items made due at once, few enough that tokens
	// pushed while no worker waits cost the next waiters a look each.
	WakeMost = 16
	// WakeTTL is how long Wake lives after its last push.
	WakeTTL = time.Minute
)

// The counts' indexes: sorted sets that every w8y writer keeps beside an
// item's keys, member the item, score the Unix millisecond (on Redis'
// clock) at which the key they mirror expires, +inf for one without
// expiry. With the due index, whose entries in the future are the items
// held by a lock, a cooldown, a backoff or a pause, they let w8y --status
// count the whole list by state with ZCOUNT in O(log n), without reading
// it (see internal/status's counts.lua). Entries whose score has passed
// count for nothing; the step that ends the fleet's sweep drops them.
// They are kept only where an item's keys are colocated with the list.

// Locks mirrors the items' locks that w8y's takes set: each take adds the
// lock's expiry, each refresh moves it, the release removes it.
func (k Keys) Locks() string { return k.Prefix + "locks" }

// Pauses mirrors the operators' pauses (w8yctl pause, resume, run-now,
// remove).
func (k Keys) Pauses() string { return k.Prefix + "pauses" }

// Backoffs mirrors the failure backoffs that finishes set.
func (k Keys) Backoffs() string { return k.Prefix + "backoffs" }

// Failing is the items whose consecutive_failures is more than 0, scored
// with their state hash's expiry: a failure adds it, a success removes
// it, and every write that pushes the state hash's expiry back moves it.
func (k Keys) Failing() string { return k.Prefix + "failing" }

// Counted is what only a whole read of the list can count (items held
// twice, items that no child can be given, locks of another type), as the
// last such read found it: a hash of the Counted* fields, which w8y
// --status, the dashboard and w8yctl check write after a whole read, and
// a summary that does not read the list shows.
func (k Keys) Counted() string { return k.Prefix + "counted" }

// Fields of the Counted hash.
const (
	CountedDuplicates = "duplicates"
	CountedBlocked    = "blocked"
	CountedInvalid    = "invalid"
	// CountedAt is when the read ended, in Unix milliseconds.
	CountedAt = "at"
)

// Fields of a worker's registry hash (see Worker).
const (
	WorkerHolder  = "holder"
	WorkerHost    = "host"
	WorkerPID     = "pid"
	WorkerVersion = "version"
	// WorkerStarted is when the worker started, in Unix milliseconds.
	WorkerStarted = "started"
	// WorkerState is WorkerIdle or WorkerBusy.
	WorkerState = "state"
	// WorkerSince is when the worker became idle or busy, in Unix
	// milliseconds.
	WorkerSince = "since"
	// WorkerRunning is what it runs now: for each item, the Unix
	// millisecond its run started, a space and the item, the items
	// separated by NUL bytes (which no item holds); "" when idle.
	WorkerRunning = "running"
	// WorkerMode is "continuous" or "one-shot".
	WorkerMode = "mode"
)

// States of a registered worker: busy while it runs at least one item.
const (
	WorkerIdle = "idle"
	WorkerBusy = "busy"
)

// Cancel is item's cancel request: a hash, with an expiry, that asks the
// worker holding item's lock to stop its child (see CancelRequest). The
// holder reads it in the round trip that refreshes the lock, and deletes it
// in the one that finishes the run.
func (k Keys) Cancel(item string) string { return k.Prefix + "cancel:" + item }

// Fields of a cancel request's hash.
const (
	// CancelHolder is the lock token that the request is aimed at: the
	// value the lock held when the request was made. Only a run under that
	// token heeds it.
	CancelHolder = "holder"
	// CancelReason is why it was asked for, as the operator wrote it.
	CancelReason = "reason"
	// CancelBy is who asked, as user@host.
	CancelBy = "by"
	// CancelAt is when it was asked for, in Unix milliseconds.
	CancelAt = "at"
	// CancelAsFailure is "1" when the cancelled run counts as a failure of
	// its item, "0" when it does not.
	CancelAsFailure = "as_failure"
)

// CancelRequest is what a cancel request asks (see Keys.Cancel).
type CancelRequest struct {
	// Holder is the lock token the request is aimed at.
	Holder string
	Reason string
	By     string
	At     time.Time
	// AsFailure makes the cancelled run count as a failure of its item:
	// with --failure-backoff it backs off, and its consecutive failures go
	// up. Otherwise a cancelled run counts as neither a success nor a
	// failure.
	AsFailure bool
}

// Fields of the state hash.
const (
	FieldLastStart           = "last_start"
	FieldLastEnd             = "last_end"
	FieldLastExitCode        = "last_exit_code"
	FieldLastDuration        = "last_duration_ms"
	FieldLastHolder          = "last_holder"
	FieldLastFence           = "last_fence"
	FieldLastResult          = "last_result"
	FieldRuns                = "runs"
	FieldFailures            = "failures"
	FieldConsecutiveFailures = "consecutive_failures"
	// FieldLastReason is the reason given for the last run's cancel; it is
	// deleted at the end of any run that was not cancelled.
	FieldLastReason = "last_reason"
	// FieldLastStdout and FieldLastStderr are the last bytes of the last
	// run's stdout and stderr, with --keep-output; deleted at the end of a
	// run that kept none.
	FieldLastStdout = "last_stdout"
	FieldLastStderr = "last_stderr"
	// FieldNextSlot is, under --schedule, the slot that the item's last
	// success keeps it until (Unix milliseconds): when its cooldown ends,
	// which status shows as a clock time. It is written at the end of a
	// success whose cooldown lasts until a slot, and deleted at the end of
	// any other run.
	FieldNextSlot = "next_slot"
)

// Fields of a pause key's hash (see Pause): why, who (user@host) and when
// (Unix milliseconds).
const (
	PauseFieldReason = "reason"
	PauseFieldBy     = "by"
	PauseFieldAt     = "at"
)

// Result is how one run of an item ended, as the state hash's last_result,
// the events' result field and the metrics' result label name it.
type Result string

const (
	// ResultSuccess: the child exited with a code in --exit-codes.
	ResultSuccess Result = "success"
	// ResultFailure: the child exited with any other code, or could not be
	// run at all.
	ResultFailure Result = "failure"
	// ResultTimeout: --timeout fired and the child was stopped.
	ResultTimeout Result = "timeout"
	// ResultLockLost: the lock was lost and the child was stopped.
	ResultLockLost Result = "lock_lost"
	// ResultInterrupted: the child was stopped because w8y itself got a stop
	// signal (which it forwarded to the child), or the stop came before the
	// child started. Such a run says nothing about the item, so it counts
	// neither as a success nor as a failure: no cooldown, no backoff, the
	// count of consecutive failures stays as it was, and the item runs again
	// soon, elsewhere.
	ResultInterrupted Result = "interrupted"
	// ResultCancelled: an operator's cancel request stopped the child. Like
	// an interruption it says nothing about the item, unless the request
	// asked to count it as a failure (see finish.End.Failed).
	ResultCancelled Result = "cancelled"
)

// Results lists every Result, for metrics that show each from the start.
var Results = []Result{ResultSuccess, ResultFailure, ResultTimeout, ResultLockLost, ResultInterrupted, ResultCancelled}

// Failed reports whether r counts against the item: it backs off (with
// --failure-backoff), and its failures and consecutive failures go up. A
// cancelled run may count so too, when its request asks (see
// runs.End.Failed).
func (r Result) Failed() bool {
	return r == ResultFailure || r == ResultTimeout || r == ResultLockLost
}

// Types of the entries of the events stream.
const (
	EventStart    = "start"
	EventFinish   = "finish"
	EventTimeout  = "timeout"
	EventLockLost = "lock_lost"
	// EventCancelled ends a cancelled run; it carries the request's reason
	// and who made it.
	EventCancelled = "cancelled"

	// An operator's change of an item (control.Fleet: w8yctl's verbs and
	// the dashboard's actions), added in the same atomic call as the
	// change, with the item and who made it (EventFieldBy). A pause
	// carries its reason too, and its length (EventFieldForMs) when it
	// ends by itself.
	EventAdd    = "add"
	EventRemove = "remove"
	EventPause  = "pause"
	EventResume = "resume"
	EventRunNow = "run_now"
	// EventSet and EventUnset change an item's own settings (see
	// Keys.Settings): a set carries each setting it gave, an unset each
	// it removed with an empty value.
	EventSet   = "set"
	EventUnset = "unset"
)

// RunEvent reports whether an event of type kind belongs to a run (its
// start or its end), not to an operator's change.
func RunEvent(kind string) bool {
	switch kind {
	case EventStart, EventFinish, EventTimeout, EventLockLost, EventCancelled:
		return true
	}
	return false
}

// Fields of an operator's change in the events stream, beside type and
// item: who made it (user@host, see control.Who), and a pause's reason
// and length in milliseconds.
const (
	EventFieldBy     = "by"
	EventFieldReason = "reason"
	EventFieldForMs  = "for_ms"
)

// Event is the type of the events stream entry that ends a run with r.
func (r Result) Event() string {
	switch r {
	case ResultTimeout:
		return EventTimeout
	case ResultLockLost:
		return EventLockLost
	case ResultCancelled:
		return EventCancelled
	}
	return EventFinish
}
