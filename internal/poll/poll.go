// Package poll is how tests wait on state (Redis, a file, a process, a
// line of output) rather than on a guessed sleep: ask again until it holds,
// within a bound that fails the test instead of hanging the suite. It needs
// no Redis.
package poll

import (
	"testing"
	"time"
)

// Timeout bounds every wait in the tests, so that a broken w8y or a server
// that never gets ready fails a test instead of hanging the suite. It is
// generous because the tests run in parallel under the race detector.
const Timeout = 30 * time.Second

// pollEvery is how often Poll asks again: often enough that a wait ends soon
// after its condition holds, rarely enough that asking Redis costs little.
const pollEvery = 10 * time.Millisecond

// Poll calls cond until it holds or d has passed, and reports whether it
// held. It is for the waits that report their own failure, with what they
// saw, or that do not fail at all; WaitFor is the usual way.
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
	return true
}

// WaitFor polls cond until it holds, and fails the test with what after
// Timeout. Tests wait on state this way (Redis, a file, a process) rather
// than on a guessed sleep. cond runs on the test's goroutine, so it may fail
// the test itself.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	waitWithin(tb, Timeout, what, cond)
}

// waitWithin is WaitFor with a bound of its own, so that its own test need
// not wait out Timeout to see it fail.
func waitWithin(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Poll(d, cond) {
		tb.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// Repeat calls step until it reports that it is done, with no pause between
// calls: for waits whose every step blocks or works itself (a blocking pop
// of the next run, a key moved to another node, a take), where a pause
// would only slow them. It fails the test with what once d has passed.
// step runs on the test's goroutine, so it may fail the test itself.
func Repeat(tb testing.TB, d time.Duration, what string, step func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !step() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
	}
}
