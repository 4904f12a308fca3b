package take

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestScheduleCountsRedisTake: under --schedule, a run's start is its take
// as Redis ran it (the state hash's last_start), not the moment the take
// was sent by this host's estimate of Redis' clock, which a take sent just
// before a slot and run by Redis just after it would put in the slot
// before. The worker's clock here is 300ms behind Redis' and the take comes
// just after a slot begins: the run's success must cool the item down until
// the slot after its take, not leave it due again in the slot it ran in
// (the whole suite saw a scheduled item start twice in one slot this way).
// Every way to take is tried: the pass (batch.lua), the look (look.lua) and
// the pass per candidate of keys that may live on other servers (each.lua).
// So is a worker whose estimate of Redis' clock is five minutes wrong
// either way (as a one-shot run's is, which reads no TIME without
// --schedule, when an item's own settings give it one): the cooldown still
// ends at the slot after the take, neither at once (the same slot again)
// nor five minutes late.
func TestScheduleCountsRedisTake(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	cron, err := finish.ParseCron("*/2 * * * * *", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	type way struct {
		name            string
		look, colocated bool
		off             time.Duration
	}
	var ways []way
	for _, off := range []time.Duration{-300 * time.Millisecond, 5 * time.Minute, -5 * time.Minute} {
		ways = append(ways, way{"batch.lua", false, true, off}, way{"look.lua", true, true, off}, way{"each.lua", false, false, off})
	}
	for _, way := range ways {
		name := fmt.Sprintf("%s, clock off by %s", way.name, way.off)
		behind := &clock.Clock{}
		now := time.Now()
		behind.Set(now.Add(way.off), now, now)
		keys := schema.Keys{Prefix: fmt.Sprintf("slot:%v:%v:", way.name, way.off), Colocated: way.colocated}
		redistest.Seed(t, rdb, keys.List(), "a")
		var logs bytes.Buffer
		taker := testTaker(rdb, keys.Prefix, way.colocated, 0, &logs)
		rec := &finish.Recorder{Keys: keys, StateTTL: time.Hour}
		taker.Record, taker.Clock = rec, behind
		finisher := &finish.Finisher{Client: rdb, Record: rec, Schedule: finish.Schedule{Cron: cron}, Clock: behind}

		justAfterASlot(t, rdb)
		pass := taker.Pass()
		if way.look {
			pass = taker.LookFirst()
		}
		taken, err := pass.Take(ctx, nil)
		if err != nil || taken.Item != "a" {
			t.Fatalf("took %q (%v), want a", taken.Item, err)
		}
		start, err := rdb.HGet(ctx, keys.State("a"), schema.FieldLastStart).Int64()
		if err != nil {
			t.Fatalf("last_start: %v", err)
		}
		if !taken.Start.Equal(time.UnixMilli(start)) {
			t.Errorf("the take says Redis took a at %s, its state hash %s", taken.Start, time.UnixMilli(start))
		}
		end := finish.End{Item: "a", Result: schema.ResultSuccess, Exited: true, At: time.Now(), Started: taken.At, Taken: taken.Start}
		if _, err := finisher.Finish(ctx, taken.Key, taken.Token, end); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		want := cron.Next("a", time.UnixMilli(start)).UnixMilli()
		if got, _ := rdb.HGet(ctx, keys.State("a"), schema.FieldNextSlot).Int64(); got != want {
			t.Errorf("%s: a run taken at %d waits for the slot %d, want %d, the first after its take", name, start, got, want)
		}
		if ends := rdb.PExpireTime(ctx, keys.Cooldown("a")).Val().Milliseconds(); ends < want || ends > want+1 {
			t.Errorf("%s: a's cooldown ends at %d, want its next slot %d", name, ends, want)
		}
		if due := rdb.ZScore(ctx, keys.Due(), "a").Val(); way.colocated && int64(due) < want {
			t.Errorf("%s: a is due at %d, before its next slot %d", name, int64(due), want)
		}
	}
}

// justAfterASlot returns once Redis' clock is in the first 150ms of a
// two-second slot.
func justAfterASlot(t *testing.T, rdb *redis.Client) {
	t.Helper()
	for range 100 {
		now, err := rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		into := now.UnixMilli() % 2000
		if into >= 20 && into < 150 {
			return
		}
		time.Sleep(time.Duration(min(2000-into+20, 100)) * time.Millisecond)
	}
	t.Fatal("Redis' clock never came to the start of a slot")
}
