package take

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/settings"
)

// An item's own settings come back with its lock: batch.lua and look.lua
// read them in the take's own call (settings.lua's takenSettings), and the
// pass per candidate and the named take, whose item's keys may live on
// other servers, in a pipelined round trip after the lock (readOwn). A
// take also says whether the item waits for its first slot (fresh): such
// a take records no start, and Pass.Take gives the lock back at once with
// a cooldown until that slot (park), and goes on to the next candidate.

//go:embed settings.lua
var settingsSource string

// firstWord is the take scripts' word that makes an item never run wait
// for its first slot (see settings.lua): first=all under the worker's own
// --schedule, first=own where only an item's own schedule counts, and
// nothing where new items run at once (--first-run-now).
func (t *Taker) firstWord() string {
	switch {
	case !t.NewItemsWait:
		return ""
	case t.Settings.Schedule.Cron.Set():
		return " first=all"
	default:
		return " first=own"
	}
}

// ownReply reads takenSettings' reply, v, into taken: the item's settings, the
// Run that they make of the worker's options, and whether it is fresh.
func (t *Taker) ownReply(taken *Taken, v any) {
	pairs, _ := v.([]any)
	if len(pairs) == 0 {
		return
	}
	fresh, _ := pairs[0].(int64)
	t.apply(taken, settings.FromPairs(pairs[1:]), fresh == 1)
}

// apply sets taken's settings, the Run they make, and whether it is fresh.
// A value that does not read is told of once (settings.Told), and the
// worker's option stands in its place.
func (t *Taker) apply(taken *Taken, stored settings.Stored, fresh bool) {
	bad := func(string, string, error) {}
	if t.Told != nil {
		bad = t.Told.Bad(taken.Item)
	}
	taken.Settings, taken.fresh = stored, fresh
	if len(stored) > 0 {
		run := t.Settings.For(stored, bad)
		taken.Run = &run
	}
}

// run is what governs taken's run: its own Run, or the worker's options.
func (t *Taker) run(taken Taken) settings.Run {
	if taken.Run != nil {
		return *taken.Run
	}
	return t.Settings.Run
}

// readOwn reads, for the pass per candidate and the named take, what
// takenSettings returns with the lock in the scripts: the item's settings
// and, unless named (a named take runs now), whether it is fresh, in one
// pipelined round trip. A failed read leaves the worker's options, and the
// item runs now: a run must not depend on its settings' read.
func (t *Taker) readOwn(ctx context.Context, taken *Taken, named bool) {
	pipe := t.Client.Pipeline()
	got := pipe.HGetAll(ctx, t.Keys.Settings(taken.Item))
	var seen *redis.SliceCmd
	if word := t.firstWord(); word != "" && !named {
		seen = pipe.HMGet(ctx, t.Keys.State(taken.Item), schema.FieldLastStart, schema.FieldNextSlot)
	}
	_, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Log.Debug().Err(err).Str("item", clip.Item(taken.Item)).Msg("could not read the item's own settings: this worker's options stand")
	}
	stored := settings.Stored(got.Val())
	if len(stored) == 0 {
		stored = nil
	}
	fresh := false
	if seen != nil && seen.Err() == nil && settings.Scheduled(stored, t.firstWord() == " first=all") {
		vals := seen.Val()
		fresh = len(vals) == 2 && vals[0] == nil && vals[1] == nil
	}
	t.apply(taken, stored, fresh)
}

// startOnRedis is when Redis took taken, on its clock: what the take said, or
// where it did not, when the take was sent, by this host's estimate.
func (t *Taker) startOnRedis(taken Taken) time.Time {
	if !taken.Start.IsZero() {
		return taken.Start
	}
	return t.Clock.OnRedis(taken.At)
}

// park gives back the lock of a fresh take: the item waits for its first
// slot, with a cooldown until then and the slot in its state hash (see
// finish.Recorder.Park), as it would after a success. Where the schedule
// that made it fresh does not read (a value written by hand), the item
// runs now instead: its start is recorded, and run reports it so.
func (t *Taker) park(ctx context.Context, taken Taken) (run bool, err error) {
	ctx, cancel := t.held(ctx)
	defer cancel()
	cron := t.run(taken).Schedule.Cron
	if !cron.Set() {
		if err := t.Record.RecordStart(ctx, t.Client, taken.Item, t.Token, taken.Fence, t.startOnRedis(taken)); err != nil {
			t.Log.Warn().Err(err).Str("item", clip.Item(taken.Item)).Msg("could not record the start of the run")
		}
		return true, nil
	}
	// The first slot after the take, on Redis' clock: a take that Redis
	// ran just after a slot began waits for the next one, as a run it
	// started would.
	now := t.Clock.Now()
	slot := cron.Next(taken.Item, t.startOnRedis(taken))
	wait := time.Duration(0)
	if slot.IsZero() {
		// No slot within five years: the item waits that long.
		wait = 5 * 365 * 24 * time.Hour
		slot = now.Add(wait)
	} else {
		wait = max((slot.Sub(now) + time.Millisecond - 1).Truncate(time.Millisecond), 0)
	}
	if err := t.Record.Park(ctx, t.Client, taken.Key, taken.Token, taken.Item, slot, wait); err != nil {
		return false, err
	}
	t.Log.Debug().Str("item", clip.Item(taken.Item)).Time("slot", slot).Msg("a new item waits for its first slot")
	return false, nil
}
