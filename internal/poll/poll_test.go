package poll

import (
	"strings"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	calls := 0
	if !Poll(time.Second, func() bool { calls++; return calls == 3 }) || calls != 3 {
		t.Errorf("Poll of a condition that holds at the third call: %d calls", calls)
	}
	began := time.Now()
	if Poll(100*time.Millisecond, func() bool { return false }) {
		t.Error("Poll of a condition that never holds reported that it held")
	}
	if took := time.Since(began); took < 100*time.Millisecond {
		t.Errorf("Poll gave up after %s, before its bound", took)
	}
}

func TestWaitForFailsWithWhat(t *testing.T) {
	failure := Failure(t, func(tb testing.TB) {
		waitWithin(tb, 50*time.Millisecond, "the impossible", func() bool { return false })
	})
	if !strings.Contains(failure, "waiting for the impossible") {
		t.Errorf("failure %q does not say what it waited for", failure)
	}
	failure = Failure(t, func(tb testing.TB) {
		WaitFor(tb, "the possible", func() bool { return true })
	})
	if failure != "" {
		t.Errorf("WaitFor on a condition that holds failed: %s", failure)
	}
}

// TestRepeat: Repeat calls its step until it is done, and fails with what
// once its bound has passed.
func TestRepeat(t *testing.T) {
	calls := 0
	if failure := Failure(t, func(tb testing.TB) {
		Repeat(tb, time.Second, "the third call", func() bool { calls++; return calls == 3 })
	}); failure != "" || calls != 3 {
		t.Errorf("Repeat of a step done at its third call: %d calls, failure %q", calls, failure)
	}
	failure := Failure(t, func(tb testing.TB) {
		Repeat(tb, 50*time.Millisecond, "the impossible", func() bool { time.Sleep(time.Millisecond); return false })
	})
	if !strings.Contains(failure, "waiting for the impossible") {
		t.Errorf("failure %q does not say what it waited for", failure)
	}
}
