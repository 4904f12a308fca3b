package health

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeClock is a clock that a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func lateBy(h *Heartbeat) time.Duration  { return h.Late() }
func wantLate(t *testing.T, h *Heartbeat, want time.Duration) {
	t.Helper()
	if got := lateBy(h); got != want {
		t.Errorf("late %s, want %s", got, want)
	}
}

func TestHeartbeat(t *testing.T) {
	clock := newFakeClock()
	h := NewHeartbeat(clock.now)
	wantLate(t, h, 0)
	clock.add(Grace)
	wantLate(t, h, 0)
	clock.add(time.Second)
	wantLate(t, h, time.Second)

	// A beat puts it right; an announced pause extends the grace.
	h.Beat(10 * time.Minute)
	clock.add(10*time.Minute + Grace)
	wantLate(t, h, 0)
	clock.add(time.Millisecond)
	wantLate(t, h, time.Millisecond)

	// A nil Heartbeat (no --metrics-addr) ignores beats.
	var none *Heartbeat
	none.Beat(0)
	none.BeatEvery(time.Millisecond)()
}

// TestHeartbeatKeepsAnnouncedPause: with --parallel, a slot may pause (an
// idle pass, a Redis error) while another slot's child runs and beats. The
// child's beats must not cut the pause short: once the child ends, the loop
// beats again only when the pause is over, and is not late before then.
func TestHeartbeatKeepsAnnouncedPause(t *testing.T) {
	clock := newFakeClock()
	h := NewHeartbeat(clock.now)
	h.Beat(10 * time.Minute)
	for range 8 {
		clock.add(ChildBeat)
		h.Beat(0)
	}
	// The child ended after 2 minutes; its last beat was then.
	clock.add(10*time.Minute + Grace - 8*ChildBeat)
	wantLate(t, h, 0)
	clock.add(time.Second)
	wantLate(t, h, time.Second)
}

func TestHeartbeatWhileAChildRuns(t *testing.T) {
	h := NewHeartbeat(time.Now)
	h.mu.Lock()
	h.due = time.Now().Add(-time.Hour)
	h.mu.Unlock()
	if h.Late() == 0 {
		t.Fatal("not late an hour past due")
	}
	stop := h.BeatEvery(time.Millisecond)
	defer stop()
	if h.Late() != 0 {
		t.Error("still late after beatEvery started")
	}
}

func TestRedisProbeCachesItsPing(t *testing.T) {
	clock := newFakeClock()
	pings := 0
	var answer error
	p := &Probe{Now: clock.now, Ping: func(ctx context.Context) error {
		pings++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("PING without a deadline")
		}
		return answer
	}}
	ctx := context.Background()
	for range 5 {
		if err := p.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if pings != 1 {
		t.Errorf("%d PINGs within %s, want 1", pings, probeEvery)
	}
	answer = errors.New("connection refused")
	if err := p.Check(ctx); err != nil {
		t.Errorf("the cached outcome changed before %s: %v", probeEvery, err)
	}
	clock.add(probeEvery)
	if err := p.Check(ctx); err == nil || pings != 2 {
		t.Errorf("after %s: err %v, %d PINGs; want the new error from a second PING", probeEvery, err, pings)
	}
	answer = nil
	clock.add(probeEvery)
	if err := p.Check(ctx); err != nil || pings != 3 {
		t.Errorf("after recovery: err %v, %d PINGs", err, pings)
	}
}
