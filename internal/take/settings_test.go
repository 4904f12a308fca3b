package take

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/settings"
)

// TestTakesApplyItemSettings: every way of a take (the pass per candidate,
// the batched pass, the look) returns an item's own settings with its
// lock, as the Run they make of the worker's options; a value that does
// not read is told of once, and the worker's option stands; an item never
// run under its own schedule is not returned but given back, with a
// cooldown until its first slot and the slot in its state, and no start
// recorded. All three leave Redis alike.
func TestTakesApplyItemSettings(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	ways := []struct {
		name      string
		colocated bool
		pass      func(*Taker) *Pass
	}{
		{"each", false, (*Taker).Pass},
		{"batch", true, (*Taker).Pass},
		{"look", true, (*Taker).LookFirst},
	}
	var dumps []string
	for _, way := range ways {
		var logs bytes.Buffer
		tk := testTaker(rdb, way.name+":", way.colocated, 2, &logs)
		tk.Record = &finish.Recorder{Keys: tk.Keys, StateTTL: time.Hour, EventsMaxLen: 100}
		tk.Settings = settings.Defaults{Run: settings.Run{Timeout: time.Minute}}
		tk.NewItemsWait, tk.Told = true, &settings.Told{Log: tk.Log}
		k := tk.Keys
		rdb.RPush(ctx, k.List(), "plain", "long", "hourly", "typo")
		rdb.HSet(ctx, k.Settings("long"), settings.Timeout, "2h0m0s", settings.Cooldown, "1h0m0s")
		rdb.HSet(ctx, k.Settings("hourly"), settings.Schedule, "0 * * * *")
		rdb.HSet(ctx, k.Settings("typo"), settings.Timeout, "ten minutes")

		runs := map[string]*settings.Run{}
		for range 2 {
			for {
				taken, err := way.pass(tk).Take(ctx, nil)
				if errors.Is(err, ErrNoWork) {
					break
				}
				if err != nil {
					t.Fatalf("%s: %v", way.name, err)
				}
				runs[taken.Item] = taken.Run
				if _, err := finish.Release(ctx, rdb, taken.Key, taken.Token, taken.Item); err != nil {
					t.Fatal(err)
				}
				// Taken once each pass: a cooldown, as a finish would set.
				rdb.Set(ctx, k.Cooldown(taken.Item), "t", time.Hour)
			}
			for _, item := range []string{"plain", "long", "typo"} {
				rdb.Del(ctx, k.Cooldown(item))
			}
		}
		if r := runs["plain"]; r != nil {
			t.Errorf("%s: plain, without settings, came with %+v", way.name, *r)
		}
		if r := runs["long"]; r == nil || r.Timeout != 2*time.Hour || r.Schedule.Cooldown != time.Hour {
			t.Errorf("%s: long came with %+v, want its own timeout and cooldown", way.name, r)
		}
		if r := runs["typo"]; r == nil || r.Timeout != time.Minute {
			t.Errorf("%s: typo came with %+v, want the worker's timeout", way.name, r)
		}
		if n := strings.Count(logs.String(), "does not read"); n != 1 {
			t.Errorf("%s: told %d times of typo's timeout, want once:\n%s", way.name, n, logs.String())
		}
		if _, ok := runs["hourly"]; ok {
			t.Errorf("%s: hourly, never run, was returned rather than wait for its first slot", way.name)
		}
		slot := rdb.HGet(ctx, k.State("hourly"), schema.FieldNextSlot).Val()
		if next := time.Now().Truncate(time.Hour).Add(time.Hour).UnixMilli(); slot != strconv.FormatInt(next, 10) {
			t.Errorf("%s: hourly waits for %q, want its first slot %d", way.name, slot, next)
		}
		if pttl := rdb.PTTL(ctx, k.Cooldown("hourly")).Val(); pttl <= 0 || pttl > time.Hour {
			t.Errorf("%s: hourly's cooldown expires in %s, want at its first slot", way.name, pttl)
		}
		if rdb.HExists(ctx, k.State("hourly"), schema.FieldLastStart).Val() || rdb.Exists(ctx, k.Lock("hourly")).Val() != 0 {
			t.Errorf("%s: hourly's take recorded a start, or kept its lock", way.name)
		}
		if way.colocated && rdb.ZScore(ctx, k.Locks(), "hourly").Err() == nil {
			t.Errorf("%s: the counts' index of locks still counts hourly, whose lock went back", way.name)
		}
		for _, e := range rdb.XRange(ctx, k.Events(), "-", "+").Val() {
			if e.Values["item"] == "hourly" {
				t.Errorf("%s: an event of hourly, which never ran: %v", way.name, e.Values)
			}
		}
		var dump []string
		for _, key := range redistest.Dump(t, rdb, k.Prefix+"*") {
			name := strings.TrimPrefix(key.Name, k.Prefix)
			if strings.HasPrefix(name, "cooldown:") || strings.HasPrefix(name, "settings:") || name == "list" {
				dump = append(dump, name)
			}
		}
		slices.Sort(dump)
		dumps = append(dumps, strings.Join(dump, " "))
	}
	for i := range dumps[1:] {
		if dumps[i+1] != dumps[0] {
			t.Errorf("%s left %q, %s %q", ways[i+1].name, dumps[i+1], ways[0].name, dumps[0])
		}
	}
}

// TestFinishThenLookParksANewItem: a busy worker's finish, which takes its
// next item in the same call, gives back a new item that waits for its
// first slot, as a take of its own does, and returns none.
func TestFinishThenLookParksANewItem(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	var logs bytes.Buffer
	tk := testTaker(rdb, "n:", true, 0, &logs)
	rec := &finish.Recorder{Keys: tk.Keys, StateTTL: time.Hour, EventsMaxLen: 100}
	tk.Record, tk.NewItemsWait = rec, true
	rdb.RPush(ctx, tk.Keys.List(), "a")
	taken, err := tk.LookFirst().Take(ctx, nil)
	if err != nil || taken.Item != "a" {
		t.Fatalf("the first take: %v, %v", taken.Item, err)
	}
	rdb.RPush(ctx, tk.Keys.List(), "hourly")
	rdb.HSet(ctx, tk.Keys.Settings("hourly"), settings.Schedule, "0 * * * *")
	f := &finish.Finisher{Client: rdb, Record: rec, Schedule: finish.Schedule{Cooldown: time.Hour}}
	_, next, ok, err := tk.FinishThenLook(ctx, f, taken.Key, taken.Token, finish.End{Item: "a", Result: schema.ResultSuccess, Exited: true})
	if err != nil || ok {
		t.Fatalf("FinishThenLook took %q (%v, %v), want nothing: hourly waits for its first slot", next.Item, ok, err)
	}
	if rdb.HGet(ctx, tk.Keys.State("hourly"), schema.FieldNextSlot).Val() == "" || rdb.Exists(ctx, tk.Keys.Lock("hourly")).Val() != 0 ||
		rdb.PTTL(ctx, tk.Keys.Cooldown("hourly")).Val() <= 0 {
		t.Errorf("hourly was not given back to wait for its first slot: %q", redistest.Dump(t, rdb, "n:*"))
	}
}
