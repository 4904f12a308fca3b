package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/schema"
)

// fakeLock is a Lock in memory: each Refresh is counted and answered with
// what the test set, and extends the expiry on success.
type fakeLock struct {
	mu        sync.Mutex
	ttl       time.Duration
	expires   time.Time
	refreshes int
	// fail, lost and cancel are what the next refreshes answer.
	fail   error
	lost   bool
	cancel *schema.CancelRequest
}

func (f *fakeLock) Refresh(context.Context) (*schema.CancelRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshes++
	switch {
	case f.lost:
		return nil, fmt.Errorf("%w: someone else's", ErrLost)
	case f.fail != nil:
		return nil, f.fail
	}
	f.expires = time.Now().Add(f.ttl)
	return f.cancel, nil
}

func (f *fakeLock) Expiry() (time.Duration, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ttl, f.expires
}

func (f *fakeLock) String() string { return `"lock:a"` }

func (f *fakeLock) set(change func(f *fakeLock)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func (f *fakeLock) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refreshes
}

func newFake(ttl time.Duration) *fakeLock {
	return &fakeLock{ttl: ttl, expires: time.Now().Add(ttl)}
}

// deadline bounds every wait of these tests.
const deadline = 10 * time.Second

// waitRefreshes waits until l has been refreshed at least n times.
func waitRefreshes(t *testing.T, l *fakeLock, n int) {
	t.Helper()
	if !poll.Poll(deadline, func() bool { return l.count() >= n }) {
		t.Fatalf("%d refreshes after %s, want %d", l.count(), deadline, n)
	}
}

// lostWithin waits for k to report its lock lost.
func lostWithin(t *testing.T, k *Lease) error {
	t.Helper()
	select {
	case err := <-k.Lost():
		return err
	case <-time.After(deadline):
		t.Fatal("the lease never reported the lock lost")
		return nil
	}
}

// TestLeaseRefreshesUntilStopped: a lease refreshes about every third of
// the TTL, and not after Stop.
func TestLeaseRefreshesUntilStopped(t *testing.T) {
	l := newFake(150 * time.Millisecond)
	k := Keep(context.Background(), l, 20*time.Millisecond, zerolog.Nop())
	waitRefreshes(t, l, 3)
	k.Stop()
	n := l.count()
	time.Sleep(200 * time.Millisecond)
	if l.count() != n {
		t.Errorf("refreshed after Stop: %d, then %d", n, l.count())
	}
	select {
	case err := <-k.Lost():
		t.Errorf("lost: %v", err)
	default:
	}
}

// TestLeaseLost: a refresh that finds the lock another's is reported at
// once; refreshes that keep failing are reported once less than the give-up
// time is left of the lease, and not before.
func TestLeaseLost(t *testing.T) {
	l := newFake(300 * time.Millisecond)
	k := Keep(context.Background(), l, 50*time.Millisecond, zerolog.Nop())
	defer k.Stop()
	l.set(func(f *fakeLock) { f.lost = true })
	if err := lostWithin(t, k); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "someone else's") {
		t.Errorf("lost: %v", err)
	}

	l = newFake(300 * time.Millisecond)
	l.set(func(f *fakeLock) { f.fail = errors.New("connection refused") })
	k = Keep(context.Background(), l, 50*time.Millisecond, zerolog.Nop())
	defer k.Stop()
	err := lostWithin(t, k)
	_, expires := l.Expiry()
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), `could not refresh "lock:a" before its lease ran out`) {
		t.Errorf("failing refreshes: %v", err)
	}
	if left := time.Until(expires); left > 50*time.Millisecond {
		t.Errorf("reported lost with %s of the lease left, more than the give-up time", left)
	}
	if l.count() < 3 {
		t.Errorf("%d refreshes tried before giving up: failed ones are retried", l.count())
	}
}

// TestLeasePauseAndResume: a paused lease refreshes nothing; Resume within
// the lease it knows of goes on without asking Redis, and past the give-up
// point refreshes first: a lock found lost is reported on Lost before kill
// is called.
func TestLeasePauseAndResume(t *testing.T) {
	l := newFake(time.Hour)
	k := Keep(context.Background(), l, time.Millisecond, zerolog.Nop())
	defer k.Stop()
	k.Pause()
	if err := k.Resume(func() { t.Error("killed within the lease") }); err != nil || l.count() != 0 {
		t.Errorf("resumed within the lease: %v, %d refreshes", err, l.count())
	}

	l = newFake(300 * time.Millisecond)
	k = Keep(context.Background(), l, 50*time.Millisecond, zerolog.Nop())
	defer k.Stop()
	k.Pause()
	n := l.count()
	l.set(func(f *fakeLock) { f.expires, f.lost = time.Now(), true })
	time.Sleep(150 * time.Millisecond)
	if l.count() != n {
		t.Errorf("refreshed while paused")
	}
	killed := false
	err := k.Resume(func() {
		killed = true
		select {
		case <-k.Lost():
		default:
			t.Error("kill was called before the loss was reported")
		}
	})
	if !errors.Is(err, ErrLost) || !killed {
		t.Errorf("resumed past the give-up point, lock lost: %v, killed %v", err, killed)
	}
}

// TestLeaseDeliversCancel: the first cancel request a refresh finds is
// delivered once, and the lease goes on refreshing while the child stops.
func TestLeaseDeliversCancel(t *testing.T) {
	l := newFake(90 * time.Millisecond)
	asked := schema.CancelRequest{Holder: "ours", Reason: "stop", By: "op"}
	l.set(func(f *fakeLock) { f.cancel = &asked })
	k := Keep(context.Background(), l, 10*time.Millisecond, zerolog.Nop())
	defer k.Stop()
	select {
	case req := <-k.Cancelled():
		if req != asked {
			t.Errorf("delivered %+v, want %+v", req, asked)
		}
	case <-time.After(deadline):
		t.Fatal("no request delivered")
	}
	waitRefreshes(t, l, l.count()+3)
	select {
	case req := <-k.Cancelled():
		t.Errorf("a second request delivered: %+v", req)
	default:
	}
}

// holder is a Holder that passes on what it is told.
type holder chan time.Time

func (h holder) HoldUntil(until time.Time) { h <- until }

// told waits for h to be told until when the lock is held.
func (h holder) told(t *testing.T) time.Time {
	t.Helper()
	select {
	case until := <-h:
		return until
	case <-time.After(deadline):
		t.Fatal("the holder was not told")
		return time.Time{}
	}
}

// TestLeaseTellsTheHolder: the holder (the guard) is told until when the
// lock is held at once, and after each refresh its new expiry, the refresh
// that Resume makes after a pause included; and nothing after Stop.
func TestLeaseTellsTheHolder(t *testing.T) {
	l := newFake(150 * time.Millisecond)
	_, last := l.Expiry()
	k := Keep(context.Background(), l, 20*time.Millisecond, zerolog.Nop())
	h := make(holder, 100)
	k.Hold(h)
	if got := h.told(t); !got.Equal(last) {
		t.Errorf("told %s at once, want the lock's expiry %s", got, last)
	}
	for range 3 {
		got := h.told(t)
		if !got.After(last) {
			t.Errorf("told %s after a refresh, want later than %s", got, last)
		}
		last = got
	}

	k.Pause()
	for len(h) > 0 {
		last = <-h
	}
	if got := k.Until(); !got.Equal(last) {
		t.Errorf("Until is %s, want what the holder was told last, %s", got, last)
	}
	// Past the give-up point, Resume refreshes the lock, and tells.
	past := time.Now()
	l.set(func(f *fakeLock) { f.expires = past })
	if err := k.Resume(func() { t.Error("killed") }); err != nil {
		t.Fatal(err)
	}
	if got := h.told(t); !got.After(past) {
		t.Errorf("told %s after Resume's refresh, want later than %s", got, past)
	}
	k.Stop()
	for len(h) > 0 {
		<-h
	}
	time.Sleep(200 * time.Millisecond)
	if len(h) > 0 {
		t.Errorf("told %s after Stop", <-h)
	}
}

// TestRetryEvery: a failed refresh is retried within 50ms, a short lease's
// a few times within one refresh period, never more often than every 10ms.
func TestRetryEvery(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		time.Minute: 50 * time.Millisecond, 5 * time.Second: 50 * time.Millisecond,
		300 * time.Millisecond: 20 * time.Millisecond, 100 * time.Millisecond: 10 * time.Millisecond,
	} {
		if got := RetryEvery(ttl); got != want {
			t.Errorf("RetryEvery(%s) = %s, want %s", ttl, got, want)
		}
	}
}
