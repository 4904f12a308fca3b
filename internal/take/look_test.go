package take

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

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

// TestLookFirstTakesAsAPass pins the way workers take (LookFirst: looks at
// the appended items and the due index, and the sweep a look elects) to a
// whole pass per take, on the same data: the same items taken in the same
// order, the same list afterwards (the same circle: a look that takes an
// appended item leaves the list where a pass would have rotated it, so the
// two may differ by a rotation, never by an item or the order of the
// circle), the same locks, due entries and fencing token. On a list that
// w8y has never run every item is appended, so the looks try it in the
// pass's order; once every item has been tried, the sweep that a look
// elects goes round as the pass does.
func TestLookFirstTakesAsAPass(t *testing.T) {
	rdb := redistest.Start(t).Client
	long := strings.Repeat("x", 101)
	tests := []struct {
		name  string
		setup takeSetup
		takes int
		want  []string
	}{
		{"missing list", takeSetup{}, 1, []string{"(no work)"}},
		{"all free", takeSetup{items: redistest.Items(5)}, 6, []string{"i0", "i1", "i2", "i3", "i4", "i0"}},
		{"all locked", takeSetup{items: redistest.Items(7), locked: redistest.Items(7)}, 2, []string{"(no work)", "(no work)"}},
		{"free at the end", takeSetup{items: redistest.Items(8), locked: redistest.Items(7)}, 2, []string{"i7", "i7"}},
		{"every other free", takeSetup{items: redistest.Items(9), locked: []string{"i0", "i2", "i4", "i6", "i8"}}, 5, []string{"i1", "i3", "i5", "i7", "i1"}},
		{"lock key of another type", takeSetup{items: []string{"h", "g"}, hashLock: []string{"h"}}, 2, []string{"g", "g"}},
		{"bad items", takeSetup{items: []string{"", "a\x00b", "p", long, "q", "r"}, locked: []string{"p"}}, 3, []string{"q", "r", "q"}},
		{"duplicates", takeSetup{items: []string{"d", "d", "e", "d"}}, 3, []string{"d", "d", "e"}},
		{"cooling and backing off", takeSetup{items: redistest.Items(6), cooling: []string{"i0", "i3"}, backing: []string{"i1", "i4"}}, 3, []string{"i2", "i5", "i2"}},
		{"paused", takeSetup{items: redistest.Items(4), paused: []string{"i0", "i2"}}, 3, []string{"i1", "i3", "i1"}},
		{"every item waits", takeSetup{items: redistest.Items(4), cooling: []string{"i0", "i2"}, backing: []string{"i1", "i3"}}, 1, []string{"(no work)"}},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var outcomes [2]takeOutcome
			var written [2]string
			for i, lookFirst := range []bool{false, true} {
				keys := schema.Keys{Prefix: fmt.Sprintf("lf%d:%v:", n, lookFirst), Colocated: true}
				tt.setup.seed(t, rdb, keys)
				var logs bytes.Buffer
				taker := testTaker(rdb, keys.Prefix, true, 2, &logs)
				pass := taker.Pass
				if lookFirst {
					// A step of the sweep is due at each take, as it is
					// after SweepEvery.
					pass = func() *Pass {
						rdb.Del(context.Background(), keys.Sweep())
						return taker.LookFirst()
					}
				}
				outcomes[i] = takeWith(t, rdb, taker, pass, tt.takes, &logs)
				written[i] = writtenKeys(t, rdb, keys)
			}
			whole, looked := outcomes[0], outcomes[1]
			if !slices.Equal(whole.Taken, tt.want) {
				t.Errorf("a pass per take took %q, want %q", whole.Taken, tt.want)
			}
			if !slices.Equal(looked.Taken, whole.Taken) {
				t.Errorf("looks took %q, passes %q", looked.Taken, whole.Taken)
			}
			// A look moves a due item it takes to the tail, where a pass
			// rotates the list up to it: the items that no take moved keep
			// one circle both ways.
			if !redistest.IsRotation(without(looked.List, looked.Taken), without(whole.List, whole.Taken)) || len(looked.List) != len(whole.List) {
				t.Errorf("looks left the list\n%q\npasses\n%q", looked.List, whole.List)
			}
			if fmt.Sprint(looked.Locks) != fmt.Sprint(whole.Locks) {
				t.Errorf("looks left the locks %q, passes %q", looked.Locks, whole.Locks)
			}
			if written[1] != written[0] {
				t.Errorf("looks wrote %s, passes %s", written[1], written[0])
			}
		})
	}
}

// without is list less every occurrence of the items in drop.
func without(list, drop []string) []string {
	var out []string
	for _, item := range list {
		if !slices.Contains(drop, item) {
			out = append(out, item)
		}
	}
	return out
}

// writtenKeys describes what the takes wrote under keys' prefix besides
// the list and the locks: the due index's members and the fencing token.
// The keys of the look's own bookkeeping, seen, untried and sweep, are left
// out.
func writtenKeys(t *testing.T, rdb *redis.Client, keys schema.Keys) string {
	t.Helper()
	var due, fence, other []string
	for _, k := range redistest.Dump(t, rdb, keys.Prefix+"*") {
		switch key := k.Name; {
		case key == keys.Due():
			for _, m := range k.Parts {
				due = append(due, m[:strings.LastIndexByte(m, ':')])
			}
			slices.Sort(due)
		case key == keys.Fence():
			fence = k.Parts
		case key == keys.List(), key == keys.Seen(), key == keys.Untried(), key == keys.Sweep(),
			strings.HasPrefix(key, keys.Prefix+"lock:"), strings.HasPrefix(key, keys.Prefix+"cooldown:"),
			strings.HasPrefix(key, keys.Prefix+"backoff:"), strings.HasPrefix(key, keys.Prefix+"pause:"):
		default:
			other = append(other, strings.TrimPrefix(key, keys.Prefix))
		}
	}
	return fmt.Sprintf("due %q, fence %q, others %q", due, fence, other)
}

// TestRotationKeepsAppendedItemsAppended: an item appended after the fleet
// tried the whole list stays among the appended items when a pass rotates
// the list before any look tried it: the next look takes it, rather than
// leaving it to a sweep.
func TestRotationKeepsAppendedItemsAppended(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "appended:", Colocated: true}
	redistest.Seed(t, rdb, keys.List(), "a", "b", "c")
	rdb.Set(ctx, keys.Seen(), 3, 0)
	rdb.Set(ctx, keys.Untried(), 0, 0)
	rdb.Set(ctx, keys.Lock("a"), "someone-else", time.Hour)
	rdb.RPush(ctx, keys.List(), "d")
	// Nobody sweeps: the look must find d as appended.
	rdb.Set(ctx, keys.Sweep(), "someone-else", time.Hour)

	var logs bytes.Buffer
	taker := testTaker(rdb, keys.Prefix, true, 0, &logs)
	if taken, err := taker.Pass().Take(ctx, nil); err != nil || taken.Item != "b" {
		t.Fatalf("the pass took %q (%v), want b", taken.Item, err)
	}
	if got := rdb.LRange(ctx, keys.List(), 0, -1).Val(); !slices.Equal(got, []string{"c", "d", "a", "b"}) {
		t.Fatalf("the list after the pass is %q", got)
	}
	if got := rdb.Get(ctx, keys.Seen()).Val(); got != "1" {
		t.Errorf("seen after rotating by 2 is %s, want 1: d is at 1", got)
	}
	if taken, err := taker.LookFirst().Take(ctx, nil); err != nil || taken.Item != "d" {
		t.Fatalf("the look took %q (%v), want d, appended before the rotation", taken.Item, err)
	}
}

// TestLookFirstPassTakesEachOnce: a pass that looks first and goes on after
// its takes (--parallel) takes each item at most once, even when a taken
// item's run has ended before the next take: once a look of the pass took
// an item, a look that finds nothing ends the pass.
func TestLookFirstPassTakesEachOnce(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "once:", Colocated: true}
	redistest.Seed(t, rdb, keys.List(), "a", "b")
	var logs bytes.Buffer
	pass := testTaker(rdb, keys.Prefix, true, 0, &logs).LookFirst()
	for _, want := range []string{"a", "b"} {
		taken, err := pass.Take(ctx, nil)
		if err != nil || taken.Item != want {
			t.Fatalf("took %q (%v), want %q", taken.Item, err, want)
		}
		// The run ends at once, and its lock is free again.
		rdb.Del(ctx, taken.Key)
	}
	if taken, err := pass.Take(ctx, nil); !errors.Is(err, ErrNoWork) {
		t.Fatalf("the third take of the pass took %q (%v), want no work", taken.Item, err)
	}
}

// TestLookHoldsPausedItems: an idle worker's look (look.lua) passes by a due
// item that an operator paused, as a take does, and looks at it again when
// the pause ends: at its expiry, or (for a pause without one) at the
// fleet's next sweep, which the index then leaves it to.
func TestLookHoldsPausedItems(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "look:", Colocated: true}
	redistest.Seed(t, rdb, keys.List(), "for-an-hour", "until-resumed")
	// The fleet has tried the list: only the due index is left to look at.
	rdb.Set(ctx, keys.Seen(), 2, 0)
	rdb.Set(ctx, keys.Untried(), 0, 0)
	rdb.HSet(ctx, keys.Pause("for-an-hour"), schema.PauseFieldReason, "flaky")
	rdb.PExpire(ctx, keys.Pause("for-an-hour"), time.Hour)
	rdb.HSet(ctx, keys.Pause("until-resumed"), schema.PauseFieldReason, "broken")
	rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: 0, Member: "for-an-hour"}, redis.Z{Score: 0, Member: "until-resumed"})

	var logs bytes.Buffer
	r := testTaker(rdb, keys.Prefix, true, 0, &logs)
	before := time.Now()
	if taken, err := r.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
		t.Fatalf("a look took %q (%v), want nothing: both items are paused", taken.Item, err)
	}
	due, err := rdb.ZRangeWithScores(ctx, keys.Due(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].Member != "for-an-hour" || due[0].Score < float64(before.Add(time.Hour-time.Minute).UnixMilli()) {
		t.Errorf("due index after the look: %v, want only for-an-hour, due when its pause ends in an hour", due)
	}

	rdb.Del(ctx, keys.Pause("for-an-hour"))
	rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: 0, Member: "for-an-hour"})
	taken, err := r.LookFirst().Take(ctx, nil)
	if err != nil || taken.Item != "for-an-hour" {
		t.Fatalf("a look after the pause was deleted took %q (%v), want for-an-hour", taken.Item, err)
	}
	if taken.Fence != 1 || rdb.Get(ctx, keys.Fence()).Val() != "1" {
		t.Errorf("the look's take has the fence %d, and the key %q; want 1", taken.Fence, rdb.Get(ctx, keys.Fence()).Val())
	}
}
