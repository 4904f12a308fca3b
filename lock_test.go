package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestLeasePauseAndResume: a lease paused while w8y is stopped refreshes
// nothing; on Resume it goes on at once within the lease it knows of, and
// past that only once a refresh finds the lock still its own. A lock lost
// meanwhile is reported on Lost before kill is called, so that whoever sees
// the child end knows why.
func TestLeasePauseAndResume(t *testing.T) {
	for _, tt := range []struct {
		name string
		// meanwhile happens to the lock while the lease is paused.
		meanwhile func(t *testing.T, s *redistest.Server, lock *Lock)
		lost      bool
	}{
		{name: "a short pause", meanwhile: func(*testing.T, *redistest.Server, *Lock) {}},
		{
			name: "a pause past the give-up point, the lock still ours",
			meanwhile: func(t *testing.T, s *redistest.Server, lock *Lock) {
				// As if w8y had been stopped past the give-up point
				// while the server kept the key a little longer.
				lock.expires = time.Now()
			},
		},
		{
			name: "the lock expired",
			meanwhile: func(t *testing.T, s *redistest.Server, lock *Lock) {
				redistest.WaitFor(t, "the lock to expire", func() bool { return s.Client.Exists(context.Background(), lock.Key).Val() == 0 })
			},
			lost: true,
		},
		{
			name: "another took it after it expired",
			meanwhile: func(t *testing.T, s *redistest.Server, lock *Lock) {
				redistest.WaitFor(t, "the lock to expire", func() bool { return s.Client.Exists(context.Background(), lock.Key).Val() == 0 })
				s.Client.Set(context.Background(), lock.Key, "another", time.Minute)
			},
			lost: true,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.Start(t)
			const ttl = 600 * time.Millisecond
			lock := &Lock{Key: "lease:lock:a", Token: "ours", TTL: ttl, Item: "a", client: s.Client, expires: time.Now().Add(ttl)}
			if err := s.Client.Set(context.Background(), lock.Key, lock.Token, ttl).Err(); err != nil {
				t.Fatal(err)
			}
			k := lock.keepAlive(context.Background(), 100*time.Millisecond, zerolog.Nop())
			defer k.Stop()
			k.Pause()
			tt.meanwhile(t, s, lock)
			killed := false
			err := k.Resume(func() {
				killed = true
				select {
				case <-k.Lost():
				default:
					t.Error("kill was called before the loss was reported")
				}
			})
			if tt.lost != (err != nil) || tt.lost != killed || (err != nil && !errors.Is(err, ErrLockLost)) {
				t.Fatalf("Resume = %v, killed %v; want lost %v", err, killed, tt.lost)
			}
			if tt.lost {
				return
			}
			// Refreshing goes on: the lock outlives its TTL twice over,
			// which only the passing of that time can show.
			time.Sleep(2 * ttl)
			if got := s.Client.Get(context.Background(), lock.Key).Val(); got != lock.Token {
				t.Errorf("after Resume the lock holds %q", got)
			}
		})
	}
}

// TestRefreshFindsCancel: a refresh reports, in the same call, a cancel
// request that control.Cancel aimed at its lock's token, and no other: not one
// aimed at another token, nor one that a lock without a CancelKey (keys not
// colocated) cannot name.
func TestRefreshFindsCancel(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	keys := schema.Keys{Prefix: "r:", Colocated: true}
	lock := &Lock{Key: keys.Lock("a"), Token: "ours", TTL: time.Minute, Item: "a", CancelKey: keys.Cancel("a"), client: s.Client}
	if err := s.Client.Set(ctx, lock.Key, lock.Token, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if req, err := lock.Refresh(ctx); req != nil || err != nil {
		t.Fatalf("no request: Refresh = %v, %v", req, err)
	}
	asked, err := control.Cancel(ctx, s.Client, keys, "a", "a reason, with spaces", true)
	if err != nil {
		t.Fatal(err)
	}
	req, err := lock.Refresh(ctx)
	if err != nil || req == nil || *req != asked {
		t.Fatalf("Refresh = %+v, %v; want %+v", req, err, asked)
	}
	if ttl := s.Client.PTTL(ctx, lock.Key).Val(); ttl < 59*time.Second {
		t.Errorf("the refresh that found a request left the lock %s", ttl)
	}
	blind := *lock
	blind.CancelKey = ""
	if req, err := blind.Refresh(ctx); req != nil || err != nil {
		t.Errorf("without a CancelKey: Refresh = %v, %v", req, err)
	}
	s.Client.HSet(ctx, keys.Cancel("a"), schema.CancelHolder, "a previous holder")
	if req, err := lock.Refresh(ctx); req != nil || err != nil {
		t.Errorf("a request aimed at another token: Refresh = %v, %v", req, err)
	}
}

// TestLeaseDeliversCancel: a lease passes on the first cancel request that
// its refreshes find, within about a third of the TTL, and keeps the lock
// alive afterwards while the child is stopped.
func TestLeaseDeliversCancel(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	keys := schema.Keys{Prefix: "l:", Colocated: true}
	const ttl = 900 * time.Millisecond
	lock := &Lock{Key: keys.Lock("a"), Token: "ours", TTL: ttl, Item: "a", CancelKey: keys.Cancel("a"), client: s.Client, expires: time.Now().Add(ttl)}
	if err := s.Client.Set(ctx, lock.Key, lock.Token, ttl).Err(); err != nil {
		t.Fatal(err)
	}
	k := lock.keepAlive(ctx, 100*time.Millisecond, zerolog.Nop())
	defer k.Stop()
	asked, err := control.Cancel(ctx, s.Client, keys, "a", "stop", false)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-k.Cancelled():
		if req != asked {
			t.Errorf("delivered %+v, want %+v", req, asked)
		}
		// The next refresh is due a third of the TTL after the last; allow
		// the refresh's own round trip on a busy machine.
		if took := time.Since(asked.At); took > ttl/3+200*time.Millisecond {
			t.Errorf("delivered %s after the request", took)
		}
	case err := <-k.Lost():
		t.Fatalf("lock lost: %v", err)
	case <-time.After(redistest.Timeout):
		t.Fatal("no request delivered")
	}
	// The lock outlives its TTL twice over only if the lease still
	// refreshes it, which only the passing of that time can show.
	time.Sleep(2 * ttl)
	if got := s.Client.Get(ctx, lock.Key).Val(); got != lock.Token {
		t.Errorf("after the cancel the lock holds %q", got)
	}
	select {
	case req := <-k.Cancelled():
		t.Errorf("a second request delivered: %+v", req)
	default:
	}
}
