// Package take takes w8y's work items: it chooses the next item of the
// circular list whose lock is free and that nothing holds back (a cooldown,
// a failure's backoff, an operator's pause), takes its lock, and hands the
// caller a Taken, from which the caller builds the lease it refreshes and
// releases. Each Lua script lives beside the Go that builds its arguments
// and decodes its reply.
//
// An item is taken in one of four ways, all through Pass.Take:
//
//   - the busy pass per candidate (each.go, trylock.lua): LMOVE the list's
//     head to its tail and try that candidate's lock, two round trips a
//     candidate, for where an item's keys may live on other servers than
//     the list (Redis Cluster without a hash tag);
//   - the busy pass in batches, server-side (batch.go, take.lua): one call
//     rotates the list and tries a batch of candidates' locks, for where
//     the list and every item's keys live on one server; it leaves Redis as
//     the per-candidate pass does;
//   - the idle look via the due index (look.go, due.lua): an idle worker
//     tries only what came due or was appended since its last look, at a
//     cost that does not grow with the list;
//   - the sweep (look.go, sweepEvery): now and then the look hands one idle
//     worker of the fleet a whole pass over the list, which notices what
//     the due index cannot (a key deleted by hand).
//
// Every way increments the list's fencing token and records the start of
// the run (see runs.Recorder) as part of the take, and a take that too few
// replicas confirmed (--replica-acks) comes back as an UnconfirmedError
// holding the lock to give back.
package take
