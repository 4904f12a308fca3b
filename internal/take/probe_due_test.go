package take

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestProbeNamesTheSweepApartAndAPassedMomentLooksAtOnce: an idle worker's
// probe tells the fleet's sweep apart from the items' due entries: the
// wait's timeout (NextDue) is the first due entry, and the sweep only
// SweepGrace after it comes due; once a moment that the probe named has
// passed, the next take looks without a probe first (one script call, not
// two), makes the sweep's step, and the probe after it names the next.
func TestProbeNamesTheSweepApartAndAPassedMomentLooksAtOnce(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "pd:", Colocated: true}
	takeSetup{items: redistest.Items(5), cooling: redistest.Items(5)}.seed(t, rdb, keys)
	var logs bytes.Buffer
	taker := testTaker(rdb, keys.Prefix, true, 2, &logs)
	rdb.Set(ctx, keys.Sweep(), "0", time.Hour)
	for range 4 {
		if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
			t.Fatalf("a take over a cooling list: %v, want no work", err)
		}
	}

	// The sweep due in 300ms, an item's entry in an hour: the wait is for
	// the sweep and its grace, not the sweep's moment.
	rdb.PExpire(ctx, keys.Sweep(), 300*time.Millisecond)
	if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
		t.Fatalf("a probe: %v, want no work", err)
	}
	in, probed := taker.NextDue()
	if !probed || in <= SweepGrace || in > SweepGrace+300*time.Millisecond {
		t.Errorf("NextDue is %s (probed %v) with the sweep due in 300ms, want within %s of it", in, probed, SweepGrace)
	}

	// The sweep's moment passes: one call, the look, which makes the step.
	poll.WaitFor(t, "the sweep key to expire", func() bool { return rdb.Exists(ctx, keys.Sweep()).Val() == 0 })
	before := redistest.CommandStats(t, rdb)["evalsha"]
	for {
		_, err := taker.LookFirst().Take(ctx, nil)
		if !errors.Is(err, ErrNoWork) {
			t.Fatalf("a take once the sweep is due: %v, want no work", err)
		}
		if rdb.Exists(ctx, keys.Sweep()).Val() == 1 {
			break
		}
	}
	if calls := redistest.CommandStats(t, rdb)["evalsha"] - before; calls != 1 {
		t.Errorf("%d script calls for a sweep of 5 items due by the probe's word, want 1: the look without a probe", calls)
	}
	if _, probed := taker.NextDue(); probed {
		t.Error("after the look, NextDue still says what the probe before it said")
	}
	if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
		t.Fatalf("a probe after the sweep: %v, want no work", err)
	}
	if in, probed := taker.NextDue(); !probed || in < time.Second {
		t.Errorf("after the sweep, NextDue is %s (probed %v), want the next sweep's, seconds away", in, probed)
	}
}
