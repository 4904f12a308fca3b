package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	_ "embed"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/items"
	"github.com/w8y/w8y/internal/lua"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/runs"
	"github.com/w8y/w8y/internal/schema"
)

// ErrLockLost is reported when a held lock no longer carries our token, or
// could not be refreshed before its lease was about to run out.
var ErrLockLost = errors.New("lock lost")

// Lock is an item's lock that this run holds in Redis: the key's value is
// Token, and the key expires TTL after it was last set or refreshed.
type Lock struct {
	Key   string
	Token string
	TTL   time.Duration

	// Item is the item the lock is for.
	Item string
	// Fence is the list's fencing token that this take got (see
	// schema.Keys.Fence), which the child gets as W8Y_FENCE.
	Fence int64
	// Taken is when the take that got the lock was sent: the run's start.
	Taken time.Time
	// CancelKey is the item's cancel request, which each refresh reads in
	// the same call; "" where one script may not name it with the lock
	// (see schema.Keys.Colocated), and no cancel can be asked for.
	CancelKey string

	client lockClient
	// acks is --replica-acks: how many replicas must confirm a refresh for
	// it to count (see redisconn.RunConfirmed).
	acks int
	// expires is the earliest moment the server may expire the key: when the
	// command that last set its expiry was sent, plus TTL. The server applies
	// TTL when it receives the command, which is never earlier.
	expires time.Time
}

// lockClient is the part of the Redis client that a lock needs: scripts,
// pipelined with WAIT for --replica-acks, and a pipeline, which the take
// and the finish of a run send their per-key commands in where one script
// cannot name all of an item's keys.
type lockClient interface {
	redisconn.ScriptClient
	Pipeline() redis.Pipeliner
}

// quoteKey quotes a key for messages, so odd bytes in items stay visible,
// clipped as items are.
func quoteKey(key string) string { return fmt.Sprintf("%q", items.Clip(key)) }

// newToken returns a lock value unique to this run that tells an operator who
// holds a lock: "host:pid:random".
func newToken() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	random := make([]byte, 6)
	if _, err := rand.Read(random); err != nil {
		return "", fmt.Errorf("make lock token: %w", err)
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(random)), nil
}

// Refresh extends the lock to TTL from now if it still holds our token. It
// returns ErrLockLost if the key is gone or holds another value. In the
// same call it reads the item's cancel request, and returns it when it is
// aimed at our token.
func (l *Lock) Refresh(ctx context.Context) (*schema.CancelRequest, error) {
	sent := time.Now()
	keys := []string{l.Key}
	if l.CancelKey != "" {
		keys = append(keys, l.CancelKey)
	}
	reply, err := redisconn.RunConfirmed(ctx, l.client, lua.Refresh, l.acks, l.TTL, keys, l.Token, l.TTL.Milliseconds())
	if reply == int64(0) {
		return nil, fmt.Errorf("%w: %s no longer holds our token", ErrLockLost, quoteKey(l.Key))
	}
	if err != nil {
		// Not confirmed by the replicas, the extension does not count: a
		// failover now would bring back the lock as it was before it.
		return nil, redisconn.Wrap("refresh lock "+quoteKey(l.Key), err)
	}
	var cancel *schema.CancelRequest
	if fields, ok := reply.([]any); ok && len(fields) == 5 {
		reply, cancel = fields[0], l.cancelRequest(fields[1:])
	}
	if reply != int64(1) {
		return nil, redisconn.Wrap("refresh lock "+quoteKey(l.Key), fmt.Errorf("unexpected reply %v", reply))
	}
	l.expires = sent.Add(l.TTL)
	return cancel, nil
}

// cancelRequest reads the request that lua.Refresh reports: reason, by,
// at and as_failure, as schema.Keys.Cancel's hash holds them.
func (l *Lock) cancelRequest(fields []any) *schema.CancelRequest {
	text := func(i int) string { s, _ := fields[i].(string); return s }
	req := &schema.CancelRequest{Holder: l.Token, Reason: text(0), By: text(1), AsFailure: text(3) == "1"}
	if ms, err := strconv.ParseInt(text(2), 10, 64); err == nil {
		req.At = time.UnixMilli(ms)
	}
	return req
}

// Release deletes the lock if it still holds our token, and reports whether
// it did. A lock that someone else holds now is left alone. It records
// nothing: a run ends with runs.Finisher.Finish, which releases the lock in the
// same round trip as it records the end.
func (l *Lock) Release(ctx context.Context) (bool, error) {
	return runs.Release(ctx, l.client, l.Key, l.Token, l.Item)
}

// lease keeps a Lock alive in the background until stopped, and reports on
// Lost if it could not.
type lease struct {
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

// keepAlive starts refreshing l about every TTL/3. If the lock stops holding
// our token, or refreshes keep failing until less than giveUp is left of the
// lease, it sends ErrLockLost on Lost and stops: giveUp is the time the caller
// needs to stop the child before the server could hand the item to another.
func (l *Lock) keepAlive(ctx context.Context, giveUp time.Duration, log zerolog.Logger) *lease {
	ctx, cancel := context.WithCancel(ctx)
	k := &lease{
		lost: make(chan error, 1), cancelled: make(chan schema.CancelRequest, 1), cancel: cancel, done: make(chan struct{}),
		pause: make(chan chan struct{}), resume: make(chan resumeRequest),
	}
	var once sync.Once
	k.report = func(err error) { once.Do(func() { k.lost <- err }) }
	go func() {
		defer close(k.done)
		if err := l.hold(ctx, giveUp, k, log); err != nil && ctx.Err() == nil {
			k.report(err)
		}
	}()
	return k
}

// Lost delivers at most one error, ErrLockLost wrapped with its cause.
func (k *lease) Lost() <-chan error { return k.lost }

// Cancelled delivers at most one request: the first cancel request aimed at
// this lock's token that a refresh found. The lease goes on refreshing
// after it, so that the lock stays ours while the child is stopped.
func (k *lease) Cancelled() <-chan schema.CancelRequest { return k.cancelled }

// noteCancel passes req on to Cancelled, unless it is nil or one was
// passed on already.
func (k *lease) noteCancel(req *schema.CancelRequest) {
	if req == nil || k.noticed {
		return
	}
	k.noticed = true
	k.cancelled <- *req
}

// Stop ends the refreshing and waits for it to finish.
func (k *lease) Stop() {
	k.cancel()
	<-k.done
}

// Pause stops the refreshing until Resume, and returns once no refresh is
// under way: whatever runs under the lock is about to be stopped, and
// nothing will keep the lock alive until Resume.
func (k *lease) Pause() {
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
func (k *lease) Resume(kill func()) error {
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
func (l *Lock) hold(ctx context.Context, giveUp time.Duration, k *lease, log zerolog.Logger) error {
	period := l.TTL / 3
	retry := refreshRetry(l.TTL)
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
			found, err := l.verify(ctx, giveUp)
			k.noteCancel(found)
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
		deadline := l.expires.Add(-giveUp)
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: could not refresh %s before its lease ran out", ErrLockLost, quoteKey(l.Key))
		}
		// No refresh may run past the moment the child must be stopped.
		callCtx, cancel := context.WithDeadline(ctx, deadline)
		req, err := l.Refresh(callCtx)
		cancel()
		k.noteCancel(req)
		switch {
		case err == nil:
			if !failing.IsZero() {
				down := time.Since(failing)
				log.Info().Float64("failing_s", down.Seconds()).
					Msgf("lock refreshed again, after %s of failed refreshes", down.Round(time.Millisecond))
				failing = time.Time{}
			}
			timer.Reset(period)
		case errors.Is(err, ErrLockLost):
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

// refreshRetry is how soon a failed refresh of a lock that expires after
// ttl is tried again. A Redis that restarts or fails over is back within
// seconds, and the lease must not run out meanwhile: each retry dials anew
// (see redisconn's failOnUse), so the lock is refreshed within 50ms of
// Redis' return. Against a Redis that refuses connections, a retry costs
// a refused dial on each of go-redis' two tries; against one that does not
// answer, each retry first waits out its own timeout. A short lease is
// retried more often, a few times within one refresh period (a fifteenth
// of the TTL, but at least 10ms apart).
func refreshRetry(ttl time.Duration) time.Duration {
	return min(max(ttl/15, 10*time.Millisecond), 50*time.Millisecond)
}

// verify makes sure, after a pause, that the lock is still ours. Within the
// lease as last refreshed, less giveUp, it is: no one else can have it. Past
// that, it may have expired, and only a refresh that finds our token tells.
// Any other answer, an unreachable Redis included, counts as lost: what ran
// under the lock must not run again on a guess.
// A refresh that it makes also returns the cancel request it found, if any.
func (l *Lock) verify(ctx context.Context, giveUp time.Duration) (*schema.CancelRequest, error) {
	if time.Now().Before(l.expires.Add(-giveUp)) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	req, err := l.Refresh(ctx)
	if err == nil || errors.Is(err, ErrLockLost) {
		return req, err
	}
	return nil, fmt.Errorf("%w: could not check %s after w8y was stopped: %w", ErrLockLost, quoteKey(l.Key), err)
}
