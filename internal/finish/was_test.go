package finish

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestFinishReadsWhatItChanges: finish.lua reads the state hash's fields
// that its record changes by what they were (HMGET) and writes only what
// changes, with the same result as the writes it spares: the runs counted
// on from any whole number, a value that is not one left as HINCRBY leaves
// it, the fields that this run has not to say dropped, and the failing
// index's entry dropped by a success wherever the hash counted failures
// or there was no hash.
func TestFinishReadsWhatItChanges(t *testing.T) {
	for _, st := range []struct {
		name     string
		before   map[string]any // the state hash before the finish (nil: none)
		failing  bool           // an entry among the failing before
		runs     string
		gone     []string // fields the finish drops
		stillFor bool     // the failing entry stays
	}{
		{name: "no hash", failing: true, runs: "1"},
		{name: "a take's hash", before: map[string]any{"last_start": 1}, runs: "1"},
		{name: "busy", before: map[string]any{"runs": 41, "consecutive_failures": 0}, runs: "42"},
		{name: "failing", before: map[string]any{"runs": 7, "consecutive_failures": 3}, failing: true, runs: "8"},
		{name: "odd runs", before: map[string]any{"runs": "x", "last_reason": "r", "last_stdout": "o", "next_slot": 9}, runs: "x",
			gone: []string{"last_reason", "last_stdout", "next_slot"}},
		// A count of 0 beside an entry is drift (check reports it): left
		// to the entry's expiry, and to w8yctl check --fix.
		{name: "drifted entry", before: map[string]any{"consecutive_failures": 0}, failing: true, runs: "1", stillFor: true},
	} {
		t.Run(st.name, func(t *testing.T) {
			rdb, ctx := redistest.Client(t)
			keys := schema.Keys{Prefix: "w:", Colocated: true}
			if st.before != nil {
				rdb.HSet(ctx, keys.State("a"), st.before)
				rdb.PExpire(ctx, keys.State("a"), time.Hour)
			}
			if st.failing {
				rdb.ZAdd(ctx, keys.Failing(), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "a"})
			}
			rdb.Set(ctx, keys.Lock("a"), "me", time.Minute)
			f := &Finisher{Client: rdb, Record: &Recorder{Keys: keys, StateTTL: time.Hour}}
			if _, err := f.Finish(ctx, keys.Lock("a"), "me", End{Item: "a", Result: schema.ResultSuccess, Exited: true}); err != nil {
				t.Fatal(err)
			}
			state := rdb.HGetAll(ctx, keys.State("a")).Val()
			if state["runs"] != st.runs || state["consecutive_failures"] != "0" || state["last_result"] != "success" {
				t.Errorf("state %v, want runs %s and a success", state, st.runs)
			}
			for _, field := range st.gone {
				if _, ok := state[field]; ok {
					t.Errorf("%s kept: %v", field, state)
				}
			}
			if _, err := rdb.ZScore(ctx, keys.Failing(), "a").Result(); (err == nil) != st.stillFor {
				t.Errorf("the failing entry: %v, want kept %v", err, st.stillFor)
			}
			if ttl := rdb.PTTL(ctx, keys.State("a")).Val(); ttl <= 0 {
				t.Errorf("state TTL %s", ttl)
			}
		})
	}
}
