package redistest

import (
	"context"
	"slices"
	"testing"
)

func TestSeed(t *testing.T) {
	s := Start(t)
	items := Items(seedChunk + 3)
	if items[0] != "i0" || items[len(items)-1] != "i10002" {
		t.Fatalf("Items: %q ... %q", items[0], items[len(items)-1])
	}
	s.Client.RPush(context.Background(), "l", "stale")
	Seed(t, s.Client, "l", items...)
	if got := s.Client.LRange(context.Background(), "l", 0, -1).Val(); !slices.Equal(got, items) {
		t.Errorf("the list holds %d items, want the %d seeded", len(got), len(items))
	}
	Seed(t, s.Client, "l")
	if n := s.Client.Exists(context.Background(), "l").Val(); n != 0 {
		t.Error("seeding no items left the list behind")
	}
}
