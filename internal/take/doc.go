// Package take takes w8y's work items: it chooses the next item of the
// circular list whose lock is free and that nothing holds back (a cooldown,
// a failure's backoff, an operator's pause), takes its lock, and hands the
// caller a Taken, from which the caller builds the lease it refreshes and
// releases. Each Lua script lives beside the Go that builds its arguments
// and decodes its reply.
//
// Every take of a worker starts with a look (Taker.LookFirst), where one
// script reaches an item's keys; a pass over the whole list is left to the
// fleet's sweep, or to where the look cannot be used. An item is taken in
// one of four ways, all through Pass.Take:
//
//   - the look via the appended items and the due index (look.go,
//     look.lua): a one-shot run, a worker's first take, a busy worker's
//     next and an idle worker's look try only the items appended since the
//     fleet last looked (after the shared "seen" mark) and those whose due
//     entry has passed, at a cost that does not grow with the list; while
//     an idle worker's last look found nothing, its next starts with a
//     probe (look.go), a pipeline of plain reads that runs the script only
//     when there is something to find;
//   - the sweep (look.go, sweepEvery): when a look finds nothing, it elects
//     one worker of the fleet, now and then, to pass over the whole list,
//     which notices what the look cannot (a key deleted by hand);
//   - the pass in batches, server-side (batch.go, batch.lua): one call
//     rotates the list and tries a batch of candidates' locks, for the
//     sweep and --until-idle, where the list and every item's keys live on
//     one server; it leaves Redis as the per-candidate pass does;
//   - the pass per candidate (each.go, each.lua): LMOVE the list's head
//     to its tail and try that candidate's lock, two round trips a
//     candidate, for where an item's keys may live on other servers than
//     the list (Redis Cluster without a hash tag): every take there is a
//     pass, whose cost grows with the list.
//
// Beside them, TakeNamed (named.go) takes the lock of one item that the
// caller names (w8y --item), without the list, as the pass per candidate
// takes a candidate's; and FinishThenLook (next.go, next.lua) finishes a
// busy worker's run and makes the look for its next item in the same
// call, so that its item costs one round trip instead of two.
//
// Every way increments the list's fencing token and records the start of
// the run (see runs.Recorder) as part of the take, and a take that too few
// replicas confirmed (--replica-acks) comes back as an UnconfirmedError
// holding the lock to give back.
package take
