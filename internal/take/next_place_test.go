package take

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestFinishThenLookPlaces: a worker under --fleet-max-running gives its
// run's place back with the finish in FinishThenLook; one without a cap,
// whose take took no place, does not look for one (placed=0), and a place
// that another run left under its lock is dropped by the next capped take
// that counts it, once the lock is gone.
func TestFinishThenLookPlaces(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	for _, capped := range []bool{true, false} {
		keys := schema.Keys{Prefix: fmt.Sprintf("np%v:", capped), Colocated: true}
		redistest.Seed(t, rdb, keys.List(), "a", "b")
		rdb.MSet(ctx, keys.Seen(), 2, keys.Untried(), 0)
		rdb.Set(ctx, keys.Sweep(), "0", time.Hour)
		rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 1, Member: "b"})
		taker := testTaker(rdb, keys.Prefix, true, 0, nil)
		if capped {
			taker.FleetMax = 1
		}
		rec := &finish.Recorder{Keys: keys, StateTTL: time.Hour}
		taker.Record = rec
		finisher := &finish.Finisher{Client: rdb, Record: rec, Schedule: finish.Schedule{Cooldown: time.Hour}}
		first, err := taker.LookFirst().Take(ctx, nil)
		if err != nil || first.Item != "a" {
			t.Fatalf("capped %v: the first take took %q (%v)", capped, first.Item, err)
		}
		if !capped {
			// A place that a capped run of another worker left there.
			rdb.SAdd(ctx, keys.Running(), first.Key)
		}
		_, next, ok, err := taker.FinishThenLook(ctx, finisher, first.Key, first.Token, finish.End{Item: "a", Result: schema.ResultSuccess, Exited: true})
		if err != nil || !ok || next.Item != "b" {
			t.Fatalf("capped %v: FinishThenLook took %q, %v (%v)", capped, next.Item, ok, err)
		}
		members := rdb.SMembers(ctx, keys.Running()).Val()
		want := []string{keys.Lock("b")}
		if !capped {
			want = []string{first.Key}
		}
		if fmt.Sprint(members) != fmt.Sprint(want) {
			t.Errorf("capped %v: places %v, want %v", capped, members, want)
		}
		if !capped {
			// The left place's lock is gone: a capped take of an item
			// appended counts it free, and drops it.
			rdb.RPush(ctx, keys.List(), "c")
			other := testTaker(rdb, keys.Prefix, true, 0, nil)
			other.Token, other.FleetMax = "other", 1
			got, err := other.LookFirst().Take(ctx, nil)
			if err != nil || got.Item != "c" {
				t.Errorf("a capped take after the finish took %q (%v), want c", got.Item, err)
			}
			if members := rdb.SMembers(ctx, keys.Running()).Val(); fmt.Sprint(members) != fmt.Sprint([]string{keys.Lock("c")}) {
				t.Errorf("places after the capped take: %v", members)
			}
		}
	}
}
