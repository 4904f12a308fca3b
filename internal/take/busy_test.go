package take

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestABusyItemsCommands: a busy worker's item (FinishThenLook: the finish
// of its run with a cooldown, and the take of the next due item) runs 27
// commands inside Redis (28 without LMOVE), counted by INFO commandstats, as
// BenchmarkFinishThenLook counts them: the next item, at the list's head,
// goes to the tail by one LMOVE (not RPUSH and LREM), and a fleet without a
// cap or a rate deletes no records that are not there. The records that
// are there are still deleted, a due item elsewhere in the list still moves
// by RPUSH and LREM, and a server without LMOVE (renamed away here) gets
// the same list. The list keeps exactly its items throughout.
func TestABusyItemsCommands(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		// commands is what a busy item runs in all, moves the rotation's
		// commands among them.
		commands int
		moves    map[string]int
	}{
		{"LMOVE", nil, 27, map[string]int{"lmove": 1}},
		{"without LMOVE", []string{"--rename-command", "LMOVE", ""}, 28, map[string]int{"rpush": 1, "lrem": 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rdb := redistest.Start(t, redistest.Args(tt.args...)).Client
			ctx := context.Background()
			keys := schema.Keys{Prefix: "busy:", Colocated: true}
			items := redistest.Items(12)
			redistest.Seed(t, rdb, keys.List(), items...)
			// Every item due, in the list's order, and tried: what a busy
			// fleet's look finds.
			for i, item := range items {
				rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: float64(i + 1), Member: item})
			}
			rdb.MSet(ctx, keys.Untried(), 0, keys.Seen(), len(items))
			rdb.Set(ctx, keys.Sweep(), "0", time.Hour)

			taker := testTaker(rdb, keys.Prefix, true, 0, nil)
			rec := &finish.Recorder{Keys: keys, StateTTL: time.Hour, EventsMaxLen: 100}
			taker.Record = rec
			finisher := &finish.Finisher{Client: rdb, Record: rec, Schedule: finish.Schedule{Cooldown: time.Hour}, Jitter: func() string { return "1" }}
			// model is the list as it must be: each item taken goes to the
			// tail, wherever it was.
			model := slices.Clone(items)
			took := func(item string) {
				t.Helper()
				i := slices.Index(model, item)
				if i < 0 {
					t.Fatalf("took %q, which the list does not hold", item)
				}
				model = append(slices.Delete(model, i, i+1), item)
			}
			// sameList checks the list against the model, between the
			// counts: its LRANGE is not a busy item's.
			sameList := func() {
				t.Helper()
				if got := rdb.LRange(ctx, keys.List(), 0, -1).Val(); !slices.Equal(got, model) {
					t.Fatalf("the list: %q, want %q", got, model)
				}
			}
			taken, err := taker.LookFirst().Take(ctx, nil)
			if err != nil || taken.Item != items[0] {
				t.Fatalf("the first take took %q (%v), want %q", taken.Item, err, items[0])
			}
			took(taken.Item)
			sameList()
			busy := func(want string) {
				t.Helper()
				_, next, ok, err := taker.FinishThenLook(ctx, finisher, taken.Key, taken.Token, finish.End{Item: taken.Item, Result: schema.ResultSuccess, Exited: true})
				if err != nil || !ok || next.Item != want {
					t.Fatalf("FinishThenLook after %s took %q, %v (%v), want %q", taken.Item, next.Item, ok, err, want)
				}
				taken = next
				took(taken.Item)
			}
			// One item first, so that the counts below see only items
			// whose state hash and events stream exist (the steady state).
			busy(items[1])
			sameList()

			const runs = 8
			before := redistest.CommandStats(t, rdb)
			for i := range runs {
				busy(items[2+i])
			}
			ran := commandsSince(t, rdb, before)
			sameList()
			total := 0
			for _, n := range ran {
				total += n
			}
			if total != tt.commands*runs {
				t.Errorf("a busy item ran %.2f commands, want %d: %v", float64(total)/runs, tt.commands, ran)
			}
			for _, name := range []string{"lmove", "rpush", "lrem"} {
				if ran[name] != tt.moves[name]*runs {
					t.Errorf("%d items ran %d %s, want %d each: %v", runs, ran[name], name, tt.moves[name], ran)
				}
			}
			if ran["del"] != runs {
				t.Errorf("%d items ran %d DEL, want each its lock's alone: %v", runs, ran["del"], ran)
			}

			// Records that a capped or rated take left: the next take
			// without either deletes them.
			rdb.Set(ctx, keys.FleetMax(), 3, 0)
			rdb.Set(ctx, keys.FleetRate(), "5/1000", 0)
			busy(items[runs+2])
			sameList()
			if n := rdb.Exists(ctx, keys.FleetMax(), keys.FleetRate()).Val(); n != 0 {
				t.Errorf("a take without a cap or a rate left %d of the fleet's records", n)
			}

			// A due item behind the head (run now: its cooldown deleted, its
			// entry at 0), taken before the head's: moved by RPUSH and LREM.
			behind := items[3]
			rdb.Del(ctx, keys.Cooldown(behind))
			rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: 0, Member: behind})
			if at := slices.Index(model, behind); at < 1 {
				t.Fatalf("%q is at %d of %q: the case needs it behind the head", behind, at, model)
			}
			before = redistest.CommandStats(t, rdb)
			busy(behind)
			if ran := commandsSince(t, rdb, before); ran["rpush"] != 1 || ran["lrem"] != 1 || ran["lmove"] != 0 {
				t.Errorf("a due item behind the head moved by %v", ran)
			}
			sameList()
		})
	}
}

// commandsSince is how many times each command ran since before (a
// CommandStats), less the script calls, INFO and CONFIG themselves.
func commandsSince(t *testing.T, rdb *redis.Client, before map[string]int) map[string]int {
	t.Helper()
	ran := map[string]int{}
	for name, n := range redistest.CommandStats(t, rdb) {
		switch name {
		case "evalsha", "eval", "evalsha_ro", "eval_ro", "info", "ping", "hello", "script|load":
			continue
		}
		if d := n - before[name]; d != 0 {
			ran[name] = d
		}
	}
	return ran
}
