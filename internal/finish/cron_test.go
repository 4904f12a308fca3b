package finish

import (
	"testing"
	"time"

	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/schema"
)

func mustCron(t *testing.T, expr, zone string, jitter time.Duration) Cron {
	t.Helper()
	c, err := ParseCron(expr, zone, jitter)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCronCooldownLastsUntilTheNextSlot: a success keeps its item until the
// first slot after the run's start, whenever it ends; a run that outlasted
// that slot leaves no cooldown, so the item runs once more, not once per
// slot it missed.
func TestCronCooldownLastsUntilTheNextSlot(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	every2s := mustCron(t, "*/2 * * * * *", "", 0)
	daily := mustCron(t, "0 2 * * *", "Europe/Paris", 0)
	for _, tt := range []struct {
		name       string
		c          Cron
		start, now string
		want       time.Duration
	}{
		{"seconds field, mid-slot", every2s, "2026-01-01T00:00:00.300Z", "2026-01-01T00:00:00.500Z", 1500 * time.Millisecond},
		{"seconds field, started on the slot", every2s, "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", time.Second},
		{"rounded up to the millisecond", every2s, "2026-01-01T00:00:01Z", "2026-01-01T00:00:01.0000001Z", time.Second},
		{"run outlasted the next slot", every2s, "2026-01-01T00:00:01Z", "2026-01-01T00:00:09Z", 0},
		{"five fields in a zone (Paris is UTC+1 in January)", daily, "2026-01-01T12:00:00Z", "2026-01-01T12:00:00Z", 13 * time.Hour},
		{"five fields in a zone, summer time (UTC+2)", daily, "2026-07-01T12:00:00Z", "2026-07-01T12:00:00Z", 12 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.CooldownAfter("a", at(tt.start), at(tt.now)); got != tt.want {
				t.Errorf("CooldownAfter = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestCronJitterIsFixedPerItem: each item's offset is the same on every
// worker (a hash, not a draw), within --jitter, and the items spread over it.
func TestCronJitterIsFixedPerItem(t *testing.T) {
	c := mustCron(t, "@hourly", "", time.Minute)
	slot := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
	seen := map[time.Duration]bool{}
	var lo, hi time.Duration = time.Minute, 0
	for i := range 1000 {
		item := "item-" + string(rune('a'+i%26)) + time.Duration(i).String()
		off := c.Offset(item)
		if off != mustCron(t, "@hourly", "", time.Minute).Offset(item) {
			t.Fatalf("%s: offset differs between two parses", item)
		}
		if off < 0 || off >= time.Minute {
			t.Fatalf("%s: offset %s outside [0, 1m)", item, off)
		}
		// Its slots are the schedule's, moved by its offset: a start just
		// after its own slot waits for its next one.
		if next := c.Next(item, slot.Add(off)); !next.Equal(slot.Add(time.Hour + off)) {
			t.Fatalf("%s: next slot after %s is %s, want %s", item, slot.Add(off), next, slot.Add(time.Hour+off))
		}
		seen[off] = true
		lo, hi = min(lo, off), max(hi, off)
	}
	if len(seen) < 900 || lo > 5*time.Second || hi < 55*time.Second {
		t.Errorf("1000 items took %d offsets from %s to %s: not spread over the minute", len(seen), lo, hi)
	}
	if off := mustCron(t, "@hourly", "", 0).Offset("a"); off != 0 {
		t.Errorf("offset %s without --jitter", off)
	}
}

// TestScheduleCooldownAfter: --cooldown and --schedule both cool a success
// down, and nothing else; under --schedule the cooldown ends at the slot
// that NextSlot gives for the state hash, and where it ends at no slot,
// NextSlot gives none.
func TestScheduleCooldownAfter(t *testing.T) {
	end := End{Item: "a", Result: schema.ResultSuccess, At: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), Exit: proc.Exit{Duration: 500 * time.Millisecond}}
	failed := end
	failed.Result = schema.ResultFailure
	// Taken at 00:00:01.9, its child started at 00:00:02.1 and ended at
	// 00:00:02.5: the take is the start that counts, in the slot before
	// 00:00:02, which has come, so the item is due again at once.
	taken := End{Item: "a", Result: schema.ResultSuccess, At: time.Date(2026, 1, 1, 0, 0, 2, 500e6, time.UTC),
		Started: time.Date(2026, 1, 1, 0, 0, 1, 900e6, time.UTC), Exit: proc.Exit{Duration: 400 * time.Millisecond}}
	child := taken
	child.Started = time.Time{}
	cron := Schedule{Cron: mustCron(t, "*/2 * * * * *", "", 0)}
	// "a" is 1,996ms late on every slot of a 2-second jitter.
	jittered := Schedule{Cron: mustCron(t, "*/2 * * * * *", "", 2*time.Second)}
	if off := jittered.Cron.Offset("a"); off != 1996*time.Millisecond {
		t.Fatalf("the offset of a is %s, want 1.996s", off)
	}
	at := func(ms int) time.Time { return time.Date(2026, 1, 1, 0, 0, 0, ms*1e6, time.UTC) }
	for _, tt := range []struct {
		name string
		s    Schedule
		end  End
		want time.Duration
		// slot is NextSlot's, or the zero time for none.
		slot time.Time
	}{
		{"cooldown", Schedule{Cooldown: time.Minute}, end, time.Minute, time.Time{}},
		{"none", Schedule{}, end, 0, time.Time{}},
		// The run started at 00:00:00.5, so its next slot is 00:00:02.
		{"schedule, from the child's start", cron, end, time.Second, at(2000)},
		{"schedule, from the take", cron, taken, 0, time.Time{}},
		{"schedule, take unknown", cron, child, 1500 * time.Millisecond, at(4000)},
		{"schedule, failure", cron, failed, 0, time.Time{}},
		// Started at 00:00:00.5, before its own slot 00:00:01.996.
		{"schedule with jitter", jittered, end, 996 * time.Millisecond, at(1996)},
	} {
		if got := tt.s.CooldownAfter(tt.end); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
		if got := tt.s.NextSlot(tt.end); !got.Equal(tt.slot) {
			t.Errorf("%s: next slot %s, want %s", tt.name, got, tt.slot)
		}
	}
}
