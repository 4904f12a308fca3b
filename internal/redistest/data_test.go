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

// TestIsRotation: a rotation keeps the items and their circular order; a
// lost, gained or swapped item, or the order reversed, is not one.
func TestIsRotation(t *testing.T) {
	for _, tt := range []struct {
		got, want []string
		is        bool
	}{
		{nil, nil, true},
		{[]string{"a", "b", "c"}, []string{"a", "b", "c"}, true},
		{[]string{"b", "c", "a"}, []string{"a", "b", "c"}, true},
		{[]string{"c", "a", "b"}, []string{"a", "b", "c"}, true},
		{[]string{"a", "a", "b"}, []string{"a", "b", "a"}, true},
		{[]string{"c", "b", "a"}, []string{"a", "b", "c"}, false},
		{[]string{"a", "c", "b"}, []string{"a", "b", "c"}, false},
		{[]string{"a", "b"}, []string{"a", "b", "c"}, false},
		{[]string{"a", "b", "c", "a"}, []string{"a", "b", "c"}, false},
		{[]string{"a", "b", "b"}, []string{"a", "b", "c"}, false},
		{nil, []string{"a"}, false},
	} {
		if got := IsRotation(tt.got, tt.want); got != tt.is {
			t.Errorf("IsRotation(%q, %q) = %v, want %v", tt.got, tt.want, got, tt.is)
		}
	}
}
