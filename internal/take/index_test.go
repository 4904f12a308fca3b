package take

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// blocker is something that holds an item, set as another tool or an
// operator would set it, not by w8y.
type blocker struct {
	name string
	set  func(ctx context.Context, rdb *redis.Client, k schema.Keys, item string)
	// after is when the item may run again, from the moment it was set;
	// 0: never by itself (a key without an expiry).
	after time.Duration
}

// blockers are the ways an item is held that the due index must learn of
// when a take passes the item over.
func blockers() []blocker {
	return []blocker{
		{"a lock of another tool", func(ctx context.Context, rdb *redis.Client, k schema.Keys, item string) {
			rdb.Set(ctx, k.Lock(item), "other:1:x", 3*time.Second)
		}, 3 * time.Second},
		{"a cooldown set by hand", func(ctx context.Context, rdb *redis.Client, k schema.Keys, item string) {
			rdb.Set(ctx, k.Cooldown(item), "1", 5*time.Second)
		}, 5 * time.Second},
		{"a backoff set by hand", func(ctx context.Context, rdb *redis.Client, k schema.Keys, item string) {
			rdb.Set(ctx, k.Backoff(item), "1", 4*time.Second)
		}, 4 * time.Second},
		{"a pause with an expiry", func(ctx context.Context, rdb *redis.Client, k schema.Keys, item string) {
			rdb.HSet(ctx, k.Pause(item), schema.PauseFieldReason, "hand")
			rdb.PExpire(ctx, k.Pause(item), 6*time.Second)
		}, 6 * time.Second},
		{"a lock and a longer cooldown: the later", func(ctx context.Context, rdb *redis.Client, k schema.Keys, item string) {
			rdb.Set(ctx, k.Lock(item), "other:1:x", 2*time.Second)
			rdb.Set(ctx, k.Cooldown(item), "1", 7*time.Second)
		}, 7 * time.Second},
		{"a lock without an expiry", func(ctx context.Context, rdb *redis.Client, k schema.Keys, item string) {
			rdb.Set(ctx, k.Lock(item), "other:1:x", 0)
		}, 0},
		{"a pause without an expiry", func(ctx context.Context, rdb *redis.Client, k schema.Keys, item string) {
			rdb.HSet(ctx, k.Pause(item), schema.PauseFieldReason, "hand")
		}, 0},
	}
}

// TestPassedItemsComeDue pins the three ways an item that something holds
// is passed over to one outcome: a pass over the list (batch.lua), a look at
// the appended items (look.lua) and a step of the fleet's sweep each give
// it an entry in the due index for the moment its blocker expires, read
// from the blocker itself, so that the fleet tries it again then, whoever
// set the blocker; and none where the blocker never expires, which the
// sweep finds once it is gone. Without the entry, a busy fleet, which
// takes only what the index and the appended items offer, would never
// come back to the item.
func TestPassedItemsComeDue(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	ways := []struct {
		name string
		// take passes over x, held, on a list prepared for the way.
		take func(t *testing.T, k schema.Keys, taker *Taker)
	}{
		{"a pass", func(t *testing.T, k schema.Keys, taker *Taker) {
			redistest.Seed(t, rdb, k.List(), "x", "f")
			if taken, err := taker.Pass().Take(ctx, nil); err != nil || taken.Item != "f" {
				t.Fatalf("the pass took %q (%v), want f", taken.Item, err)
			}
		}},
		{"a look at the appended items", func(t *testing.T, k schema.Keys, taker *Taker) {
			redistest.Seed(t, rdb, k.List(), "x", "f")
			rdb.Set(ctx, k.Seen(), 0, 0)
			rdb.Set(ctx, k.Untried(), 0, 0)
			rdb.Set(ctx, k.Sweep(), "0", time.Hour)
			if taken, err := taker.LookFirst().Take(ctx, nil); err != nil || taken.Item != "f" {
				t.Fatalf("the look took %q (%v), want f", taken.Item, err)
			}
		}},
		{"a step of the sweep", func(t *testing.T, k schema.Keys, taker *Taker) {
			redistest.Seed(t, rdb, k.List(), "x")
			rdb.Set(ctx, k.Seen(), 1, 0)
			rdb.Set(ctx, k.Untried(), 0, 0)
			if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
				t.Fatalf("the look: %v, want no work", err)
			}
			if n := rdb.Exists(ctx, k.Sweep()).Val(); n != 1 {
				t.Fatalf("the step over the whole list did not end the sweep")
			}
		}},
	}
	for n, b := range blockers() {
		t.Run(b.name, func(t *testing.T) {
			var entries []string
			for w, way := range ways {
				k := schema.Keys{Prefix: fmt.Sprintf("passed%d.%d:", n, w), Colocated: true}
				var logs bytes.Buffer
				taker := testTaker(rdb, k.Prefix, true, 0, &logs)
				set := time.Now()
				b.set(ctx, rdb, k, "x")
				way.take(t, k, taker)
				score, err := rdb.ZScore(ctx, k.Due(), "x").Result()
				switch {
				case b.after == 0 && errors.Is(err, redis.Nil):
					entries = append(entries, "none")
				case b.after == 0:
					t.Errorf("%s: x has an entry at %v (%v), want none: its blocker never expires", way.name, score, err)
				case err != nil:
					t.Errorf("%s: x has no entry (%v), want one for when its blocker expires", way.name, err)
				default:
					at := time.UnixMilli(int64(score))
					if want := set.Add(b.after); at.Before(want.Add(-time.Second)) || at.After(want.Add(time.Second)) {
						t.Errorf("%s: x's entry is %s after the blocker was set, want %s", way.name, at.Sub(set), b.after)
					}
					entries = append(entries, "at the blocker's end")
				}
			}
			if len(entries) == len(ways) && strings.Count(strings.Join(entries, "|"), entries[0]) != len(ways) {
				t.Errorf("the ways differ: %q", entries)
			}
		})
	}
}

// TestSweepFindsWhatOnlyItCan: each way an item ends up with no usable
// entry in the due index while nothing holds it (its entry lost, a
// cooldown or pause deleted by hand, an item appended behind an outside
// LREM) leaves it to the fleet's sweep, whose step, when it is due, gives
// the item an entry that the same look takes; while the sweep is not due,
// no look takes it (so it is the sweep that finds it).
func TestSweepFindsWhatOnlyItCan(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	tests := []struct {
		name string
		// lose leaves x, at the list's tail behind a and b (both held),
		// with no usable entry.
		lose func(k schema.Keys)
	}{
		{"its entry lost", func(k schema.Keys) {
			rdb.ZRem(ctx, k.Due(), "x")
		}},
		{"the whole index lost", func(k schema.Keys) {
			rdb.Del(ctx, k.Due())
		}},
		{"its cooldown deleted by hand", func(k schema.Keys) {
			rdb.ZAdd(ctx, k.Due(), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "x"})
		}},
		{"its backoff shortened by hand", func(k schema.Keys) {
			rdb.ZAdd(ctx, k.Due(), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "x"})
			rdb.Set(ctx, k.Backoff("x"), "1", 50*time.Millisecond)
			poll.WaitFor(t, "the backoff to expire", func() bool { return rdb.Exists(ctx, k.Backoff("x")).Val() == 0 })
		}},
		{"a pause without expiry deleted by hand", func(k schema.Keys) {
			// w8y dropped its entry when the pause was found; the pause is
			// gone now.
			rdb.ZRem(ctx, k.Due(), "x")
		}},
		{"appended behind an outside LREM", func(k schema.Keys) {
			// The mark counted x as tried when an item before it went.
			rdb.ZRem(ctx, k.Due(), "x")
			rdb.Set(ctx, k.Seen(), 3, 0)
		}},
	}
	for n, tt := range tests {
		for _, due := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, sweep due %v", tt.name, due), func(t *testing.T) {
				k := schema.Keys{Prefix: fmt.Sprintf("lost%d.%v:", n, due), Colocated: true}
				redistest.Seed(t, rdb, k.List(), "a", "b", "x")
				rdb.Set(ctx, k.Seen(), 3, 0)
				rdb.Set(ctx, k.Untried(), 0, 0)
				for _, item := range []string{"a", "b"} {
					rdb.Set(ctx, k.Cooldown(item), "1", time.Hour)
					rdb.ZAdd(ctx, k.Due(), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: item})
				}
				rdb.ZAdd(ctx, k.Due(), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "x"})
				tt.lose(k)
				if !due {
					rdb.Set(ctx, k.Sweep(), "0", time.Hour)
				}
				var logs bytes.Buffer
				taker := testTaker(rdb, k.Prefix, true, 0, &logs)
				taken, err := taker.LookFirst().Take(ctx, nil)
				switch {
				case due && (err != nil || taken.Item != "x"):
					t.Errorf("with the sweep due, the look took %q (%v), want x", taken.Item, err)
				case due && !strings.Contains(logs.String(), "the fleet's sweep found items"):
					t.Errorf("the look did not say that the sweep found x: %s", logs.String())
				case !due && !errors.Is(err, ErrNoWork):
					t.Errorf("with the sweep not due, the look took %q (%v), want nothing", taken.Item, err)
				}
				// a and b are held: their entries stay where they were.
				for _, item := range []string{"a", "b"} {
					score, err := rdb.ZScore(ctx, k.Due(), item).Result()
					if errors.Is(err, redis.Nil) && !due {
						continue // the index lost, and no sweep yet
					}
					if time.UnixMilli(int64(score)).Before(time.Now().Add(59 * time.Minute)) {
						t.Errorf("%s's entry is %v (%v), though its cooldown holds it for an hour", item, score, err)
					}
				}
			})
		}
	}
}

// TestSweepEvery: the fleet waits between sweeps SweepPerItem for each
// item, at least SweepMin and at most SweepMax; the step that ends a sweep
// (and the first look at a list) sets the sweep key for as long, as
// index.lua reckons it.
func TestSweepEvery(t *testing.T) {
	tests := []struct {
		length int64
		want   time.Duration
	}{
		{0, 5 * time.Second},
		{1, 5 * time.Second},
		{833, 5 * time.Second},
		{1_000, 6 * time.Second},
		{3_000, 18 * time.Second},
		{100_000, 600 * time.Second},
		{600_000, time.Hour},
		{1_000_000, time.Hour},
		{10_000_000, time.Hour},
		{1 << 62, time.Hour},
	}
	for _, tt := range tests {
		if got := SweepEvery(tt.length); got != tt.want {
			t.Errorf("SweepEvery(%d) = %s, want %s", tt.length, got, tt.want)
		}
	}

	rdb := redistest.Start(t).Client
	ctx := context.Background()
	for _, n := range []int{3, 3_000, 30_000} {
		k := schema.Keys{Prefix: fmt.Sprintf("every%d:", n), Colocated: true}
		items := redistest.Items(n)
		redistest.Seed(t, rdb, k.List(), items...)
		var logs bytes.Buffer
		taker := testTaker(rdb, k.Prefix, true, 0, &logs)
		// The first look at a list waits a whole interval for its sweep.
		if _, err := taker.LookFirst().Take(ctx, nil); err != nil {
			t.Fatal(err)
		}
		checkSweepKey(t, rdb, k, SweepEvery(int64(n)), "after the first look")
		// A sweep from its first step to its last, every item held: an
		// idle worker's take drives it, a step after another, and takes
		// nothing.
		for _, item := range items {
			rdb.Set(ctx, k.Cooldown(item), "1", time.Hour)
		}
		rdb.Set(ctx, k.Untried(), 0, 0)
		rdb.Set(ctx, k.Seen(), n, 0)
		rdb.Del(ctx, k.Sweep())
		before := redistest.CommandStats(t, rdb)["lrange"]
		if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
			t.Fatalf("a look over cooling items: %v", err)
		}
		steps := redistest.CommandStats(t, rdb)["lrange"] - before
		if want := (n + SweepStep - 1) / SweepStep; steps != want {
			t.Errorf("%d items took %d steps, want %d", n, steps, want)
		}
		checkSweepKey(t, rdb, k, SweepEvery(int64(n)), "after the sweep")
		if got := rdb.ZCard(ctx, k.Due()).Val(); got != int64(n) {
			t.Errorf("the sweep left %d entries for %d cooling items", got, n)
		}
	}
}

// checkSweepKey fails t unless the sweep key expires in about want.
func checkSweepKey(t *testing.T, rdb *redis.Client, k schema.Keys, want time.Duration, when string) {
	t.Helper()
	if got := rdb.PTTL(context.Background(), k.Sweep()).Val(); got > want || got < want-2*time.Second {
		t.Errorf("%s, the sweep key of a list of %d expires in %s, want %s", when, rdb.LLen(context.Background(), k.List()).Val(), got, want)
	}
}

// TestSweepReadsEveryItemWhileTheListMoves: a sweep goes from the list's
// tail to its head a step at a time while takes and outside writers move
// the list between its steps (a pass rotating its head to its tail, a look
// moving the item it takes to the tail, an outside LREM or RPUSH), and
// still reads every item that the list held throughout: each ends the sweep
// with an entry, those that the test's takes moved from theirs, the others
// from the sweep's.
func TestSweepReadsEveryItemWhileTheListMoves(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	for seed := range uint64(20) {
		k := schema.Keys{Prefix: fmt.Sprintf("moves%d:", seed), Colocated: true}
		items := redistest.Items(200)
		redistest.Seed(t, rdb, k.List(), items...)
		rdb.Set(ctx, k.Seen(), len(items), 0)
		rdb.Set(ctx, k.Untried(), 0, 0)
		// Every item cools for an hour, so that no look takes one, and none
		// has an entry: only the sweep gives them one.
		for _, item := range items {
			rdb.Set(ctx, k.Cooldown(item), "1", time.Hour)
		}
		removed := map[string]bool{}
		var logs bytes.Buffer
		taker := testTaker(rdb, k.Prefix, true, 0, &logs)
		r := rand.New(rand.NewPCG(seed, 7))
		var ops []string
		for step := 0; rdb.Exists(ctx, k.Sweep()).Val() == 0; step++ {
			if step > 100 {
				t.Fatalf("seed %d: 100 steps of 7 have not swept 200 items", seed)
			}
			args := taker.lookArgs("")
			args[4] = strings.Replace(args[4].(string), fmt.Sprintf("sweep=%d", SweepStep), "sweep=7", 1)
			if err := lookScript.Run(ctx, rdb, []string{k.List()}, args...).Err(); err != nil {
				t.Fatal(err)
			}
			list := rdb.LRange(ctx, k.List(), 0, -1).Val()
			switch op := r.IntN(4); op {
			case 0:
				// A pass rotates its head; what it passes over or takes has
				// an entry (batch.lua, indexPassed).
				turn := 1 + r.IntN(5)
				for _, item := range list[:turn] {
					rdb.ZAdd(ctx, k.Due(), redis.Z{Score: 1, Member: item})
					rdb.RPush(ctx, k.List(), item)
				}
				rdb.LTrim(ctx, k.List(), int64(turn), -1)
				ops = append(ops, fmt.Sprintf("rotate %d", turn))
			case 1:
				// A look moves the item it took to the tail, with an entry.
				item := list[r.IntN(len(list))]
				rdb.ZAdd(ctx, k.Due(), redis.Z{Score: 1, Member: item})
				rdb.RPush(ctx, k.List(), item)
				rdb.LRem(ctx, k.List(), 1, item)
				ops = append(ops, "move "+item)
			case 2:
				item := list[r.IntN(len(list))]
				rdb.LRem(ctx, k.List(), 0, item)
				removed[item] = true
				ops = append(ops, "LREM "+item)
			case 3:
				item := fmt.Sprintf("new%d", step)
				rdb.RPush(ctx, k.List(), item)
				removed[item] = true // appended: the looks' to try, not the sweep's
				ops = append(ops, "RPUSH "+item)
			}
		}
		for _, item := range items {
			if removed[item] {
				continue
			}
			if err := rdb.ZScore(ctx, k.Due(), item).Err(); err != nil {
				t.Errorf("seed %d: the sweep did not read %s (ops %q)", seed, item, ops)
			}
		}
	}
}

// TestDocsSweepTable: docs/how-it-works.md's table of the sweep's interval
// and steps for 1,000, 100,000 and 1,000,000 items is what SweepEvery and
// SweepStep give.
func TestDocsSweepTable(t *testing.T) {
	page := doctest.Page(t, "docs/how-it-works.md")
	rows := regexp.MustCompile(`(?m)^\| ([\d,]+) items \| (\d+[sm]) \| ([\d,]+) looks? \|`)
	found := 0
	for _, m := range rows.FindAllStringSubmatch(page, -1) {
		n, _ := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
		every := SweepEvery(n)
		want := every.String()
		switch {
		case every >= time.Minute && every%time.Minute == 0:
			want = fmt.Sprintf("%dm", int(every/time.Minute))
		case every%time.Second == 0:
			want = fmt.Sprintf("%ds", int(every/time.Second))
		}
		if m[2] != want {
			t.Errorf("the page says S is %s for %s items; SweepEvery says %s", m[2], m[1], want)
		}
		steps := (n + SweepStep - 1) / SweepStep
		if got, _ := strconv.ParseInt(strings.ReplaceAll(m[3], ",", ""), 10, 64); got != steps {
			t.Errorf("the page says a sweep of %s items takes %s looks; SweepStep says %d", m[1], m[3], steps)
		}
		found++
	}
	if found != 3 {
		t.Errorf("read %d rows of the sweep's table, want 3", found)
	}
}

// TestSweepHasOneDriver: the worker that made a sweep's last step drives
// it: another worker's look within sweepLease makes no step (a fleet of
// idle workers does not step all at once), and takes over once the driver
// has made none for that long (it took an item, or died).
func TestSweepHasOneDriver(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	k := schema.Keys{Prefix: "driver:", Colocated: true}
	items := redistest.Items(3 * SweepStep)
	redistest.Seed(t, rdb, k.List(), items...)
	for _, item := range items {
		rdb.Set(ctx, k.Cooldown(item), "1", time.Hour)
	}
	rdb.Set(ctx, k.Seen(), len(items), 0)
	rdb.Set(ctx, k.Untried(), 0, 0)
	var logs bytes.Buffer
	a, b := testTaker(rdb, k.Prefix, true, 0, &logs), testTaker(rdb, k.Prefix, true, 0, &logs)
	b.Token = "other:2:token"
	step := func(taker *Taker) (stepped bool, sweeping int64) {
		t.Helper()
		before := redistest.CommandStats(t, rdb)["lrange"]
		got, err := lookScript.Run(ctx, rdb, []string{k.List()}, taker.lookArgs("")...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return redistest.CommandStats(t, rdb)["lrange"] > before, got[5].(int64)
	}
	if stepped, sweeping := step(a); !stepped || sweeping != 1 {
		t.Fatalf("the first look: stepped %v, sweeping %d; want a step, and more to come", stepped, sweeping)
	}
	if stepped, sweeping := step(b); stepped || sweeping != 0 {
		t.Errorf("another worker's look while the first drives: stepped %v, sweeping %d; want neither", stepped, sweeping)
	}
	if stepped, _ := step(a); !stepped {
		t.Errorf("the driver's next look made no step")
	}
	// The driver stops: its last step is older than the lease.
	mark := strings.Fields(rdb.Get(ctx, k.Swept()).Val())
	mark[3] = strconv.FormatInt(time.Now().Add(-2*sweepLease).UnixMilli(), 10)
	rdb.Set(ctx, k.Swept(), strings.Join(mark, " "), time.Hour)
	if stepped, sweeping := step(b); !stepped || sweeping != 0 {
		t.Errorf("another worker's look after the lease: stepped %v, sweeping %d; want the last step", stepped, sweeping)
	}
	if rdb.Exists(ctx, k.Sweep()).Val() != 1 || rdb.ZCard(ctx, k.Due()).Val() != int64(len(items)) {
		t.Errorf("after three steps the sweep is not over, or left items without an entry")
	}
}
