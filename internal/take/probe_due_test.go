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

// TestProbeFirstOnceTheSweepIsLongPast: a worker whose wait ended long
// after the sweep's moment that its probe named (a fleet's worker, its
// wait spread by the fleet's size) most likely finds the step made by the
// worker whose fallback came first: its take probes, one call that finds
// nothing, rather than a look and then a probe at each of an idle fleet's
// fallbacks. One whose wait ended within SweepGrace of the moment, as a
// lone worker's does, looks at once.
func TestProbeFirstOnceTheSweepIsLongPast(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "pl:", Colocated: true}
	takeSetup{items: redistest.Items(5), cooling: redistest.Items(5)}.seed(t, rdb, keys)
	taker := testTaker(rdb, keys.Prefix, true, 2, &bytes.Buffer{})
	rdb.Set(ctx, keys.Sweep(), "0", time.Hour)
	for range 4 {
		if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
			t.Fatalf("a take over a cooling list: %v, want no work", err)
		}
	}
	for _, tt := range []struct {
		name string
		// late is how long past the sweep's moment the take comes.
		late time.Duration
		// look: the take looks at once; else it probes.
		look bool
	}{
		{"long past, as a fleet's worker", SweepGrace + sweepSlack + time.Second, false},
		{"within the grace, as a lone worker", SweepGrace / 2, true},
	} {
		// The probe names the sweep due in 300ms; by the take, the step
		// has been made (the key is back, as another worker sets it).
		rdb.PExpire(ctx, keys.Sweep(), 300*time.Millisecond)
		if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
			t.Fatalf("%s: a probe: %v, want no work", tt.name, err)
		}
		next := &taker.Memory.look.next
		if !next.probed || next.sweep < 0 || next.sweep > 300*time.Millisecond {
			t.Fatalf("%s: the probe named the sweep in %s (probed %v), want within 300ms", tt.name, next.sweep, next.probed)
		}
		next.at = next.at.Add(-(next.sweep + tt.late))
		rdb.Set(ctx, keys.Sweep(), "0", time.Hour)

		before := redistest.CommandStats(t, rdb)
		if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
			t.Fatalf("%s: a take after the step: %v, want no work", tt.name, err)
		}
		after := redistest.CommandStats(t, rdb)
		calls, looks, probes := after["evalsha"]-before["evalsha"], after["mget"]-before["mget"], after["pttl"]-before["pttl"]
		switch {
		case calls != 1:
			t.Errorf("%s: %d script calls, want 1", tt.name, calls)
		case tt.look && (looks != 1 || probes != 0):
			t.Errorf("%s: %d looks and %d probes, want the look at once", tt.name, looks, probes)
		case !tt.look && (looks != 0 || probes != 1):
			t.Errorf("%s: %d looks and %d probes, want the probe alone", tt.name, looks, probes)
		}
	}
}
