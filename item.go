package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/items"
	"github.com/w8y/w8y/internal/take"
)

// OneItemOptions are w8y --item: run the command for one named item under
// its lock, as flock -w runs one under a file's. They sit in the "Items
// and locks" group of --help (ItemOptions embeds them). --item has no
// variable: W8Y_ITEM is what every child is given.
type OneItemOptions struct {
	Item        string        `long:"item" value-name:"NAME" description:"Run the command for item NAME alone, under its lock" details:"Run the command once for the item NAME, under the lock the fleet uses for it (<prefix>lock:NAME), recording its state, events, fencing token, timeout and cooldown or backoff as a run of the list would. The list is neither read nor changed, and NAME need not be in it. A cooldown or backoff does not hold it back; a pause does (exit 125), unless --ignore-pause. Not with --continuous or --parallel."`
	Wait        duration.Flag `long:"wait" env:"W8Y_WAIT" value-name:"DURATION" description:"With --item, wait up to DURATION for its lock (0: not at all)" details:"With --item, wait up to DURATION for a held lock, trying it every 250ms; still held then, w8y exits 121 without running the command. 0 (the default) does not wait."`
	IgnorePause bool          `long:"ignore-pause" env:"W8Y_IGNORE_PAUSE" description:"With --item, run it even if it is paused" details:"With --item, run the item even while an operator has paused it (w8yctl pause); the pause stays."`
}

// validateOneItem checks --item, --wait and --ignore-pause.
func (o *Options) validateOneItem() error {
	switch {
	case o.Item == "" && (o.Wait != 0 || o.IgnorePause):
		return usageError("--wait and --ignore-pause go with --item")
	case o.Item != "" && (o.Continuous || o.Parallel > 1):
		return usageError("--item runs one named item once: it does not go with --continuous or --parallel")
	case o.Wait < 0:
		return usageError("--wait must not be negative, got %s", o.Wait)
	}
	return nil
}

// exitHeld is w8y --item's code when the item's lock stayed held for all of
// --wait. flock -w uses 1, which w8y cannot: a child's own 1 must stay
// apart from "never ran". 121 is just below w8y's other codes, and as
// unused by shells and timeout(1) as they are.
const exitHeld = 121

// namedPoll is how often --item tries a held lock: a lock given back is
// taken within a quarter of a second, at four SET NX a second per waiting
// w8y, a load that no Redis notices.
const namedPoll = 250 * time.Millisecond

// heldError is a lock that stayed held, or places of --fleet-max-running
// that stayed in use (why, take.ErrHeld or take.ErrFull), for all of --wait.
type heldError struct {
	item string
	wait time.Duration
	why  error
}

func (e heldError) Error() string {
	if e.wait == 0 {
		return fmt.Sprintf("item %q: %v (--wait 0: not waiting for it)", items.Clip(e.item), e.why)
	}
	return fmt.Sprintf("item %q: %v, still after --wait %s", items.Clip(e.item), e.why, duration.Format(e.wait))
}

func (e heldError) Is(target error) bool { return target == take.ErrHeld }

// one is w8y --item: it takes the named item's lock, waiting up to --wait,
// runs the child under it and finishes the run as a run of the list is
// finished. It ends as a one-shot run of one child does.
func (w *worker) one(ctx context.Context) error {
	item := w.opts.Item
	lock, err := w.takeNamed(ctx, item)
	if err != nil {
		return err
	}
	end := w.runItem(ctx, item, lock)
	switch {
	case errors.Is(end.Err, errStopped):
		return w.stops.stopErr()
	case end.Err != nil:
		return end.Err
	case end.Exit.Code != 0:
		return &childExitError{end: end}
	}
	return nil
}

// takeNamed takes item's lock, trying again every namedPoll while it is
// held (or every place of --fleet-max-running is in use), until --wait has
// passed or a stop signal comes.
func (w *worker) takeNamed(ctx context.Context, item string) (*Lock, error) {
	wait := time.Duration(w.opts.Wait)
	deadline := time.Now().Add(wait)
	r := w.rotator
	for logged := false; ; logged = true {
		if w.stops.stopping() {
			return nil, w.stops.stopErr()
		}
		taken, err := r.TakeNamed(ctx, item, w.opts.IgnorePause)
		var unconfirmed *take.UnconfirmedError
		switch {
		case err == nil:
			return r.lock(taken), nil
		case errors.As(err, &unconfirmed):
			w.giveBack(ctx, r.lock(unconfirmed.Taken))
			return nil, err
		case errors.Is(err, take.ErrPaused):
			return nil, fmt.Errorf("item %q: %w: --ignore-pause runs it anyway", items.Clip(item), err)
		case !errors.Is(err, take.ErrHeld) && !errors.Is(err, take.ErrFull):
			return nil, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, heldError{item: item, wait: wait, why: err}
		}
		if !logged {
			w.log.Info().Str("item", items.Clip(item)).Str("wait", duration.Format(wait)).Msgf("%v: waiting for it (--wait)", err)
		}
		timer := time.NewTimer(min(namedPoll, left))
		select {
		case <-timer.C:
		case <-w.stops.Stopped():
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
}
