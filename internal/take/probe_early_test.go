package take

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestAnEarlyProbeStandsForTheTakes: the probe that an idle worker sends
// with its wait (ProbeCmd) goes only once a probe of its own has loaded the
// script, and stands for the next take's: a "no" ends the take without a
// script call, a "yes" sends the look alone; an answer older than
// earlyFresh does not stand (the take probes and finds what came since); a
// probe that Redis no longer has the script for is not sent again until
// the take's own probe has loaded it.
func TestAnEarlyProbeStandsForTheTakes(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "pe:", Colocated: true}
	takeSetup{items: redistest.Items(5), cooling: redistest.Items(5)}.seed(t, rdb, keys)
	taker := testTaker(rdb, keys.Prefix, true, 2, &bytes.Buffer{})
	noWork := func(what string) {
		t.Helper()
		if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
			t.Fatalf("%s: %v, want no work", what, err)
		}
	}
	noWork("the first take over a cooling list")
	if cmd := taker.ProbeCmd(ctx); cmd != nil {
		t.Fatalf("ProbeCmd before any probe of the taker's own: %v, want none", cmd.Args())
	}
	for range 3 {
		noWork("a take over a cooling list")
	}
	// early runs the probe as a wait's end would, and hands its answer over.
	early := func() {
		t.Helper()
		cmd := taker.ProbeCmd(ctx)
		if cmd == nil {
			t.Fatal("ProbeCmd after a probe found nothing: none, want the probe")
		}
		_ = rdb.Process(ctx, cmd)
		taker.Probed(cmd)
	}
	calls := func() (evalsha, looks int) {
		stats := redistest.CommandStats(t, rdb)
		return stats["evalsha"] + stats["eval"], stats["mget"]
	}

	early()
	calls0, _ := calls()
	noWork("a take after an early probe's no")
	if n, _ := calls(); n != calls0 {
		t.Errorf("a take after an early probe's no sent %d script calls, want none", n-calls0)
	}
	if in, probed := taker.NextDue(); !probed || in < 0 {
		t.Errorf("after an early probe, NextDue is %s (probed %v), want the sweep's or an entry's moment", in, probed)
	}

	rdb.RPush(ctx, keys.List(), "new")
	early()
	calls0, looks0 := calls()
	taken, err := taker.LookFirst().Take(ctx, nil)
	if err != nil || taken.Item != "new" {
		t.Fatalf("a take after an early probe's yes: %q, %v; want the item pushed", taken.Item, err)
	}
	if n, looks := calls(); n-calls0 != 1 || looks-looks0 != 1 {
		t.Errorf("a take after an early probe's yes sent %d script calls and %d looks, want the look alone", n-calls0, looks-looks0)
	}
	rdb.Del(ctx, keys.Lock("new"))
	rdb.Set(ctx, keys.Cooldown("new"), "someone", time.Hour)
	for range 3 {
		noWork("a take once the new item cools down")
	}

	// A stale "no": the take probes again, and finds the item pushed since.
	early()
	taker.Memory.look.early.at = taker.Memory.look.early.at.Add(-earlyFresh)
	rdb.RPush(ctx, keys.List(), "later")
	if taken, err := taker.LookFirst().Take(ctx, nil); err != nil || taken.Item != "later" {
		t.Fatalf("a take after a stale early no: %q, %v; want the item pushed since", taken.Item, err)
	}
	rdb.Del(ctx, keys.Lock("later"))
	rdb.Set(ctx, keys.Cooldown("later"), "someone", time.Hour)
	for range 3 {
		noWork("a take once the later item cools down")
	}

	// Redis lost the script: the next is sent only after a probe reloads it.
	rdb.ScriptFlush(ctx)
	cmd := taker.ProbeCmd(ctx)
	_ = rdb.Process(ctx, cmd)
	taker.Probed(cmd)
	if cmd := taker.ProbeCmd(ctx); cmd != nil {
		t.Errorf("ProbeCmd after NOSCRIPT: %v, want none until a probe loads the script", cmd.Args())
	}
	noWork("a take after NOSCRIPT")
	if cmd := taker.ProbeCmd(ctx); cmd == nil {
		t.Error("ProbeCmd after the take's probe reloaded the script: none, want the probe")
	}
}
