package take

import (
	"context"
	"testing"
	"time"
)

// cutDeadline bounds each wait of these tests: far above what they take.
const cutDeadline = 10 * time.Second

// runCut runs CutShort in a goroutine and returns what it reports.
func runCut(ctx context.Context, stop <-chan struct{}, grace time.Duration, hangUp func(), take func(context.Context)) <-chan bool {
	out := make(chan bool, 1)
	go func() { out <- CutShort(ctx, stop, grace, hangUp, take) }()
	return out
}

// wait fails t unless out reports within cutDeadline, and returns it.
func wait(t *testing.T, out <-chan bool) bool {
	t.Helper()
	select {
	case hungUp := <-out:
		return hungUp
	case <-time.After(cutDeadline):
		t.Fatal("CutShort did not return")
		return false
	}
}

func TestCutShortWithoutAStopLetsTheTakeFinish(t *testing.T) {
	stop := make(chan struct{})
	hungUp := CutShort(context.Background(), stop, 0, func() { t.Error("hung up without a stop") }, func(ctx context.Context) {
		if ctx.Err() != nil {
			t.Errorf("the take's context ended without a stop: %v", ctx.Err())
		}
	})
	if hungUp {
		t.Error("CutShort reports a hang-up without a stop")
	}
}

func TestCutShortEndsTheTakesContextAtAStop(t *testing.T) {
	stop, started := make(chan struct{}), make(chan struct{})
	out := runCut(context.Background(), stop, cutDeadline, func() { t.Error("hung up on a take that ended with its context") }, func(ctx context.Context) {
		close(started)
		<-ctx.Done()
	})
	<-started
	close(stop)
	if wait(t, out) {
		t.Error("CutShort reports a hang-up on a take that ended with its context")
	}
}

// TestCutShortHangsUpOnATakeThatIgnoresTheStop: a read under way that only
// closing the client ends.
func TestCutShortHangsUpOnATakeThatIgnoresTheStop(t *testing.T) {
	stop, started, closed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	out := runCut(context.Background(), stop, time.Millisecond, func() { close(closed) }, func(context.Context) {
		close(started)
		<-closed
	})
	<-started
	close(stop)
	if !wait(t, out) {
		t.Error("CutShort does not report its hang-up")
	}
}

// TestCutShortWaitsWhenItMayNotHangUp: without hangUp (a run still needs the
// client), the take is waited for, however long it takes.
func TestCutShortWaitsWhenItMayNotHangUp(t *testing.T) {
	stop, started, answered := make(chan struct{}), make(chan struct{}), make(chan struct{})
	out := runCut(context.Background(), stop, 0, nil, func(context.Context) {
		close(started)
		<-answered
	})
	<-started
	close(stop)
	select {
	case <-out:
		t.Fatal("CutShort returned before its take")
	case <-time.After(10 * time.Millisecond):
		// Not a wait for something to happen: a window for a wrong return
		// to show. Its length only bounds how often such a bug is caught.
	}
	close(answered)
	if wait(t, out) {
		t.Error("CutShort reports a hang-up it had no way to make")
	}
}
