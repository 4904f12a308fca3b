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

// TestProbeSaysWhatALookWouldFind pins an idle worker's probe to the look it
// stands for: on a list that the fleet has tried whole (every item cooling,
// the sweep done), after each change below, the probe says whether a look
// could find anything, and a look then does what the probe said. Where the
// probe says no, the look takes nothing, elects no sweep, and leaves the
// list, the due index, the marks and every other key as they were: the
// worker that skips it leaves Redis as the look would have.
func TestProbeSaysWhatALookWouldFind(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	tests := []struct {
		name   string
		change func(k schema.Keys)
		worth  bool
		taken  string // what the look takes, if anything
	}{
		{"nothing changed", func(schema.Keys) {}, false, ""},
		{"an outside RPUSH", func(k schema.Keys) { rdb.RPush(ctx, k.List(), "new") }, true, "new"},
		{"run-now", func(k schema.Keys) { rdb.Del(ctx, k.Cooldown("i1")); rdb.ZAdd(ctx, k.Due(), z(0, "i1")) }, true, "i1"},
		{"a due entry of an item that still cools down", func(k schema.Keys) { rdb.ZAdd(ctx, k.Due(), z(0, "i2")) }, true, ""},
		{"an entry that comes due later", func(k schema.Keys) {
			rdb.ZAdd(ctx, k.Due(), z(float64(time.Now().Add(time.Hour).UnixMilli()), "i2"))
		}, false, ""},
		{"the sweep key gone", func(k schema.Keys) { rdb.Del(ctx, k.Sweep()) }, true, ""},
		{"an outside LREM", func(k schema.Keys) { rdb.LRem(ctx, k.List(), 1, "i3") }, true, ""},
		{"the list emptied", func(k schema.Keys) { rdb.Del(ctx, k.List()) }, true, ""},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := schema.Keys{Prefix: fmt.Sprintf("probe%d:", n), Colocated: true}
			takeSetup{items: redistest.Items(5), cooling: redistest.Items(5)}.seed(t, rdb, keys)
			var logs bytes.Buffer
			taker := testTaker(rdb, keys.Prefix, true, 2, &logs)
			// The fleet tries the list whole (its head untried), and waits
			// an hour for the next sweep.
			rdb.Set(ctx, keys.Sweep(), "0", time.Hour)
			for range 4 {
				if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
					t.Fatalf("a take over a cooling list: %v, want no work", err)
				}
			}
			if !taker.Memory.look.quiet {
				t.Fatal("after the sweep, the last look did not find nothing")
			}
			tt.change(keys)
			before := snapshot(t, rdb, keys)
			pass := taker.LookFirst()
			if got, full := pass.probe(ctx); got != tt.worth || full != nil {
				t.Errorf("the probe says %v (full %v), want %v", got, full, tt.worth)
			}
			look, err := pass.look(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if look.ok != (tt.taken != "") || look.taken.Item != tt.taken {
				t.Errorf("the look took %q (%v), want %q", look.taken.Item, look.ok, tt.taken)
			}
			if !tt.worth {
				if look.pass || look.more || look.untried > 0 {
					t.Errorf("the look found %+v where the probe said no", look)
				}
				if after := snapshot(t, rdb, keys); after != before {
					t.Errorf("the look wrote where the probe said no:\nbefore %s\nafter  %s", before, after)
				}
			}
		})
	}
}

// snapshot describes every key under keys' prefix with its value, for
// TestProbeSaysWhatALookWouldFind: the list in order, the due index with
// its scores, the marks, the locks, cooldowns and the fencing token.
func snapshot(t *testing.T, rdb *redis.Client, keys schema.Keys) string {
	t.Helper()
	return describe(t, rdb, keys, true)
}

// describe shows every key under keys' prefix (redistest.Dump): lists in
// order, sorted sets with their scores (or, unless scores, their members in
// order of them), strings, hashes less the times of a run's start and end,
// and streams' entries without their IDs, each marked when it expires.
// Without scores, nothing in it depends on the moment of a call.
func describe(t *testing.T, rdb *redis.Client, keys schema.Keys, scores bool) string {
	t.Helper()
	var out []string
	for _, k := range redistest.Dump(t, rdb, keys.Prefix+"*") {
		var value any = k.Parts
		switch {
		case k.Name == keys.Sweep():
			// When the last sweep ended: its presence is what matters.
			value = "(set)"
		case k.Type == "string":
			value = k.Parts[0]
		case k.Type == "zset" && !scores:
			members := make([]string, len(k.Parts))
			for i, m := range k.Parts {
				members[i] = m[:strings.LastIndexByte(m, ':')]
			}
			value = members
		case k.Type == "hash":
			value = slices.DeleteFunc(k.Parts, func(f string) bool {
				return strings.HasPrefix(f, schema.FieldLastStart+"=") || strings.HasPrefix(f, schema.FieldLastEnd+"=")
			})
		}
		line := fmt.Sprintf("%s=%v", strings.TrimPrefix(k.Name, keys.Prefix), value)
		if k.TTL > 0 {
			line += " (expires)"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// z is a sorted set's member with its score.
func z(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// TestProbeCountsThePlaces: with --fleet-max-running, a worker waiting for a
// place probes as an idle one does, and the probe counts the places as
// place.lua does: every place's lock alive is "no", as the look that would
// take nothing; a place whose lock is gone (its worker died, or its run
// ended) is "yes", and the look then takes the item that came due.
func TestProbeCountsThePlaces(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "places:", Colocated: true}
	takeSetup{items: redistest.Items(5), cooling: redistest.Items(5)}.seed(t, rdb, keys)
	var logs bytes.Buffer
	taker := testTaker(rdb, keys.Prefix, true, 2, &logs)
	taker.FleetMax = 2
	rdb.Set(ctx, keys.Sweep(), "0", time.Hour)
	for _, lock := range []string{keys.Lock("x"), keys.Lock("y")} {
		rdb.Set(ctx, lock, "another", time.Hour)
		rdb.SAdd(ctx, keys.Running(), lock)
	}
	for range 4 {
		if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
			t.Fatalf("a take over a cooling list: %v, want no work", err)
		}
	}
	// Run now: due, but both places are in use.
	rdb.Del(ctx, keys.Cooldown("i1"))
	rdb.ZAdd(ctx, keys.Due(), z(0, "i1"))
	if taken, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrFull) {
		t.Fatalf("a take with every place in use: %+v, %v; want ErrFull", taken, err)
	}
	before := snapshot(t, rdb, keys)
	if worth, full := taker.LookFirst().probe(ctx); worth || full != ErrFull {
		t.Errorf("the probe says %v (full %v) while every place is in use, want no, full", worth, full)
	}
	if after := snapshot(t, rdb, keys); after != before {
		t.Errorf("the probe wrote:\nbefore %s\nafter  %s", before, after)
	}
	// A dead worker's lock expires: its place is free, though its member
	// is still in the set.
	rdb.Del(ctx, keys.Lock("y"))
	pass := taker.LookFirst()
	if worth, full := pass.probe(ctx); !worth || full != nil {
		t.Errorf("the probe says %v (full %v) with a place free, want yes", worth, full)
	}
	if taken, err := pass.Take(ctx, nil); err != nil || taken.Item != "i1" {
		t.Errorf("the take with a place free: %+v, %v; want i1", taken, err)
	}
}
