package take

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/redisconn"
)

// The busy pass per candidate: for where an item's keys may live on other
// servers than the list (see schema.Keys.Colocated), each candidate costs
// its own round trips, and each command names one key.

//go:embed each.lua
var eachSource string

// eachScript takes one lock as SET NX PX does, and names a lock key of
// another type, which SET NX alone would pass over without a word.
//
//	KEYS[1] -> the item's lock key
//	KEYS[2] -> with a cap, the places in use (see schema.Keys.Running)
//	KEYS[3] -> with a cap, its record (see schema.Keys.FleetMax)
//	KEYS[4] -> with a rate, the log of the fleet's starts (schema.Keys.Starts)
//	KEYS[5] -> with a rate, its record (see schema.Keys.FleetRate)
//	ARGV[1] -> our token
//	ARGV[2] -> the lock's TTL in milliseconds
//	ARGV[3] -> the cap, --fleet-max-running (0: none)
//	ARGV[4] -> where the keys are colocated, the counts' index of locks
//	ARGV[5] -> and the item
//	ARGV[6] -> and the rate, --fleet-rate, as N/MS ("" for none)
//
// Returns {1, Redis' clock in Unix milliseconds} when taken, 0 when another
// holder has it, -1 when every place
// under the cap was in use, -2 when the rate allowed no start, or the
// key's type (such as "hash") when it holds something that is not a lock.
var eachScript = withPlaces(eachSource)

// takeEach is Pass.Take with round trips per candidate. A candidate costs
// an LMOVE and one pipeline of EXISTS for its cooldown, backoff and pause
// keys; a free one also the lock attempt (eachScript) and the same
// EXISTS again once the lock is ours, since the two reads are not atomic: a
// finishing run writes its cooldown before it releases its lock (see
// finish.Finisher), so the check after taking the lock sees it. The item taken
// costs two more round trips, for its fencing token and its start record
// (see takeFence and finish.Recorder.RecordStart), which batch.lua writes in
// the take itself.
func (p *Pass) takeEach(ctx context.Context, stop <-chan struct{}) (Taken, error) {
	t := p.t
	list := t.Keys.List()
	if p.left < 0 {
		n, err := t.Client.LLen(ctx, list).Result()
		if err != nil {
			return Taken{}, redisconn.Wrap("read length of "+quote(list), err)
		}
		p.left = n
	}
	for p.left > 0 {
		if stopped(stop) {
			return Taken{}, jobctl.ErrStopped
		}
		p.left--
		item, err := t.rotate(ctx, list)
		if errors.Is(err, redis.Nil) {
			// Another client emptied the list during the pass.
			p.left = 0
			break
		}
		if err != nil {
			return Taken{}, redisconn.Wrap("rotate "+quote(list), err)
		}
		if reason := childcmd.ItemProblem(item, t.MaxItemLen); reason != "" {
			t.Log.Warn().Str("item", clip.Item(item)).Msg("skipping item: " + reason)
			continue
		}
		if waits, err := t.waits(ctx, item, false); err != nil || waits {
			if err != nil {
				return Taken{}, err
			}
			continue
		}
		try, err := t.tryLock(ctx, item)
		if err != nil {
			return Taken{}, err
		}
		var wrongType lockTypeError
		switch err := try.refusal(); {
		case err == nil:
			if taken, done, err := t.own(ctx, try); done {
				return taken, err
			}
		case errors.Is(err, ErrFull), errors.Is(err, ErrRateFull):
			return Taken{}, err
		case errors.As(err, &wrongType):
			t.warnLockType(clip.Item(item), wrongType.kind)
		}
	}
	return Taken{}, ErrNoWork
}

// own completes a lock that the pass per candidate took (see takeEach):
// it checks the item's blockers again, and that the list still holds it,
// and if no blocker came and no one removed it (w8yctl remove deletes the
// pause of an item it removes, which the first check may have seen),
// records the start (done, with the take or an error); otherwise it
// releases the lock, and the pass goes on (not done) unless Redis failed. The lock is ours by then,
// so a stop signal, which ends ctx, must not cut this short: the lock would
// be left to expire, and the item to wait for it. Only Redis' own failure,
// or the TTL, bounds it.
func (t *Taker) own(ctx context.Context, try lockTry) (taken Taken, done bool, err error) {
	ctx, cancel := t.held(ctx)
	defer cancel()
	waits, err := t.waits(ctx, try.Item, true)
	if err == nil && !waits {
		taken, err = t.started(ctx, try, false)
		return taken, true, err
	}
	// A run that finished between the two reads. The lock is ours and must
	// go; if Redis failed, it expires by itself.
	_, _ = finish.Release(ctx, t.Client, try.Key, try.Token, try.Item)
	return Taken{}, err != nil, err
}

// held is ctx for what completes a lock that is ours: a stop signal,
// which ends ctx, does not end it; the lock's TTL does.
func (t *Taker) held(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), t.TTL)
}

// lockTry is what each.lua made of one attempt at an item's lock, which
// a pass per candidate and a named take (TakeNamed) make alike.
type lockTry struct {
	// Taken is the take that the attempt stands for, if got says it took
	// the lock (see tookLock).
	Taken
	// got is each.lua's reply: {1, now} for the lock taken, 0 for one
	// another holder has, or the type of a lock key that holds something
	// else.
	got any
	// notReplicated is the error of a lock taken that too few replicas
	// confirmed (redisconn.ErrNotReplicated), else nil.
	notReplicated error
}

// refusal is nil where try took the lock; ErrFull or ErrRateFull where
// the fleet's --fleet-max-running or --fleet-rate allowed no start;
// ErrHeld where another holder has it; a lockTypeError where its key
// holds something other than a lock.
func (try lockTry) refusal() error {
	if tookLock(try.got) {
		return nil
	}
	switch got := try.got.(type) {
	case string:
		return lockTypeError{key: try.Key, kind: got}
	case int64:
		switch got {
		case fullFence:
			return ErrFull
		case rateFence:
			return ErrRateFull
		}
	}
	return ErrHeld
}

// tookLock reports whether got, each.lua's reply, says that it took the
// lock: {1, now}.
func tookLock(got any) bool {
	reply, ok := got.([]any)
	return ok && len(reply) == 2 && reply[0] == int64(1)
}

// lockTypeError is a lock key that holds a kind of value other than a
// lock: no worker may take the item until an operator deletes it.
type lockTypeError struct{ key, kind string }

func (e lockTypeError) Error() string {
	return fmt.Sprintf("the lock key %s holds a %s, not a lock: delete it or choose another --key-prefix", quote(e.key), e.kind)
}

// tryLock tries item's lock with eachScript, confirmed by
// --replica-acks replicas. It fails only where Redis gave no reply, or
// refused the lock and the replicas both.
func (t *Taker) tryLock(ctx context.Context, item string) (lockTry, error) {
	taken := t.taken(item, time.Now())
	keys, args := []string{taken.Key}, []any{taken.Token, t.TTL.Milliseconds()}
	if t.FleetMax > 0 || !t.Rate.IsZero() {
		// Only where one script may name the places and the rate's log
		// with the lock (see CheckPlaces).
		keys = append(keys, t.Keys.Running(), t.Keys.FleetMax(), t.Keys.Starts(), t.Keys.FleetRate())
	}
	args = append(args, t.FleetMax)
	if t.Keys.Colocated {
		rate := ""
		if !t.Rate.IsZero() {
			rate = t.Rate.Record()
		}
		args = append(args, t.Keys.Locks(), item, rate)
	}
	got, err := redisconn.RunConfirmed(ctx, t.Client, eachScript, t.ReplicaAcks, t.TTL, keys, args...)
	if !tookLock(got) && err != nil {
		return lockTry{}, redisconn.Wrap("take lock "+quote(taken.Key), err)
	}
	if tookLock(got) {
		now, _ := got.([]any)[1].(int64)
		taken.Start = redisTime(now)
	}
	// With a reply, the only error is redisconn.ErrNotReplicated.
	return lockTry{Taken: taken, got: got, notReplicated: err}, nil
}

// started completes a lock that tryLock took: the fencing token, in a
// round trip of its own (its key may live on another server than the
// lock's), and the run's start record. The start is recorded before a take
// that the replicas did not confirm is given back, as batch.lua records it
// in the take, so that both paths leave the same record.
//
// The item's own settings are read too (readOwn), before the start is
// recorded: a take of an item that waits for its first slot records none,
// unless named, which runs now.
func (t *Taker) started(ctx context.Context, try lockTry, named bool) (Taken, error) {
	taken := try.Taken
	taken.Fence = t.takeFence(ctx, taken.Item)
	t.readOwn(ctx, &taken, named)
	// On Redis' clock, as the finish records the end (finish.Finisher's
	// onRedisClock): a start on the host's clock and an end on its estimate
	// of Redis' could come out in the wrong order for a short run.
	if !taken.fresh {
		if err := t.Record.RecordStart(ctx, t.Client, taken.Item, t.Token, taken.Fence, t.startOnRedis(taken)); err != nil {
			t.Log.Warn().Err(err).Str("item", clip.Item(taken.Item)).Msg("could not record the start of the run")
		}
	}
	if try.notReplicated != nil {
		return Taken{}, unconfirmed(taken, try.notReplicated)
	}
	return taken, nil
}

// rotate moves the head of list to its tail and returns it, with LMOVE.
// Redis older than 6.2 has no LMOVE: the first "unknown command" says so, is
// logged once, and from then on rotate uses RPOPLPUSH, which moves the tail
// to the head instead. The list then turns the other way round, losing no
// item all the same.
func (t *Taker) rotate(ctx context.Context, list string) (string, error) {
	if !t.Memory.noLMove {
		item, err := t.Client.LMove(ctx, list, list, "LEFT", "RIGHT").Result()
		if err == nil || !redisconn.UnknownCommand(err, "lmove") {
			return item, err
		}
		t.Memory.noLMove = true
		t.Log.Warn().Msg("this Redis has no LMOVE (it is older than 6.2): rotating with RPOPLPUSH instead, which takes items from the end of the list and puts them first, so the list turns the other way round")
	}
	return t.Client.RPopLPush(ctx, list, list).Result()
}

// waits reports whether item has a cooldown, a backoff or a pause key, with
// one EXISTS per key in one pipeline, since they may live on different
// servers; with listed, also whether the list no longer holds it (LPOS, in
// the same pipeline; a Redis before 6.0.6, which has no LPOS, is not asked
// again).
func (t *Taker) waits(ctx context.Context, item string, listed bool) (bool, error) {
	pipe := t.Client.Pipeline()
	blockers := []*redis.IntCmd{
		pipe.Exists(ctx, t.Keys.Cooldown(item)),
		pipe.Exists(ctx, t.Keys.Backoff(item)),
		pipe.Exists(ctx, t.Keys.Pause(item)),
	}
	var at *redis.IntCmd
	if listed && !t.Memory.noLPos {
		at = pipe.LPos(ctx, t.Keys.List(), item, redis.LPosArgs{})
	}
	_, _ = pipe.Exec(ctx)
	var held int64
	for _, cmd := range blockers {
		if err := cmd.Err(); err != nil {
			return false, redisconn.Wrap("check the cooldown, backoff and pause of "+quote(clip.Item(item)), err)
		}
		held += cmd.Val()
	}
	removed := false
	if at != nil {
		switch err := at.Err(); {
		case errors.Is(err, redis.Nil):
			removed = true
		case redisconn.UnknownCommand(err, "lpos"):
			t.Memory.noLPos = true
		case err != nil:
			return false, redisconn.Wrap("look for "+quote(clip.Item(item))+" in "+quote(t.Keys.List()), err)
		}
	}
	return removed || held > 0, nil
}

// takeFence increments the list's fencing token for a take of item, as
// batch.lua does in the take itself: a failure gives 0, with a warning.
func (t *Taker) takeFence(ctx context.Context, item string) int64 {
	fence, err := t.Client.Incr(ctx, t.Keys.Fence()).Result()
	if err != nil {
		t.Log.Warn().Err(err).Str("item", clip.Item(item)).Msgf("could not increment the fencing token %s: the child gets W8Y_FENCE=0", quote(t.Keys.Fence()))
		return 0
	}
	return fence
}
