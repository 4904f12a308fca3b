package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// TestLagGauges: a scrape reads the due index and reports how many items
// are overdue and by how long the most, with their help text; with Redis
// gone, w8y_redis_up is 0 and the lag is left out, not made 0.
func TestLagGauges(t *testing.T) {
	srv := redistest.Start(t)
	keys := schema.Keys{Prefix: "m:", Colocated: true}
	now := time.UnixMilli(1_800_000_000_000)
	// Three items, one appended since the fleet tried the first two.
	srv.Client.RPush(context.Background(), keys.List(), "a", "b", "new")
	srv.Client.MSet(context.Background(), keys.Seen(), 2, keys.Untried(), 0)
	srv.Client.ZAdd(context.Background(), keys.Due(),
		redis.Z{Score: float64(now.Add(-42 * time.Second).UnixMilli()), Member: "a"},
		redis.Z{Score: float64(now.Add(-time.Second).UnixMilli()), Member: "b"},
		redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "c"})
	// The worker that serves the metrics is live, as w8y-metrics always is.
	srv.Client.ZAdd(context.Background(), keys.Workers(), redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "h:1:x"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(newLagCollector(&status.Reader{Client: srv.Client, Keys: keys}, func() time.Time { return now }))
	want := `# HELP w8y_lag_seconds How long ago the most overdue item came due: how far behind the fleet is on the list (0 when none is overdue).
# TYPE w8y_lag_seconds gauge
w8y_lag_seconds{list="m:list"} 42
# HELP w8y_never_tried_items Items that no worker has tried yet, among w8y_overdue_items: a list loaded at once, items appended since the fleet last looked.
# TYPE w8y_never_tried_items gauge
w8y_never_tried_items{list="m:list"} 1
# HELP w8y_overdue_items Items whose cooldown, backoff or schedule lets them run that no worker has taken yet, from the due index, and the items no worker has tried yet (the same on every worker of the list).
# TYPE w8y_overdue_items gauge
w8y_overdue_items{list="m:list"} 3
# HELP w8y_redis_up 1 when this scrape's read of the due index reached Redis, 0 when it failed.
# TYPE w8y_redis_up gauge
w8y_redis_up{list="m:list"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	gone := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer gone.Close()
	reg = prometheus.NewRegistry()
	reg.MustRegister(newLagCollector(&status.Reader{Client: gone, Keys: keys}, func() time.Time { return now }))
	want = `# HELP w8y_redis_up 1 when this scrape's read of the due index reached Redis, 0 when it failed.
# TYPE w8y_redis_up gauge
w8y_redis_up{list="m:list"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestPlacesGauges: where a cap is recorded, a scrape reports the places
// of --fleet-max-running whose lock exists, and the cap.
func TestPlacesGauges(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	keys := schema.Keys{Prefix: "m:"}
	srv.Client.Set(ctx, keys.FleetMax(), 3, 0)
	srv.Client.SAdd(ctx, keys.Running(), keys.Lock("a"), keys.Lock("b"), keys.Lock("gone"))
	srv.Client.Set(ctx, keys.Lock("a"), "h", time.Minute)
	srv.Client.Set(ctx, keys.Lock("b"), "h", time.Minute)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newLagCollector(&status.Reader{Client: srv.Client, Keys: keys}, time.Now))
	want := `# HELP w8y_fleet_max_running The --fleet-max-running that the list's last take enforced: how many places the fleet shares.
# TYPE w8y_fleet_max_running gauge
w8y_fleet_max_running{list="m:list"} 3
# HELP w8y_fleet_running Runs of the list that hold a place of --fleet-max-running, anywhere in the fleet (the same on every worker of the list).
# TYPE w8y_fleet_running gauge
w8y_fleet_running{list="m:list"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "w8y_fleet_max_running", "w8y_fleet_running"); err != nil {
		t.Error(err)
	}
}

// TestRateGauges: where a rate is recorded, a scrape reports it and the
// fleet's starts in its window; without one, nothing of it.
func TestRateGauges(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	keys := schema.Keys{Prefix: "m:"}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newLagCollector(&status.Reader{Client: srv.Client, Keys: keys}, time.Now))
	rateMetrics := []string{"w8y_fleet_rate_starts", "w8y_fleet_rate_limit", "w8y_fleet_rate_window_seconds", "w8y_fleet_rate_next_start_seconds"}
	if n, err := testutil.GatherAndCount(reg, rateMetrics...); err != nil || n != 0 {
		t.Errorf("without a rate: %d series (%v), want none", n, err)
	}
	srv.Client.Set(ctx, keys.FleetRate(), "5/3600000", 0)
	now := srv.Client.Time(ctx).Val().UnixMilli()
	srv.Client.RPush(ctx, keys.Starts(), now-1000, now-2000, now-7200000)
	want := `# HELP w8y_fleet_rate_limit The N of the --fleet-rate N/DURATION that the list's last take enforced: the most starts in any window of w8y_fleet_rate_window_seconds.
# TYPE w8y_fleet_rate_limit gauge
w8y_fleet_rate_limit{list="m:list"} 5
# HELP w8y_fleet_rate_next_start_seconds How long until --fleet-rate allows the fleet's next start: 0 while it allows one now.
# TYPE w8y_fleet_rate_next_start_seconds gauge
w8y_fleet_rate_next_start_seconds{list="m:list"} 0
# HELP w8y_fleet_rate_starts Starts of the list's items in the last window of --fleet-rate, anywhere in the fleet, on Redis' clock (the same on every worker of the list).
# TYPE w8y_fleet_rate_starts gauge
w8y_fleet_rate_starts{list="m:list"} 2
# HELP w8y_fleet_rate_window_seconds The DURATION of the --fleet-rate N/DURATION that the list's last take enforced.
# TYPE w8y_fleet_rate_window_seconds gauge
w8y_fleet_rate_window_seconds{list="m:list"} 3600
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), rateMetrics...); err != nil {
		t.Error(err)
	}
}

// TestFailureStreaks: a run counts at every floor its item's streak has
// reached, and an unknown streak (-1) or a success (0) at none.
func TestFailureStreaks(t *testing.T) {
	m := New("v1", "abc")
	for _, failures := range []int64{-1, 0, 1, 3, 4, 10} {
		m.FailureStreak(failures)
	}
	for floor, want := range map[string]float64{"1": 4, "3": 3, "5": 1, "10": 1} {
		if got := testutil.ToFloat64(m.streaks.WithLabelValues(floor)); got != want {
			t.Errorf("at_least=%s: %v, want %v", floor, got, want)
		}
	}
}
