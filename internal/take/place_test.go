package take

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestFleetMaxEveryWay: a take under --fleet-max-running 2, by each way a
// worker takes (the look, the pass in batches, the named take of --item),
// takes a place with the lock; with both places in use it takes nothing,
// touches neither the list nor the fence, and says ErrFull, an ErrNoWork.
// A place is freed by its run's finish, or once its lock is gone (its
// worker died and the lock expired), and not while the lock lives.
func TestFleetMaxEveryWay(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	ways := map[string]func(tk *Taker, item string) (Taken, error){
		"look":  func(tk *Taker, _ string) (Taken, error) { return tk.LookFirst().Take(ctx, nil) },
		"pass":  func(tk *Taker, _ string) (Taken, error) { return tk.Pass().Take(ctx, nil) },
		"named": func(tk *Taker, item string) (Taken, error) { return tk.TakeNamed(ctx, item, false) },
	}
	for name, take := range ways {
		t.Run(name, func(t *testing.T) {
			keys := schema.Keys{Prefix: name + ":", Colocated: true}
			if err := rdb.RPush(ctx, keys.List(), "a", "b", "c", "d").Err(); err != nil {
				t.Fatal(err)
			}
			if name == "look" {
				// Every item tried, and due now: the look takes from the due
				// index (look.lua), not by a pass over the untried head.
				rdb.Set(ctx, keys.Untried(), 0, 0)
				rdb.Set(ctx, keys.Seen(), 4, 0)
				for _, item := range []string{"a", "b", "c", "d"} {
					rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: 0, Member: item})
				}
			}
			var logs bytes.Buffer
			tk := testTaker(rdb, keys.Prefix, true, 2, &logs)
			tk.FleetMax = 2
			places := func() []string {
				got := rdb.SMembers(ctx, keys.Running()).Val()
				slices.Sort(got)
				return got
			}
			first, err1 := take(tk, "a")
			second, err2 := take(tk, "b")
			if err1 != nil || err2 != nil || first.Item == second.Item {
				t.Fatalf("two takes: %+v, %v; %+v, %v", first, err1, second, err2)
			}
			want := []string{first.Key, second.Key}
			slices.Sort(want)
			if got := places(); !slices.Equal(got, want) {
				t.Errorf("places in use %q, want the two locks %q", got, want)
			}
			if got := rdb.Get(ctx, keys.FleetMax()).Val(); got != "2" {
				t.Errorf("%s holds %q, want the cap 2", keys.FleetMax(), got)
			}

			// Full: nothing taken, nothing moved, another worker's take
			// (another token) refused as well.
			list := rdb.LRange(ctx, keys.List(), 0, -1).Val()
			fence := rdb.Get(ctx, keys.Fence()).Val()
			other := testTaker(rdb, keys.Prefix, true, 2, &logs)
			other.FleetMax, other.Token = 2, "other:2:token"
			for _, tk := range []*Taker{tk, other} {
				if got, err := take(tk, "c"); !errors.Is(err, ErrFull) || !errors.Is(err, ErrNoWork) {
					t.Fatalf("a third take: %+v, %v; want ErrFull", got, err)
				}
			}
			if got := rdb.LRange(ctx, keys.List(), 0, -1).Val(); !slices.Equal(got, list) {
				t.Errorf("a full take moved the list: %q, was %q", got, list)
			}
			if got := rdb.Get(ctx, keys.Fence()).Val(); got != fence {
				t.Errorf("a full take moved the fence: %s, was %s", got, fence)
			}
			if n := rdb.Exists(ctx, keys.Lock("c"), keys.Lock("d")).Val(); n != 0 {
				t.Errorf("a full take left %d locks on c and d", n)
			}

			// A finish frees its run's place with its lock.
			finisher := &finish.Finisher{Client: rdb, Record: &finish.Recorder{Keys: keys, StateTTL: time.Hour}}
			end := finish.End{Item: first.Item, Result: schema.ResultSuccess, At: time.Now()}
			if reply, err := finisher.Finish(ctx, first.Key, first.Token, end); err != nil || !reply.Released {
				t.Fatalf("finish: %+v, %v", reply, err)
			}
			if got := places(); !slices.Equal(got, []string{second.Key}) {
				t.Errorf("after a finish, places in use %q, want %q", got, second.Key)
			}
			third, err := take(other, "c")
			if err != nil {
				t.Fatalf("a take after a finish: %v", err)
			}

			// A dead worker's place: in use while its lock lives, freed
			// once the lock expires, by the next take that finds it.
			if _, err := take(tk, "d"); !errors.Is(err, ErrFull) {
				t.Fatalf("a take while the dead worker's lock lives: %v, want ErrFull", err)
			}
			rdb.PExpire(ctx, second.Key, time.Millisecond)
			poll.WaitFor(t, "the dead worker's lock to expire", func() bool { return rdb.Exists(ctx, second.Key).Val() == 0 })
			fourth, err := take(tk, "d")
			if err != nil {
				t.Fatalf("a take once the dead worker's lock expired: %v", err)
			}
			want = []string{third.Key, fourth.Key}
			slices.Sort(want)
			if got := places(); !slices.Equal(got, want) {
				t.Errorf("places in use %q, want %q", got, want)
			}

			// A finish whose lock was lost, and taken again by another run,
			// leaves that run's place alone.
			rdb.Set(ctx, third.Key, "someone-else", time.Hour)
			end = finish.End{Item: third.Item, Result: schema.ResultLockLost, At: time.Now()}
			if reply, err := finisher.Finish(ctx, third.Key, third.Token, end); err != nil || reply.Released {
				t.Fatalf("finish of a lost lock: %+v, %v", reply, err)
			}
			if got := places(); !slices.Equal(got, want) {
				t.Errorf("a lost lock's finish changed the places: %q, want %q", got, want)
			}
		})
	}
}

// TestFleetMaxWrongType: a places key of another type fails the take with
// Redis' own error, rather than running without the cap; a take without a
// cap forgets the cap's record.
func TestFleetMaxWrongType(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "w:", Colocated: true}
	rdb.RPush(ctx, keys.List(), "a", "b")
	rdb.Set(ctx, keys.Running(), "x", 0)
	var logs bytes.Buffer
	tk := testTaker(rdb, keys.Prefix, true, 2, &logs)
	tk.FleetMax = 1
	for name, take := range map[string]func() error{
		"look":  func() error { _, err := tk.LookFirst().Take(ctx, nil); return err },
		"pass":  func() error { _, err := tk.Pass().Take(ctx, nil); return err },
		"named": func() error { _, err := tk.TakeNamed(ctx, "a", false); return err },
	} {
		if err := take(); err == nil || !bytes.Contains([]byte(err.Error()), []byte("WRONGTYPE")) {
			t.Errorf("%s over a places key of another type: %v, want WRONGTYPE", name, err)
		}
	}
	if n := rdb.Exists(ctx, keys.Lock("a"), keys.Lock("b")).Val(); n != 0 {
		t.Errorf("%d locks taken", n)
	}

	rdb.Del(ctx, keys.Running())
	rdb.Set(ctx, keys.FleetMax(), "1", 0)
	tk.FleetMax = 0
	if _, err := tk.LookFirst().Take(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, keys.FleetMax(), keys.Running()).Val(); n != 0 {
		t.Errorf("a take without a cap left the cap's record or a place (%d keys)", n)
	}
}

// TestCheckPlaces: the cap is refused where one script cannot reach every
// key of the list.
func TestCheckPlaces(t *testing.T) {
	for _, tt := range []struct {
		max       int
		colocated bool
		want      error
	}{{0, false, nil}, {0, true, nil}, {3, true, nil}, {3, false, ErrPlacesNotColocated}} {
		tk := Taker{FleetMax: tt.max, Keys: schema.Keys{Prefix: "w:", Colocated: tt.colocated}}
		if err := tk.CheckPlaces(); !errors.Is(err, tt.want) {
			t.Errorf("FleetMax %d, colocated %v: %v, want %v", tt.max, tt.colocated, err, tt.want)
		}
	}
}
