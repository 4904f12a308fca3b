package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// dump is redistest.Dump of every key under prefix, named without it, but
// the due index, which only the colocated path writes (idle workers read it
// only there).
func dump(t *testing.T, rdb *redis.Client, prefix string) []string {
	t.Helper()
	var out []string
	for _, k := range redistest.Dump(t, rdb, prefix+"*") {
		if k.Name == prefix+"due" {
			continue
		}
		k.Name = strings.TrimPrefix(k.Name, prefix)
		out = append(out, k.String())
	}
	return out
}

// seedFleet writes a fleet in the middle of its work under keys: a cools
// down and backs off, b runs (its lock held by "h"), c is paused.
func seedFleet(t *testing.T, rdb *redis.Client, keys schema.Keys) {
	t.Helper()
	ctx := context.Background()
	redistest.Seed(t, rdb, keys.List(), "a", "b", "c", "a")
	rdb.Set(ctx, keys.Cooldown("a"), "t", time.Hour)
	rdb.Set(ctx, keys.Backoff("a"), "t", time.Hour)
	rdb.HSet(ctx, keys.State("a"), schema.FieldRuns, 3)
	rdb.Set(ctx, keys.Lock("b"), "h", time.Hour)
	rdb.HSet(ctx, keys.Pause("c"), schema.PauseFieldReason, "old")
}

// TestVerbsBothWaysAlike: each verb leaves Redis the same and says the same
// whether it runs as one script (keys colocated) or as a command per key,
// and a refused command changes nothing either way.
func TestVerbsBothWaysAlike(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	now := time.UnixMilli(1_700_000_000_000)
	pause := Pause{Reason: "broken disk", For: time.Hour}
	steps := []struct {
		name string
		do   func(*Fleet) ([]Result, error)
		want string // the results, or the error's text
	}{
		{"add", func(f *Fleet) ([]Result, error) { return f.Add(ctx, []string{"c", "d"}, false) }, "c:0 d:1"},
		{"remove", func(f *Fleet) ([]Result, error) { return f.Remove(ctx, []string{"a", "b"}) }, "a:2 b:1(h)"},
		{"pause", func(f *Fleet) ([]Result, error) { return f.PauseItems(ctx, []string{"d"}, pause, now) }, "d:1"},
		{"resume", func(f *Fleet) ([]Result, error) { return f.Resume(ctx, []string{"c", "d"}) }, "c:1 d:1"},
		{"resume again", func(f *Fleet) ([]Result, error) { return f.Resume(ctx, []string{"c"}) }, "c:0"},
		{"run now", func(f *Fleet) ([]Result, error) { return f.RunNow(ctx, []string{"c"}) }, "c:0"},
		{"not in the list", func(f *Fleet) ([]Result, error) { return f.PauseItems(ctx, []string{"c", "zz"}, pause, now) }, `"zz" is not in the list`},
	}
	var dumps [2][]string
	for i, colocated := range []bool{false, true} {
		keys := schema.Keys{Prefix: fmt.Sprintf("v%v:", colocated), Colocated: colocated}
		seedFleet(t, rdb, keys)
		f := &Fleet{Client: rdb, Keys: keys}
		for _, st := range steps {
			got, err := st.do(f)
			if text := describe(got, err); !strings.Contains(text, st.want) {
				t.Errorf("colocated=%v, %s: %s, want %s", colocated, st.name, text, st.want)
			}
		}
		dumps[i] = dump(t, rdb, keys.Prefix)
		if colocated {
			// The script wakes an idle worker for each item that it made
			// takeable (add c, resume c and d, resume c, run c now), which
			// per-key commands, where no worker waits for a wake, do not.
			wake := `wake list ["1" "1" "1" "1" "1"] (expires)`
			if i := slices.Index(dumps[i], wake); i < 0 {
				t.Errorf("the script left %q, want the wake list %s", dumps[1], wake)
			} else {
				dumps[1] = slices.Delete(dumps[1], i, i+1)
			}
		}
	}
	if !slices.Equal(dumps[0], dumps[1]) {
		t.Errorf("per key left\n%q\nthe script\n%q", dumps[0], dumps[1])
	}
	// c never ran: run-now says that its slot has come, so that a worker
	// under a schedule runs it now, not at its first slot.
	want := []string{`list list ["c" "d"] (no expiry)`, `lock:b string "h" (expires)`, `state:c hash ["next_slot=0"] (expires)`}
	if !slices.Equal(dumps[1], want) {
		t.Errorf("left %q, want %q", dumps[1], want)
	}
}

// TestPauseRecordsWhoWhyAndWhen: the pause key holds the reason, who paused
// and when, and expires with --for; without --for it stays.
func TestPauseRecordsWhoWhyAndWhen(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	for _, colocated := range []bool{false, true} {
		// The script reads Redis' clock; the per-key path records now.
		now := rdb.Time(ctx).Val().Truncate(time.Millisecond)
		keys := schema.Keys{Prefix: fmt.Sprintf("p%v:", colocated), Colocated: colocated}
		seedFleet(t, rdb, keys)
		f := &Fleet{Client: rdb, Keys: keys, By: "me@here"}
		if _, err := f.PauseItems(ctx, []string{"a"}, Pause{Reason: "why", For: time.Minute}, now); err != nil {
			t.Fatal(err)
		}
		if _, err := f.PauseItems(ctx, []string{"b"}, Pause{Reason: ""}, now); err != nil {
			t.Fatal(err)
		}
		got := rdb.HGetAll(ctx, keys.Pause("a")).Val()
		at, _ := strconv.ParseInt(got["at"], 10, 64)
		if got["reason"] != "why" || got["by"] != "me@here" || at < now.UnixMilli() || at > now.UnixMilli()+10_000 {
			t.Errorf("colocated=%v: pause hash %v", colocated, got)
		}
		if ttl := rdb.PTTL(ctx, keys.Pause("a")).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("colocated=%v: pause --for 1m expires in %s", colocated, ttl)
		}
		if ttl := rdb.PTTL(ctx, keys.Pause("b")).Val(); ttl != -1 {
			t.Errorf("colocated=%v: a pause without --for expires in %s", colocated, ttl)
		}
	}
}

// TestEveryChangeIsRecorded: each verb adds to the events stream, for each
// item it changed, an entry of its type, the item and who gave it
// (Fleet.By), and for a pause its reason and length, in the order that
// the workers' events list their fields, whichever way it runs; an add of
// an item the list holds and a refused command record nothing. The stream
// keeps the expiry the workers gave it. Under a prefix without a stream
// (a fleet run with --no-events), the same commands start none.
func TestEveryChangeIsRecorded(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	now := time.UnixMilli(1_700_000_000_000)
	steps := []func(*Fleet) ([]Result, error){
		func(f *Fleet) ([]Result, error) { return f.Add(ctx, []string{"c", "d"}, false) },
		func(f *Fleet) ([]Result, error) { return f.Remove(ctx, []string{"a"}) },
		func(f *Fleet) ([]Result, error) {
			return f.PauseItems(ctx, []string{"d"}, Pause{Reason: "broken disk", For: time.Hour}, now)
		},
		func(f *Fleet) ([]Result, error) { return f.PauseItems(ctx, []string{"b"}, Pause{}, now) },
		func(f *Fleet) ([]Result, error) { return f.Resume(ctx, []string{"c", "d"}) },
		func(f *Fleet) ([]Result, error) { return f.RunNow(ctx, []string{"b"}) },
		func(f *Fleet) ([]Result, error) { return f.PauseItems(ctx, []string{"c", "zz"}, Pause{}, now) },
	}
	want := []string{
		"type=add item=d by=alice@host",
		"type=remove item=a by=alice@host",
		"type=pause item=d by=alice@host reason=broken disk for_ms=3600000",
		"type=pause item=b by=alice@host reason=",
		"type=resume item=c by=alice@host",
		"type=resume item=d by=alice@host",
		"type=run_now item=b by=alice@host",
	}
	for _, colocated := range []bool{false, true} {
		for _, events := range []bool{false, true} {
			keys := schema.Keys{Prefix: fmt.Sprintf("e%v%v:", colocated, events), Colocated: colocated}
			seedFleet(t, rdb, keys)
			if events {
				// A worker's start event, and the expiry its XADD set.
				rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Events(), Values: []any{"type", schema.EventStart, "item", "b"}})
				rdb.Expire(ctx, keys.Events(), time.Hour)
			}
			f := &Fleet{Client: rdb, Keys: keys, By: "alice@host"}
			for _, step := range steps {
				step(f)
			}
			if !events {
				if n := rdb.Exists(ctx, keys.Events()).Val(); n != 0 {
					t.Errorf("colocated=%v: the commands started an events stream", colocated)
				}
				continue
			}
			got := streamFields(t, rdb, keys.Events())
			if len(got) == 0 || !slices.Equal(got[1:], want) {
				t.Errorf("colocated=%v: the stream holds after the start\n%q\nwant\n%q", colocated, got[1:], want)
			}
			if ttl := rdb.PTTL(ctx, keys.Events()).Val(); ttl <= 0 {
				t.Errorf("colocated=%v: the stream lost its expiry (%s)", colocated, ttl)
			}
		}
	}
}

// streamFields is each entry of the stream as "name=value ...", in the
// order of its fields.
func streamFields(t *testing.T, rdb *redis.Client, stream string) []string {
	t.Helper()
	// XRANGE through Do: go-redis gives an entry's fields as a map.
	entries, err := rdb.Do(context.Background(), "XRANGE", stream, "-", "+").Slice()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, entry := range entries {
		values := entry.([]any)[1].([]any)
		var fields []string
		for i := 0; i+1 < len(values); i += 2 {
			fields = append(fields, fmt.Sprintf("%v=%v", values[i], values[i+1]))
		}
		out = append(out, strings.Join(fields, " "))
	}
	return out
}

// TestRefusedChangesNothing: a missing list, a list key of another type and
// an item the list lacks are refused, with ErrRefused, and leave Redis as
// it was.
func TestRefusedChangesNothing(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	rdb.HSet(ctx, "hash:list", "f", "v")
	tests := []struct {
		prefix string
		do     func(*Fleet) ([]Result, error)
		want   string
	}{
		{"missing:", func(f *Fleet) ([]Result, error) { return f.Add(ctx, []string{"a"}, false) }, "Give --create"},
		{"missing:", func(f *Fleet) ([]Result, error) { return f.RunNow(ctx, []string{"a"}) }, `"missing:list" does not exist`},
		{"hash:", func(f *Fleet) ([]Result, error) { return f.Add(ctx, []string{"a"}, true) }, "holds a hash, not a list"},
		{"hash:", func(f *Fleet) ([]Result, error) { return f.Remove(ctx, []string{"a"}) }, "holds a hash, not a list"},
	}
	for _, tt := range tests {
		for _, colocated := range []bool{false, true} {
			before := dump(t, rdb, "")
			_, err := tt.do(&Fleet{Client: rdb, Keys: schema.Keys{Prefix: tt.prefix, Colocated: colocated}})
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s colocated=%v: %v, want ErrRefused saying %q", tt.prefix, colocated, err, tt.want)
			}
			if after := dump(t, rdb, ""); !slices.Equal(before, after) {
				t.Errorf("%s colocated=%v changed Redis: %q, was %q", tt.prefix, colocated, after, before)
			}
		}
	}
	// add --create starts the list.
	got, err := (&Fleet{Client: rdb, Keys: schema.Keys{Prefix: "new:", Colocated: true}}).Add(ctx, []string{"a", "b"}, true)
	if describe(got, err) != "a:1 b:1" || !slices.Equal(rdb.LRange(ctx, "new:list", 0, -1).Val(), []string{"a", "b"}) {
		t.Errorf("add --create: %s, list %q", describe(got, err), rdb.LRange(ctx, "new:list", 0, -1).Val())
	}
}

// describe is results as "item:changed(holder) ...", or the error.
func describe(results []Result, err error) string {
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, r := range results {
		part := fmt.Sprintf("%s:%d", r.Item, r.Changed)
		if r.Holder != nil {
			part += "(" + *r.Holder + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, " ")
}

// TestRunNowClearsEverythingThatHoldsAnItem: run-now ends a failure
// backoff as it ends a cooldown and a pause, whichever way it runs (one
// script where the keys are colocated, a command per key elsewhere), and
// says how many it ended; where the script runs, the item is due at once.
func TestRunNowClearsEverythingThatHoldsAnItem(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000)
	for _, held := range []string{"backoff", "cooldown", "pause", "all"} {
		for _, colocated := range []bool{false, true} {
			keys := schema.Keys{Prefix: fmt.Sprintf("rn-%s-%v:", held, colocated), Colocated: colocated}
			redistest.Seed(t, rdb, keys.List(), "x")
			holds := map[string]string{"backoff": keys.Backoff("x"), "cooldown": keys.Cooldown("x"), "pause": keys.Pause("x")}
			set := 0
			for name, key := range holds {
				if held == name || held == "all" {
					rdb.Set(ctx, key, "t", time.Hour)
					set++
				}
			}
			got, err := (&Fleet{Client: rdb, Keys: keys}).RunNow(ctx, []string{"x"})
			if want := fmt.Sprintf("x:%d", set); describe(got, err) != want {
				t.Errorf("%s, colocated=%v: run-now said %s, want %s", held, colocated, describe(got, err), want)
			}
			for name, key := range holds {
				if rdb.Exists(ctx, key).Val() != 0 {
					t.Errorf("%s, colocated=%v: run-now left the %s", held, colocated, name)
				}
			}
			if score, err := rdb.ZScore(ctx, keys.Due(), "x").Result(); colocated && (err != nil || score > float64(now.UnixMilli())) {
				t.Errorf("%s, colocated=%v: x is due at %v (%v), want now", held, colocated, score, err)
			}
		}
	}
}
