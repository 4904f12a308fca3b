package control

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

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
			got, err := (&Fleet{Client: rdb, Keys: keys}).RunNow(ctx, []string{"x"}, now)
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
