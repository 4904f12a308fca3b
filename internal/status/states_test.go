package status

import (
	"maps"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestStatesReadSettingsOnlyWhereThere: one EXISTS of an item's lock,
// backoff, pause and settings tells the items that something holds from
// those that only have settings of their own, and both from the rest.
// Rows read alike with it (keys colocated) and without (every key read),
// and with it a row without a settings key and that nothing holds costs
// its three reads alone: no read of its settings, none of what holds it.
func TestStatesReadSettingsOnlyWhereThere(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client
	ctx := t.Context()
	keys := schema.Keys{Prefix: "sr:", Colocated: true}
	tuned := map[string]string{"timeout": "2h"}
	items := []string{"plain", "tuned", "locked-tuned", "paused", "cooling", "backoff-tuned", "wrong-settings"}
	rdb.HSet(ctx, keys.Settings("tuned"), tuned)
	rdb.HSet(ctx, keys.Settings("locked-tuned"), tuned)
	rdb.Set(ctx, keys.Lock("locked-tuned"), "host:1:tok", time.Minute)
	rdb.HSet(ctx, keys.Pause("paused"), schema.PauseFieldReason, "disk full", schema.PauseFieldBy, "ops")
	rdb.Set(ctx, keys.Cooldown("cooling"), "host:2:tok", time.Hour)
	rdb.HSet(ctx, keys.State("cooling"), schema.FieldLastResult, "success", schema.FieldRuns, "3",
		schema.FieldLastFence, "41", schema.FieldLastExitCode, "0")
	rdb.HSet(ctx, keys.Settings("backoff-tuned"), tuned)
	rdb.Set(ctx, keys.Backoff("backoff-tuned"), "host:3:tok", time.Minute)
	rdb.Set(ctx, keys.Settings("wrong-settings"), "not a hash", 0)

	wantStates := map[string]string{
		"plain": StateIdle, "tuned": StateIdle, "locked-tuned": StateLocked, "paused": StatePaused,
		"cooling": StateCooldown, "backoff-tuned": StateBackoff, "wrong-settings": StateIdle,
	}
	wantSettings := map[string]map[string]string{"tuned": tuned, "locked-tuned": tuned, "backoff-tuned": tuned}
	check := func(name string, rows []Item) {
		t.Helper()
		if len(rows) != len(items) {
			t.Fatalf("%s: %d rows, want %d", name, len(rows), len(items))
		}
		for _, st := range rows {
			if st.State != wantStates[st.Item] {
				t.Errorf("%s: %s is %s, want %s", name, st.Item, st.State, wantStates[st.Item])
			}
			if !maps.Equal(st.Settings, wantSettings[st.Item]) || (st.Settings == nil) != (wantSettings[st.Item] == nil) {
				t.Errorf("%s: %s has settings %v, want %v", name, st.Item, st.Settings, wantSettings[st.Item])
			}
		}
		byItem := map[string]Item{}
		for _, st := range rows {
			byItem[st.Item] = st
		}
		c := byItem["cooling"]
		if c.Runs != 3 || c.LastResult == nil || *c.LastResult != "success" || c.LastExitCode == nil || *c.LastExitCode != 0 ||
			c.LastStart != nil || c.Cooldown == nil || *c.Cooldown <= 0 {
			t.Errorf("%s: the cooling item's state reads %+v", name, c)
		}
		p := byItem["paused"]
		if p.PauseReason == nil || *p.PauseReason != "disk full" || p.PausedBy == nil || *p.PausedBy != "ops" {
			t.Errorf("%s: the paused item reads %+v", name, p)
		}
		if h := byItem["locked-tuned"].Holder; h == nil || *h != "host:1:tok" {
			t.Errorf("%s: the locked item's holder reads %v", name, h)
		}
	}

	for _, colocated := range []bool{true, false} {
		r := &Reader{Client: rdb, Keys: schema.Keys{Prefix: keys.Prefix, Colocated: colocated}}
		before := redistest.CommandStats(t, rdb)
		rows, err := r.Items(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		after := redistest.CommandStats(t, rdb)
		name := map[bool]string{true: "colocated", false: "a command a key"}[colocated]
		check(name, rows)
		if !colocated {
			continue
		}
		// The state hash of each row, and the settings of the three rows
		// that have them and of the one whose key is of another type.
		if got, want := after["hgetall"]-before["hgetall"], len(items)+4; got != want {
			t.Errorf("%s: %d HGETALL, want %d (a state each, and the settings that are there)", name, got, want)
		}
		// What holds an item is read where something does (the lock, the
		// pause and the backoff): a GET of a holder and an HMGET of a
		// pause's reason each.
		for _, cmd := range []string{"get", "hmget"} {
			if got := after[cmd] - before[cmd]; got != 3 {
				t.Errorf("%s: %d %s, want 3 (the held items alone)", name, got, cmd)
			}
		}
	}
}
