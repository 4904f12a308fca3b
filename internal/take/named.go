package take

import (
	"context"
	"errors"
	"fmt"

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
// between (the lock is then given back).
func (t *Taker) TakeNamed(ctx context.Context, item string, ignorePause bool) (Taken, error) {
	if reason := items.Problem(item, t.MaxItemLen); reason != "" {
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
	switch got := try.got.(type) {
	case string:
		return Taken{}, fmt.Errorf("the lock key %s holds a %s, not a lock: delete it or choose another --key-prefix", quote(try.Key), got)
	case int64:
		if got != 1 {
			return Taken{}, ErrHeld
		}
	}
	if !ignorePause {
		if paused, err := t.paused(ctx, item); err != nil || paused {
			// The lock is ours and must go; if Redis failed, it expires
			// by itself.
			_, _ = runs.Release(ctx, t.Client, try.Key, try.Token, item)
			return Taken{}, errors.Join(err, pausedErr(paused))
		}
	}
	return t.started(ctx, try)
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
