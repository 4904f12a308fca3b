package poll

import (
	"fmt"
	"runtime"
	"testing"
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

// Failure runs f with a test that records how it failed instead of
// failing, on a goroutine of its own, which a failure ends, and returns how
// f failed the test, or "": for the tests of helpers that must fail the
// test that calls them (WaitFor, redistest.Start).
func Failure(t *testing.T, f func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failure
}
