package take

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/redisconn"
)

// ErrHeld is returned by TakeNamed when another holder has the item's lock.
var ErrHeld = errors.New("its lock is held")

// ErrPaused is returned by TakeNamed when an operator paused the item.
var ErrPaused = errors.New("it is paused")

// namedPoll is how often WaitNamed tries a held lock: a lock given back is
// taken within a quarter of a second, at four SET NX a second per waiting
// w8y, a load that no Redis notices.
const namedPoll = 250 * time.Millisecond

// HeldError is a named item's lock that stayed held, places of
// --fleet-max-running that stayed in use, or a --fleet-rate that allowed
// no start (Why: ErrHeld, ErrFull or ErrRateFull), for all of the wait
// (w8y --item --wait).
type HeldError struct {
	Item string
	Wait time.Duration
	Why  error
}

func (e HeldError) Error() string {
	if e.Wait == 0 {
		return fmt.Sprintf("item %s: %v (--wait 0: not waiting for it)", quote(e.Item), e.Why)
	}
	return fmt.Sprintf("item %s: %v, still after --wait %s", quote(e.Item), e.Why, duration.Format(e.Wait))
}

func (e HeldError) Is(target error) bool { return target == ErrHeld }

// WaitNamed takes item's lock as TakeNamed does, trying again every
// namedPoll while another holder has it, every place of
// --fleet-max-running is in use or --fleet-rate allows no start, for up to wait (w8y --item --wait). held
// is called once, with why it waits, when it first has to. It returns a
// HeldError once wait has passed, jobctl.ErrStopped if stop is closed first, and
// a paused item's error with what runs it anyway.
func (t *Taker) WaitNamed(ctx context.Context, item string, ignorePause bool, wait time.Duration, stop <-chan struct{}, held func(why error)) (Taken, error) {
	deadline := time.Now().Add(wait)
	for first := true; ; first = false {
		select {
		case <-stop:
			return Taken{}, jobctl.ErrStopped
		default:
		}
		taken, err := t.TakeNamed(ctx, item, ignorePause)
		switch {
		case errors.Is(err, ErrPaused):
			return Taken{}, fmt.Errorf("item %s: %w: --ignore-pause runs it anyway", quote(item), err)
		case !errors.Is(err, ErrHeld) && !errors.Is(err, ErrFull) && !errors.Is(err, ErrRateFull):
			return taken, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return Taken{}, HeldError{Item: item, Wait: wait, Why: err}
		}
		if first && held != nil {
			held(err)
		}
		timer := time.NewTimer(min(namedPoll, left))
		select {
		case <-timer.C:
		case <-stop:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return Taken{}, ctx.Err()
		}
	}
}

// TakeNamed takes the lock of item, which the caller names (w8y --item)
// instead of a pass choosing it from the list, as a pass per candidate
// takes a candidate's (each.lua): the same lock, fencing token and
// start record, so that the fleet and a named run never hold the item at
// once. The list is neither read nor changed, and the item need not be in
// it. A cooldown or a backoff does not hold a named item back: the caller
// asked for it by name. A pause does, unless ignorePause: checked before
// the lock is tried, and again once it is ours, since a pause may come in
// between (the lock is then given back). Under FleetMax, it takes a place
// too, and returns ErrFull when every place is in use; under a Rate, it
// counts its start, and returns ErrRateFull when the rate allows none.
func (t *Taker) TakeNamed(ctx context.Context, item string, ignorePause bool) (Taken, error) {
	if reason := childcmd.ItemProblem(item, t.MaxItemLen); reason != "" {
		return Taken{}, fmt.Errorf("item %s cannot be run: %s", quote(item), reason)
	}
	if !ignorePause {
		if paused, err := t.paused(ctx, item); err != nil || paused {
			return Taken{}, errors.Join(err, pausedErr(paused))
		}
	}
	try, err := t.tryLock(ctx, item)
	if err != nil {
		return Taken{}, err
	}
	if err := try.refusal(); err != nil {
		return Taken{}, err
	}
	// The lock is ours: a stop signal must not cut short what completes it.
	ctx, cancel := t.held(ctx)
	defer cancel()
	if !ignorePause {
		if paused, err := t.paused(ctx, item); err != nil || paused {
			// The lock is ours and must go; if Redis failed, it expires
			// by itself.
			_, _ = finish.Release(ctx, t.Client, try.Key, try.Token, item)
			return Taken{}, errors.Join(err, pausedErr(paused))
		}
	}
	return t.started(ctx, try, true)
}

// paused reports whether item's pause key exists.
func (t *Taker) paused(ctx context.Context, item string) (bool, error) {
	pipe := t.Client.Pipeline()
	exists := pipe.Exists(ctx, t.Keys.Pause(item))
	_, err := pipe.Exec(ctx)
	n := exists.Val()
	if err != nil {
		return false, redisconn.Wrap("check the pause of "+quote(item), err)
	}
	return n > 0, nil
}

// pausedErr is ErrPaused if paused, else nil.
func pausedErr(paused bool) error {
	if paused {
		return ErrPaused
	}
	return nil
}
