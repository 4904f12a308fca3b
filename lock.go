package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"time"

	_ "embed"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
	"github.com/w8y/w8y/internal/settings"
)

// refreshScript extends a lock while it holds our token, and reports a
// cancel request aimed at that token (refresh.lua).
//
//go:embed refresh.lua
var refreshSource string

var refreshScript = script.New(clock.Lua, refreshSource)

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
	// Taken is when the take that got the lock was sent, on this host's
	// clock, and Start when Redis took it, on Redis' clock (zero where the
	// take did not say): the run's start.
	Taken, Start time.Time
	// CancelKey is the item's cancel request, which each refresh reads in
	// the same call; "" where one script may not name it with the lock
	// (see schema.Keys.Colocated), and no cancel can be asked for.
	CancelKey string
	// LocksKey is the counts' index of locks (schema.Keys.Locks), whose
	// entry each refresh moves with the lock; "" where CancelKey is.
	LocksKey string
	// Run is what the item's own settings make of the worker's options
	// (its timeout, and the schedule its end sets), or nil where it has
	// none and the options stand.
	Run *settings.Run

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
func quoteKey(key string) string { return fmt.Sprintf("%q", clip.Item(key)) }

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
// returns lease.ErrLost if the key is gone or holds another value. In the
// same call it reads the item's cancel request, and returns it when it is
// aimed at our token. It names the lock alone, so that a Cluster slot on
// the move serves it (see refresh.lua): no reshard, however long, stops a
// child whose lock is intact.
func (l *Lock) Refresh(ctx context.Context) (*schema.CancelRequest, error) {
	sent := time.Now()
	args := []any{l.Token, l.TTL.Milliseconds()}
	if l.CancelKey != "" {
		args = append(args, l.CancelKey)
		if l.LocksKey != "" {
			args = append(args, l.LocksKey, l.Item)
		}
	}
	reply, err := redisconn.RunConfirmed(ctx, l.client, refreshScript, l.acks, l.TTL, []string{l.Key}, args...)
	if reply == int64(0) {
		return nil, fmt.Errorf("%w: %s no longer holds our token", lease.ErrLost, quoteKey(l.Key))
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

// cancelRequest reads the request that refreshScript reports: reason, by,
// at and as_failure, as schema.Keys.Cancel's hash holds them.
func (l *Lock) cancelRequest(fields []any) *schema.CancelRequest {
	text := func(i int) string { s, _ := fields[i].(string); return s }
	req := &schema.CancelRequest{Holder: l.Token, Reason: text(0), By: text(1), AsFailure: text(3) == "1"}
	if ms, err := strconv.ParseInt(text(2), 10, 64); err == nil {
		req.At = time.UnixMilli(ms)
	}
	return req
}

// Expiry is the lock's TTL and the earliest moment the server may expire it
// (see lease.Lock).
func (l *Lock) Expiry() (time.Duration, time.Time) { return l.TTL, l.expires }

// String names the lock's key in messages.
func (l *Lock) String() string { return quoteKey(l.Key) }

// keepAlive starts the lease that refreshes l while its child runs (see
// lease.Keep): giveUp is the time needed to stop the child before the
// server could hand the item to another.
//
// The lease refreshes the lock a third of its TTL after it starts, and
// gives it up if less than giveUp is left of it by then. A take answered
// late (Redis paused, or failing over) may leave less than that of the
// lease as w8y counts it, from when the take was sent: such a lock is
// refreshed first, so that the child starts with a whole lease, not one that
// its guard finds run out at once (see guardDeadline). A refresh that fails
// changes nothing: the lease finds the lock lost, as it would have.
func (l *Lock) keepAlive(ctx context.Context, giveUp time.Duration, log zerolog.Logger) *lease.Lease {
	if time.Until(l.expires) < l.TTL/3+giveUp {
		// Bounded by a refresh period: a Redis that stalls is the lease's
		// to ride out.
		refreshCtx, cancel := context.WithTimeout(ctx, l.TTL/3)
		_, _ = l.Refresh(refreshCtx)
		cancel()
	}
	return lease.Keep(ctx, l, giveUp, log)
}
