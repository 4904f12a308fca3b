package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/take"
)

// The hot paths of one item: choosing it, checking it, building the child's
// command, and refreshing and releasing its lock. scripts/bench.sh measures
// whole runs against references; these measure the parts.

func BenchmarkBadItem(b *testing.B) {
	item := "customer:" + strings.Repeat("4", 32)
	for b.Loop() {
		if childcmd.ItemProblem(item, 1<<17) != "" {
			b.Fatal("a good item was bad")
		}
	}
}

// benchTake measures one Take over a list of n items whose locks are all
// taken but the last, so that each Take looks at all of them, and releases
// it again. A whole pass leaves the list as it was.
func benchTake(b *testing.B, n int, colocated bool) {
	benchTakeWaiting(b, n, colocated, schema.Keys.Lock)
}

// benchTakeWaiting is benchTake with the keys that keep all items but the
// last from being taken named by waitKey: their locks, or (as in a fleet
// with --cooldown, where most items wait with their locks free) their
// cooldown keys, which cost the scan a check per candidate.
func benchTakeWaiting(b *testing.B, n int, colocated bool, waitKey func(schema.Keys, string) string) {
	rdb, ctx := redistest.Client(b)
	keys := schema.Keys{Prefix: "bench:", Colocated: colocated}
	items := redistest.Items(n)
	pipe := rdb.Pipeline()
	pipe.RPush(ctx, keys.List(), redistest.Values(items)...)
	for _, item := range items[:n-1] {
		pipe.Set(ctx, waitKey(keys, item), "someone-else", time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	r := &Rotator{take.Taker{Client: rdb, Keys: keys, Token: testToken, TTL: time.Minute, MaxItemLen: 1 << 17, Log: zerolog.New(io.Discard)}}
	b.ResetTimer()
	for b.Loop() {
		item, lock, err := takeLock(ctx, r, r.Pass(), nil)
		if err != nil || item != items[n-1] {
			b.Fatalf("Take = %q, %v; want %q", item, err, items[n-1])
		}
		if released, err := finish.Release(ctx, lock.client, lock.Key, lock.Token, lock.Item); !released || err != nil {
			b.Fatalf("finish.Release = %v, %v", released, err)
		}
	}
}

func BenchmarkTake(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("scan/%d", n), func(b *testing.B) { benchTake(b, n, true) })
	}
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("scan-cooling/%d", n), func(b *testing.B) { benchTakeWaiting(b, n, true, schema.Keys.Cooldown) })
	}
	// The per-candidate path, for comparison: 10,000 would take seconds.
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("each/%d", n), func(b *testing.B) { benchTake(b, n, false) })
	}
}

// BenchmarkRefresh: a refresh of the lock alone (keys not colocated), and
// one that also reads the item's cancel request, absent or aimed at
// another holder: what cancel costs every refresh.
func BenchmarkRefresh(b *testing.B) {
	rdb, ctx := redistest.Client(b)
	for _, bm := range []struct {
		name      string
		cancelKey string
		request   bool
	}{{"lock", "", false}, {"with-cancel-key", "bench:cancel:x", false}, {"with-other-request", "bench:cancel:x", true}} {
		b.Run(bm.name, func(b *testing.B) {
			lock := &Lock{Key: "bench:lock:x", Token: testToken, TTL: time.Minute, CancelKey: bm.cancelKey, client: rdb}
			rdb.Set(ctx, lock.Key, lock.Token, lock.TTL)
			rdb.Del(ctx, "bench:cancel:x")
			if bm.request {
				rdb.HSet(ctx, "bench:cancel:x", "holder", "another", "reason", "r", "by", "b", "at", "0", "as_failure", "0")
			}
			for b.Loop() {
				if req, err := lock.Refresh(ctx); err != nil || req != nil {
					b.Fatal(req, err)
				}
			}
		})
	}
}
