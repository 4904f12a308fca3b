package poll

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a test that records how it failed instead of failing,
// for tests of helpers that must fail the test that calls them. Everything
// else (TempDir, Cleanup, Logf) goes to the real test.
type fatalRecorder struct {
	testing.TB
	failure string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatal(args ...any) { r.fail(fmt.Sprint(args...)) }

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }

// Errorf records a failure that lets the test go on, as testing.T's does.
func (r *fatalRecorder) Errorf(format string, args ...any) {
	r.failure += fmt.Sprintf(format, args...) + "\n"
}

// fail ends the goroutine as testing.T's FailNow does, and so must be
// called on one that runRecorded started.
func (r *fatalRecorder) fail(msg string) {
	r.failure = msg
	runtime.Goexit()
}

// runRecorded runs f with a fatalRecorder on a goroutine of its own, which
// a failure ends, and returns how f failed the test, or "".
func runRecorded(t *testing.T, f func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failure
}

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
	failure := runRecorded(t, func(tb testing.TB) {
		waitWithin(tb, 50*time.Millisecond, "the impossible", func() bool { return false })
	})
	if !strings.Contains(failure, "waiting for the impossible") {
		t.Errorf("failure %q does not say what it waited for", failure)
	}
	failure = runRecorded(t, func(tb testing.TB) {
		WaitFor(tb, "the possible", func() bool { return true })
	})
	if failure != "" {
		t.Errorf("WaitFor on a condition that holds failed: %s", failure)
	}
}
