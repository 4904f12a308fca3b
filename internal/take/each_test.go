package take

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// meddlingClient stands for another client that changes Redis between
// takeEach's check of a candidate and its lock attempt: meddle runs just
// before each.lua is sent for lock.
type meddlingClient struct {
	Client
	lock   string
	meddle func(ctx context.Context, rdb *redis.Client)
}

func (c *meddlingClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if sha == eachScript.Hash() && keys[0] == c.lock {
		c.meddle(ctx, c.Client.(*redis.Client))
	}
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

// TestTakeEachChecksAgainAfterTheLock: on the per-candidate path, where the
// check of a candidate and the lock attempt are two round trips, what
// another client does between them is seen by the check after the lock,
// which lets the lock go and passes the item by: a cooldown that lands (a
// run of a that finishes on another host writes it before its lock is
// free, as finishEach does), or an operator's w8yctl remove of a (on a
// Cluster without a hash tag, it takes a out of the list and deletes its
// pause, which the first check may have seen): a removed item never runs
// again.
func TestTakeEachChecksAgainAfterTheLock(t *testing.T) {
	rdb, ctx := clientLoaded(t, eachScript)
	for _, tt := range []struct {
		name   string
		meddle func(keys schema.Keys) func(ctx context.Context, rdb *redis.Client)
	}{
		{"a cools down", func(keys schema.Keys) func(ctx context.Context, rdb *redis.Client) {
			return func(ctx context.Context, rdb *redis.Client) {
				rdb.Set(ctx, keys.Cooldown("a"), "other-host", time.Hour)
			}
		}},
		{"a is removed", func(keys schema.Keys) func(ctx context.Context, rdb *redis.Client) {
			return func(ctx context.Context, rdb *redis.Client) { rdb.LRem(ctx, keys.List(), 0, "a") }
		}},
	} {
		keys := schema.Keys{Prefix: "race:" + tt.name + ":"}
		takeSetup{items: []string{"a", "b"}}.seed(t, rdb, keys)
		var logs bytes.Buffer
		r := testTaker(&meddlingClient{Client: rdb, lock: keys.Lock("a"), meddle: tt.meddle(keys)}, keys.Prefix, false, 0, &logs)
		taken, err := r.Pass().Take(ctx, nil)
		if err != nil || taken.Item != "b" {
			t.Fatalf("%s meanwhile: Take = %q, %v; want b", tt.name, taken.Item, err)
		}
		if n := rdb.Exists(ctx, keys.Lock("a")).Val(); n != 0 {
			t.Errorf("%s meanwhile: the lock of a was kept", tt.name)
		}
	}
}

// TestTakeFence: each take increments the list's fencing token, on both
// paths; a fence key of another type costs the token (0, with a warning),
// never the take.
func TestTakeFence(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	for _, colocated := range []bool{false, true} {
		keys := schema.Keys{Prefix: fmt.Sprintf("fence%v:", colocated)}
		takeSetup{items: redistest.Items(3)}.seed(t, rdb, keys)
		var logs bytes.Buffer
		r := testTaker(rdb, keys.Prefix, colocated, 0, &logs)
		for want := int64(1); want <= 3; want++ {
			taken, err := r.Pass().Take(ctx, nil)
			if err != nil {
				t.Fatalf("colocated=%v: take %d: %v", colocated, want, err)
			}
			if taken.Fence != want {
				t.Errorf("colocated=%v: take %d has the fence %d", colocated, want, taken.Fence)
			}
		}
		rdb.Del(ctx, keys.Fence())
		rdb.HSet(ctx, keys.Fence(), "f", "v")
		rdb.Del(ctx, keys.Lock("i0"))
		taken, err := r.Pass().Take(ctx, nil)
		if err != nil {
			t.Fatalf("colocated=%v: a take with a hash at the fence key: %v", colocated, err)
		}
		if taken.Fence != 0 || !strings.Contains(logs.String(), "could not increment the fencing token") {
			t.Errorf("colocated=%v: a take with a hash at the fence key has the fence %d, and logs %s", colocated, taken.Fence, logs.String())
		}
	}
}
