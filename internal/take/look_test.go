package take

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestSweepEvery: the fleet sweeps a list sweepCost times as seldom as a
// pass over it takes, never more often than --idle-wait and never less
// often than once an hour, whatever either is.
func TestSweepEvery(t *testing.T) {
	const forever = time.Duration(1<<63 - 1)
	tests := []struct {
		name               string
		passTime, idleWait time.Duration
		want               time.Duration
	}{
		{"before any pass: --idle-wait", 0, 5 * time.Second, 5 * time.Second},
		{"a quick pass: --idle-wait is the floor", time.Millisecond, 5 * time.Second, 5 * time.Second},
		{"a pass's cost over --idle-wait", 10 * time.Millisecond, 5 * time.Second, 20 * time.Second},
		{"no --idle-wait", 10 * time.Millisecond, 0, 20 * time.Second},
		{"just under the ceiling", 1700 * time.Millisecond, time.Second, 3400 * time.Second},
		{"at the ceiling", 1800 * time.Millisecond, time.Second, time.Hour},
		{"a slow pass: an hour is the ceiling", 2 * time.Second, time.Second, time.Hour},
		{"a pass too long to multiply", forever / 2, time.Second, time.Hour},
		{"--idle-wait over an hour: the ceiling", 0, 2 * time.Hour, time.Hour},
		{"--idle-wait inf: the ceiling", 0, forever, time.Hour},
	}
	for _, tt := range tests {
		if got := sweepEvery(tt.passTime, tt.idleWait); got != tt.want {
			t.Errorf("%s: sweepEvery(%s, %s) = %s, want %s", tt.name, tt.passTime, tt.idleWait, got, tt.want)
		}
	}
}

// TestLookMovesTakenItemToTail: a look that takes a due item moves it to
// the tail of the list, as a rotation would have, and leaves every other
// item where it was: the list keeps exactly its items, in order (compared
// as is, not sorted). Of an item held twice, the first is the one moved.
func TestLookMovesTakenItemToTail(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	tests := []struct {
		name  string
		list  []string
		due   string
		after []string
	}{
		{"from the middle", []string{"a", "b", "c", "d", "e"}, "c", []string{"a", "b", "d", "e", "c"}},
		{"from the head", []string{"a", "b", "c"}, "a", []string{"b", "c", "a"}},
		{"at the tail already", []string{"a", "b", "c"}, "c", []string{"a", "b", "c"}},
		{"held twice", []string{"c", "a", "c", "b"}, "c", []string{"a", "c", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := schema.Keys{Prefix: "tail:" + tt.name + ":", Colocated: true}
			redistest.Seed(t, rdb, keys.List(), tt.list...)
			// The fleet has tried the whole list: only the due entry is new.
			rdb.Set(ctx, keys.Seen(), len(tt.list), 0)
			rdb.Set(ctx, keys.Untried(), 0, 0)
			rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: 0, Member: tt.due})
			var logs bytes.Buffer
			pass := testTaker(rdb, keys.Prefix, true, 0, &logs).LookFirst()
			taken, err := pass.Take(ctx, nil)
			if err != nil || taken.Item != tt.due {
				t.Fatalf("the look took %q (%v), want %q", taken.Item, err, tt.due)
			}
			if pass.Swept() {
				t.Errorf("a look that took a due item swept")
			}
			if got := rdb.LRange(ctx, keys.List(), 0, -1).Val(); !slices.Equal(got, tt.after) {
				t.Errorf("the list after the look is %q, want %q", got, tt.after)
			}
			// No item was appended: every item, the moved one too, stays
			// tried.
			if got, want := rdb.Get(ctx, keys.Seen()).Val(), fmt.Sprint(len(tt.list)); got != want {
				t.Errorf("seen after the look is %s, want %s", got, want)
			}
			if v := rdb.Get(ctx, taken.Key).Val(); v != testToken {
				t.Errorf("the lock of %q holds %q, want our token", taken.Item, v)
			}
			// One appended now is the next look's, wherever the take moved
			// items: a mark that moved with the moved item would pass it.
			rdb.RPush(ctx, keys.List(), "appended")
			rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: 0, Member: "b"})
			rdb.Set(ctx, keys.Lock("b"), "someone-else", time.Hour)
			next, err := pass.t.LookFirst().Take(ctx, nil)
			if err != nil || next.Item != "appended" {
				t.Errorf("the next look took %q (%v), want the item appended", next.Item, err)
			}
		})
	}
}
