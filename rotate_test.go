package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/take"
)

// The ways an item is taken are tested in internal/take; these tests pin
// what the loop gets from a take: the Lock it runs under.

// takeLock takes the next item of pass and returns it with its Lock, as
// worker.take does without its stop's cut and the give-back.
func takeLock(ctx context.Context, r *Rotator, pass *take.Pass, stop <-chan struct{}) (string, *Lock, error) {
	taken, err := pass.Take(ctx, stop)
	if err != nil {
		return "", nil, err
	}
	return taken.Item, r.lock(taken), nil
}

const testToken = "host:1:token"

// testRotator returns a Rotator for prefix on rdb that logs JSON to logs.
// Where colocated, it takes in batches of batch candidates.
func testRotator(client take.Client, prefix string, colocated bool, batch int, logs *bytes.Buffer) *Rotator {
	return &Rotator{take.Taker{
		Client: client, Keys: schema.Keys{Prefix: prefix, Colocated: colocated}, Token: testToken, TTL: time.Minute,
		MaxItemLen: 100, Batch: batch, Log: zerolog.New(logs),
	}}
}

// TestPassTakeGivesTheLock: on both paths, the Lock of an item taken is the
// item's lock key with our token and the Rotator's TTL, the take's fence,
// the cancel key where a refresh may read it, and a client that refreshes
// and releases it; its expiry counts from the take.
func TestPassTakeGivesTheLock(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	for _, colocated := range []bool{false, true} {
		var logs bytes.Buffer
		r := testRotator(rdb, fmt.Sprintf("lock-%v:", colocated), colocated, 0, &logs)
		redistest.Seed(t, rdb, r.Keys.List(), "a", "b")
		before := time.Now()
		pass := r.Pass()
		item, lock, err := takeLock(ctx, r, pass, nil)
		if err != nil || item != "a" {
			t.Fatalf("colocated %v: Take = %q, %v; want a", colocated, item, err)
		}
		wantCancel := ""
		if colocated {
			wantCancel = r.Keys.Cancel("a")
		}
		if lock.Key != r.Keys.Lock("a") || lock.Token != testToken || lock.TTL != time.Minute || lock.Item != "a" ||
			lock.Fence != 1 || lock.CancelKey != wantCancel || lock.client == nil {
			t.Errorf("colocated %v: Take gave the lock %+v", colocated, lock)
		}
		if lock.expires.Before(before.Add(time.Minute)) || lock.expires.After(time.Now().Add(time.Minute)) {
			t.Errorf("colocated %v: the lock expires at %s, want a minute after the take", colocated, lock.expires)
		}
		if req, err := lock.Refresh(ctx); err != nil || req != nil {
			t.Errorf("colocated %v: Refresh = %v, %v", colocated, req, err)
		}
		if released, err := finish.Release(ctx, lock.client, lock.Key, lock.Token, lock.Item); !released || err != nil {
			t.Errorf("colocated %v: finish.Release = %v, %v", colocated, released, err)
		}
		if item, _, err := takeLock(ctx, r, pass, nil); err != nil || item != "b" {
			t.Errorf("colocated %v: the pass's second Take = %q, %v; want b", colocated, item, err)
		}
		if _, _, err := takeLock(ctx, r, pass, nil); !errors.Is(err, take.ErrNoWork) {
			t.Errorf("colocated %v: the pass's third Take = %v, want take.ErrNoWork", colocated, err)
		}
	}
}

// TestPassTakeStopped: a stop before the take is jobctl.ErrStopped, the loop's
// own stop error, on both paths.
func TestPassTakeStopped(t *testing.T) {
	rdb := redistest.Start(t).Client
	stop := make(chan struct{})
	close(stop)
	for _, colocated := range []bool{false, true} {
		var logs bytes.Buffer
		r := testRotator(rdb, fmt.Sprintf("stop-%v:", colocated), colocated, 0, &logs)
		redistest.Seed(t, rdb, r.Keys.List(), "a")
		if _, err := r.Pass().Take(context.Background(), stop); !errors.Is(err, jobctl.ErrStopped) {
			t.Errorf("colocated %v: Take with stop closed = %v, want jobctl.ErrStopped", colocated, err)
		}
	}
}

// TestPassTakeUnconfirmed: a take that too few replicas confirm (here: a
// server without replicas, asked for one) is a take.UnconfirmedError
// holding what was taken, whose Lock (the one worker.held gives back) is
// ours meanwhile.
func TestPassTakeUnconfirmed(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	for _, colocated := range []bool{false, true} {
		var logs bytes.Buffer
		r := testRotator(rdb, fmt.Sprintf("acks-%v:", colocated), colocated, 0, &logs)
		r.ReplicaAcks = 1
		r.TTL = 2 * time.Second
		redistest.Seed(t, rdb, r.Keys.List(), "a")
		_, err := r.Pass().Take(ctx, nil)
		var unconfirmed *take.UnconfirmedError
		if !errors.As(err, &unconfirmed) || !errors.Is(err, redisconn.ErrNotReplicated) {
			t.Fatalf("colocated %v: Take = %v; want a take.UnconfirmedError", colocated, err)
		}
		if l := r.lock(unconfirmed.Taken); l.Key != r.Keys.Lock("a") || l.Token != testToken || l.Item != "a" || rdb.Get(ctx, l.Key).Val() != testToken {
			t.Errorf("colocated %v: the lock to give back is %+v", colocated, l)
		}
	}
}
