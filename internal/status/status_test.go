package status

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// readItems returns the items that r reads, in order, and how many batches.
func readItems(t *testing.T, r *Reader) ([]string, int) {
	t.Helper()
	var items []string
	batches := 0
	err := r.Read(context.Background(), func(batch []Item) error {
		batches++
		for _, st := range batch {
			items = append(items, st.Item)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return items, batches
}

// readAll returns the status of every item that r reads, in order.
func readAll(ctx context.Context, t *testing.T, r *Reader) []Item {
	t.Helper()
	var all []Item
	if err := r.Read(ctx, func(batch []Item) error {
		all = append(all, batch...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return all
}

// rotatingClient rotates the list by shift items before each read of a
// batch but the first (the transaction that reads a window, which the
// script follows where the list moved), as busy workers do between two of
// --status' reads.
type rotatingClient struct {
	*redis.Client
	list  string
	shift int
	calls int
}

func (c *rotatingClient) TxPipeline() redis.Pipeliner {
	c.calls++
	if c.calls > 1 {
		for range c.shift {
			c.Client.LMove(context.Background(), c.list, c.list, "LEFT", "RIGHT")
		}
	}
	return c.Client.TxPipeline()
}

// TestStatusFollowsARotatingList: workers rotating the list between reads,
// by fewer or more items than a batch, do not make --status miss an item or
// show one twice, and it shows them in circular list order.
func TestStatusFollowsARotatingList(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	items := redistest.Items(95)
	keys := schema.Keys{Prefix: "st:"}
	rdb.RPush(ctx, keys.List(), redistest.Values(items)...)
	for _, shift := range []int{0, 1, 7, 10, 33, 94, 95, 200} {
		client := &rotatingClient{Client: rdb, list: keys.List(), shift: shift}
		got, batches := readItems(t, &Reader{Client: client, Keys: keys, Batch: 10})
		if batches != 10 {
			t.Errorf("shift %d: %d batches, want 10", shift, batches)
		}
		// Circular order: the reading starts at the head at the first call.
		start := slices.Index(items, got[0])
		want := append(slices.Clone(items[start:]), items[:start]...)
		if !slices.Equal(got, want) {
			t.Errorf("shift %d: read\n%q\nwant\n%q", shift, got, want)
		}
	}
}

// TestStatusDropsRepeats: an item the list holds twice shows once.
func TestStatusDropsRepeats(t *testing.T) {
	rdb := redistest.Start(t).Client
	keys := schema.Keys{Prefix: "rep:"}
	rdb.RPush(context.Background(), keys.List(), "a", "b", "a", "c", "b")
	got, _ := readItems(t, &Reader{Client: rdb, Keys: keys, Batch: 2})
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("read %q", got)
	}
}

// TestStatusLongList reads 100,000 items: all of them, in order, with one
// status.lua call and one pipeline per batch.
func TestStatusLongList(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 items")
	}
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "long:"}
	items := redistest.Items(100_000)
	redistest.Seed(t, rdb, keys.List(), items...)
	rdb.Set(ctx, keys.Lock(items[500]), "someone", time.Minute)
	rdb.HSet(ctx, keys.State(items[99_999]), "runs", 4, "last_result", "failure")
	rdb.ConfigResetStat(ctx)

	got := readAll(ctx, t, &Reader{Client: rdb, Keys: keys})
	if len(got) != len(items) {
		t.Fatalf("read %d items, want %d", len(got), len(items))
	}
	for i, st := range got {
		if st.Item != items[i] {
			t.Fatalf("item %d is %q, want %q", i, st.Item, items[i])
		}
	}
	if st := got[500]; st.State != "locked" || st.Holder == nil || *st.Holder != "someone" {
		t.Errorf("locked item: %+v", st)
	}
	if st := got[99_999]; st.Runs != 4 || st.LastResult == nil || *st.LastResult != "failure" || st.State != "idle" {
		t.Errorf("item with state: %+v", st)
	}
	// One LRANGE per batch, in a transaction that checks where the last
	// batch ended, so no read holds more than a batch; the list does not
	// move, so status.lua never has to find it.
	stats := redistest.CommandStats(t, rdb)
	if want := len(items) / Batch; stats["lrange"] != want || stats["evalsha"] != 0 {
		t.Errorf("%d LRANGE and %d EVALSHA calls, want %d and 0: %v", stats["lrange"], stats["evalsha"], want, stats)
	}
}

// TestPageReadsOnlyItsWindow: a page of a long list is the items at its
// indexes, each with its status, and the list's length; LRANGE is the one
// read of the list, so a refresh costs the same at any length.
func TestPageReadsOnlyItsWindow(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	items := redistest.Items(100_000)
	keys := schema.Keys{Prefix: "pg:"}
	srv.Client.RPush(ctx, keys.List(), redistest.Values(items)...)
	srv.Client.Set(ctx, keys.Lock(items[50_001]), "host:1:tok", time.Minute)
	r := &Reader{Client: srv.Client, Keys: keys}

	length, page, err := r.Page(ctx, 50_000, 3)
	if err != nil {
		t.Fatal(err)
	}
	if length != 100_000 || len(page) != 3 {
		t.Fatalf("Page(50000, 3) = %d, %d items; want 100000, 3", length, len(page))
	}
	for i, st := range page {
		if st.Item != items[50_000+i] {
			t.Errorf("item %d = %q, want %q", i, st.Item, items[50_000+i])
		}
	}
	if page[1].State != StateLocked || page[1].Holder == nil || *page[1].Holder != "host:1:tok" {
		t.Errorf("locked item shows %+v", page[1])
	}

	length, page, err = r.Page(ctx, 200_000, 100)
	if err != nil || length != 100_000 || len(page) != 0 {
		t.Errorf("Page past the end = %d, %d items, %v; want 100000, none, nil", length, len(page), err)
	}
	length, page, err = (&Reader{Client: srv.Client, Keys: schema.Keys{Prefix: "none:"}}).Page(ctx, 0, 100)
	if err != nil || length != 0 || len(page) != 0 {
		t.Errorf("Page of a missing list = %d, %d items, %v; want 0, none, nil", length, len(page), err)
	}
}

// newReader is a Reader of keys on a redis-server of the test's own, with
// its client and a context.
func newReader(t *testing.T, keys schema.Keys) (*Reader, *redis.Client, context.Context) {
	t.Helper()
	rdb, ctx := redistest.Client(t)
	return &Reader{Client: rdb, Keys: keys}, rdb, ctx
}
