package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

// TestRefreshLost: a refresh extends a lock that holds our token, and finds
// one lost that expired or that another took since, leaving it alone. (The
// lease over refreshes is internal/lease's, tested there.)
func TestRefreshLost(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	lock := &Lock{Key: "r:lock:a", Token: "ours", TTL: time.Minute, Item: "a", client: s.Client}
	s.Client.Set(ctx, lock.Key, lock.Token, time.Second)
	if _, err := lock.Refresh(ctx); err != nil || s.Client.PTTL(ctx, lock.Key).Val() < 59*time.Second {
		t.Fatalf("ours: Refresh = %v, the lock lives %s", err, s.Client.PTTL(ctx, lock.Key).Val())
	}
	s.Client.Del(ctx, lock.Key)
	if _, err := lock.Refresh(ctx); !errors.Is(err, lease.ErrLost) || s.Client.Exists(ctx, lock.Key).Val() != 0 {
		t.Errorf("expired: Refresh = %v, want lease.ErrLost and no key", err)
	}
	s.Client.Set(ctx, lock.Key, "another", time.Second)
	if _, err := lock.Refresh(ctx); !errors.Is(err, lease.ErrLost) || s.Client.Get(ctx, lock.Key).Val() != "another" {
		t.Errorf("another's: Refresh = %v, want lease.ErrLost and the key left alone", err)
	}
	if ttl := s.Client.PTTL(ctx, lock.Key).Val(); ttl > time.Second {
		t.Errorf("another's lock extended to %s", ttl)
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

// TestRefreshOnlyOurs: refresh.lua keeps to compare-and-expire, and loads
// in a real Redis under the hash that EVALSHA finds it by.
func TestRefreshOnlyOurs(t *testing.T) {
	redistest.ScriptsLoad(t, map[string]*script.Script{"refresh": refreshScript})
	rdb, ctx := redistest.OnlyOurs(t, refreshScript, "w:lock:x", []any{60000},
		redistest.TokenStep{Token: "me", Want: 1}, redistest.TokenStep{Token: "other"})
	rdb.Del(ctx, "w:lock:x")
	if got, err := refreshScript.Run(ctx, rdb, []string{"w:lock:x"}, "me", 60000).Result(); err != nil || got != int64(0) {
		t.Errorf("no lock: %v, %v; want 0", got, err)
	}
}
