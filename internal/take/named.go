package take

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/w8y/w8y/internal/items"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/runs"
)

// ErrHeld is returned by TakeNamed when another holder has the item's lock.
var ErrHeld = errors.New("its lock is held")

// ErrPaused is returned by TakeNamed when an operator paused the item.
var ErrPaused = errors.New("it is paused")

// TakeNamed takes the lock of item, which the caller names (w8y --item)
// instead of a pass choosing it from the list, as a pass per candidate
// takes a candidate's (trylock.lua): the same lock, fencing token and
// start record, so that the fleet and a named run never hold the item at
// once. The list is neither read nor changed, and the item need not be in
// it. A cooldown or a backoff does not hold a named item back: the caller
// asked for it by name. A pause does, unless ignorePause: checked before
// the lock is tried, and again once it is ours, since a pause may come in
// between (the lock is then given back). Under FleetMax, it takes a place
// too, and returns ErrFull when every place is in use.
func (t *Taker) TakeNamed(ctx context.Context, item string, ignorePause bool) (Taken, error) {
	if reason := items.Problem(item, t.MaxItemLen); reason != "" {
		return Taken{}, fmt.Errorf("item %s cannot be run: %s", quote(item), reason)
	}
	if !ignorePause {
		if paused, err := t.paused(ctx, item); err != nil || paused {
			return Taken{}, errors.Join(err, pausedErr(paused))
		}
	}
	sent := time.Now()
	taken := t.taken(item, sent)
	keys, args := []string{taken.Key}, []any{taken.Token, t.TTL.Milliseconds()}
	if t.FleetMax > 0 {
		keys, args = append(keys, t.Keys.Running(), t.Keys.FleetMax()), append(args, t.FleetMax)
	}
	got, err := redisconn.RunConfirmed(ctx, t.Client, tryLockScript, t.ReplicaAcks, t.TTL, keys, args...)
	if got != int64(1) && err != nil {
		return Taken{}, redisconn.Wrap("take lock "+quote(taken.Key), err)
	}
	switch got := got.(type) {
	case string:
		return Taken{}, fmt.Errorf("the lock key %s holds a %s, not a lock: delete it or choose another --key-prefix", quote(taken.Key), got)
	case int64:
		switch got {
		case fullFence:
			return Taken{}, ErrFull
		case 0:
			return Taken{}, ErrHeld
		}
	}
	notReplicated := err
	if !ignorePause {
		if paused, err := t.paused(ctx, item); err != nil || paused {
			// The lock is ours and must go; if Redis failed, it expires
			// by itself.
			_, _ = runs.Release(ctx, t.Client, taken.Key, taken.Token, item)
			return Taken{}, errors.Join(err, pausedErr(paused))
		}
	}
	taken.Fence = t.takeFence(ctx, item)
	if err := t.Record.RecordStart(ctx, t.Client, item, t.Token, taken.Fence, sent); err != nil {
		t.Log.Warn().Err(err).Str("item", items.Clip(item)).Msg("could not record the start of the run")
	}
	if notReplicated != nil {
		return Taken{}, unconfirmed(taken, notReplicated)
	}
	return taken, nil
}

// paused reports whether item's pause key exists.
func (t *Taker) paused(ctx context.Context, item string) (bool, error) {
	pipe := t.Client.Pipeline()
	exists := pipe.Exists(ctx, t.Keys.Pause(item))
	_, err := pipe.Exec(ctx)
	n := exists.Val()
	if err != nil {
		return false, redisconn.Wrap("check the pause of "+quote(items.Clip(item)), err)
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
