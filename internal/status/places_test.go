package status

import (
	"context"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/schema"
)

// TestPlaces: no cap recorded reads as none; under a cap, a place counts
// while its lock exists, and reading drops nothing.
func TestPlaces(t *testing.T) {
	r, rdb, ctx := newReader(t, schema.Keys{Prefix: "p:"})
	keys := r.Keys
	if got, err := r.Places(ctx); err != nil || got != nil {
		t.Fatalf("without a cap: %+v, %v; want nil", got, err)
	}
	rdb.Set(ctx, keys.FleetMax(), 2, 0)
	if got, err := r.Places(ctx); err != nil || *got != (Places{InUse: 0, Limit: 2}) {
		t.Fatalf("a cap, no place in use: %+v, %v", got, err)
	}
	rdb.SAdd(ctx, keys.Running(), keys.Lock("a"), keys.Lock("dead"))
	rdb.Set(ctx, keys.Lock("a"), "h", time.Minute)
	if got, err := r.Places(context.Background()); err != nil || *got != (Places{InUse: 1, Limit: 2}) {
		t.Fatalf("one live place and one whose lock is gone: %+v, %v", got, err)
	}
	if n := rdb.SCard(ctx, keys.Running()).Val(); n != 2 {
		t.Errorf("reading changed the places: %d members", n)
	}
}
