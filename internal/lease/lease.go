// Package lease keeps a lock alive while what runs under it runs: it
// refreshes the lock about every third of its TTL, retries a failed
// refresh often enough to ride out a Redis restart or failover, reports the
// lock lost while there is still time to stop the child before the server
// could hand the item to another, passes on a cancel request that a refresh
// found, tells the child's guard until when the lock is held (a Holder),
// and pauses while w8y is stopped (job control sees a Lease as a
// jobctl.Pausable). It knows the lock only as a Lock, and the guard as a
// Holder: nothing of Redis, of the child or of its callers.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/schema"
)

// ErrLost is reported when a held lock is no longer ours, or could not be
// refreshed before its lease was about to run out.
var ErrLost = errors.New("lock lost")

// Lock is the lock a Lease keeps alive.
type Lock interface {
	// Refresh extends the lock by its TTL if it is still ours, and
	// returns an error that wraps ErrLost if it is not. In the same call it
	// reads the cancel request aimed at it, if any.
	Refresh(ctx context.Context) (*schema.CancelRequest, error)
	// Expiry is the lock's TTL, and the earliest moment the server may
	// expire it as last set or refreshed.
	Expiry() (ttl time.Duration, expires time.Time)
	// String names the lock in messages.
	String() string
}

// Holder is told until when the lock is held: the guard of the child that
// runs under it (proc.Child), which stops the child itself if that moment
// comes with no newer word, as when w8y is stopped past the lease.
type Holder interface {
	HoldUntil(until time.Time)
}

// Lease keeps a lock alive in the background until stopped, and reports on
// Lost if it could not. It is a jobctl.Pausable.
type Lease struct {
	// mu guards until and holder, and keeps the holder's words in order.
	mu sync.Mutex
	// until is the lock's expiry as last set or refreshed (see Lock.Expiry).
	until  time.Time
	holder Holder

	lost chan error
	// report sends a loss on lost, once.
	report func(error)
	// cancelled delivers the first cancel request that a refresh found;
	// noticed is set once it was sent, by the refreshing goroutine alone.
	cancelled chan schema.CancelRequest
	noticed   bool
	cancel    context.CancelFunc
	done      chan struct{}
	// pause and resume carry Pause's and Resume's requests to the
	// refresher.
	pause  chan chan struct{}
	resume chan resumeRequest
}

// resumeRequest is Resume's request: kill is called if the lock was lost,
// once the loss is reported; reply gets the outcome.
type resumeRequest struct {
	kill  func()
	reply chan error
}

// Keep starts refreshing l about every third of its TTL. If the lock stops
// being ours, or refreshes keep failing until less than giveUp is left of
// the lease, it sends ErrLost on Lost and stops: giveUp is the time the
// caller needs to stop the child before the server could hand the item to
// another.
func Keep(ctx context.Context, l Lock, giveUp time.Duration, log zerolog.Logger) *Lease {
	ctx, cancel := context.WithCancel(ctx)
	k := &Lease{
		lost: make(chan error, 1), cancelled: make(chan schema.CancelRequest, 1), cancel: cancel, done: make(chan struct{}),
		pause: make(chan chan struct{}), resume: make(chan resumeRequest),
	}
	_, k.until = l.Expiry()
	var once sync.Once
	k.report = func(err error) { once.Do(func() { k.lost <- err }) }
	go func() {
		defer close(k.done)
		if err := hold(ctx, l, giveUp, k, log); err != nil && ctx.Err() == nil {
			k.report(err)
		}
	}()
	return k
}

// Until is until when the lock is held, as last set or refreshed: the
// earliest moment the server may expire it.
func (k *Lease) Until() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.until
}

// Hold tells h until when the lock is held, now and after each refresh,
// until the lease stops.
func (k *Lease) Hold(h Holder) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.holder = h
	h.HoldUntil(k.until)
}

// refreshed notes the expiry of l after a refresh, and tells the holder.
func (k *Lease) refreshed(l Lock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, k.until = l.Expiry()
	if k.holder != nil {
		k.holder.HoldUntil(k.until)
	}
}

// Lost delivers at most one error, ErrLost wrapped with its cause.
func (k *Lease) Lost() <-chan error { return k.lost }

// Cancelled delivers at most one request: the first cancel request aimed at
// this lock's token that a refresh found. The lease goes on refreshing
// after it, so that the lock stays ours while the child is stopped.
func (k *Lease) Cancelled() <-chan schema.CancelRequest { return k.cancelled }

// noteCancel passes req on to Cancelled, unless it is nil or one was
// passed on already.
func (k *Lease) noteCancel(req *schema.CancelRequest) {
	if req == nil || k.noticed {
		return
	}
	k.noticed = true
	k.cancelled <- *req
}

// Stop ends the refreshing and waits for it to finish.
func (k *Lease) Stop() {
	k.cancel()
	<-k.done
}

// Pause stops the refreshing until Resume, and returns once no refresh is
// under way: whatever runs under the lock is about to be stopped, and
// nothing will keep the lock alive until Resume.
func (k *Lease) Pause() {
	paused := make(chan struct{})
	select {
	case k.pause <- paused:
		<-paused
	case <-k.done:
	}
}

// Resume goes on refreshing after Pause. While paused, nothing kept the lock
// alive: if less than the give-up time may be left of it (see keepAlive),
// it may have expired and be another's, so Resume first refreshes it. If it
// is no longer ours, Resume reports the loss on Lost, calls kill, which must
// end what ran under it at once, and returns the loss.
func (k *Lease) Resume(kill func()) error {
	req := resumeRequest{kill: kill, reply: make(chan error, 1)}
	select {
	case k.resume <- req:
		return <-req.reply
	case <-k.done:
		// The lease ended while paused: the run is being stopped anyway.
		return nil
	}
}

// verifyTimeout bounds the refresh that checks a lock after a pause: the
// child is stopped meanwhile, and a person waits for it at a terminal.
const verifyTimeout = 5 * time.Second

// hold runs the refresh loop until ctx is done or the lock is lost, pausing
// when k asks.
func hold(ctx context.Context, l Lock, giveUp time.Duration, k *Lease, log zerolog.Logger) error {
	ttl, _ := l.Expiry()
	period := ttl / 3
	retry := RetryEvery(ttl)
	// failing is when the refreshes began to fail, or zero while they
	// succeed: an outage is told of once as it starts and once as it ends,
	// not at every retry. (log names the item and its lock already.)
	var failing time.Time
	timer := time.NewTimer(period)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case paused := <-k.pause:
			close(paused)
			var req resumeRequest
			select {
			case <-ctx.Done():
				return ctx.Err()
			case req = <-k.resume:
			}
			found, refreshed, err := verify(ctx, l, giveUp)
			k.noteCancel(found)
			if refreshed {
				k.refreshed(l)
			}
			if err != nil && ctx.Err() == nil {
				// Reported before the kill, so that whoever sees the child
				// end knows why.
				k.report(err)
				req.kill()
			}
			req.reply <- err
			if err != nil {
				return err
			}
			timer.Reset(period)
			continue
		case <-timer.C:
		}
		_, expires := l.Expiry()
		deadline := expires.Add(-giveUp)
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: could not refresh %s before its lease ran out", ErrLost, l)
		}
		// No refresh may run past the moment the child must be stopped.
		callCtx, cancel := context.WithDeadline(ctx, deadline)
		req, err := l.Refresh(callCtx)
		cancel()
		k.noteCancel(req)
		switch {
		case err == nil:
			k.refreshed(l)
			if !failing.IsZero() {
				down := time.Since(failing)
				log.Info().Float64("failing_s", down.Seconds()).
					Msgf("lock refreshed again, after %s of failed refreshes", down.Round(time.Millisecond))
				failing = time.Time{}
			}
			timer.Reset(period)
		case errors.Is(err, ErrLost):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			if failing.IsZero() {
				failing = time.Now()
				log.Warn().Err(err).Msgf("lock refresh failed; retrying every %s until %s before the lease ends", retry, giveUp.Round(time.Millisecond))
			}
			timer.Reset(min(retry, max(time.Until(deadline), 0)))
		}
	}
}

// RetryEvery is how soon a failed refresh of a lock that expires after
// ttl is tried again. A Redis that restarts or fails over is back within
// seconds, and the lease must not run out meanwhile: each retry dials anew
// (see redisconn's failOnUse), so the lock is refreshed within 50ms of
// Redis' return. Against a Redis that refuses connections, a retry costs
// a refused dial on each of go-redis' two tries; against one that does not
// answer, each retry first waits out its own timeout. A short lease is
// retried more often, a few times within one refresh period (a fifteenth
// of the TTL, but at least 10ms apart).
func RetryEvery(ttl time.Duration) time.Duration {
	return min(max(ttl/15, 10*time.Millisecond), 50*time.Millisecond)
}

// verify makes sure, after a pause, that the lock is still ours. Within the
// lease as last refreshed, less giveUp, it is: no one else can have it. Past
// that, it may have expired, and only a refresh that finds our token tells.
// Any other answer, an unreachable Redis included, counts as lost: what ran
// under the lock must not run again on a guess.
// A refresh that it makes also returns the cancel request it found, if any;
// refreshed says whether it made one that succeeded.
func verify(ctx context.Context, l Lock, giveUp time.Duration) (req *schema.CancelRequest, refreshed bool, err error) {
	if _, expires := l.Expiry(); time.Now().Before(expires.Add(-giveUp)) {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	req, err = l.Refresh(ctx)
	if err == nil || errors.Is(err, ErrLost) {
		return req, err == nil, err
	}
	return nil, false, fmt.Errorf("%w: could not check %s after w8y was stopped: %w", ErrLost, l, err)
}
