package main

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/items"
	"github.com/w8y/w8y/internal/lua"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/runs"
	"github.com/w8y/w8y/internal/schema"
)

// ErrNoWork is returned by Take when one pass over the list found no item
// whose lock could be taken, or the list is empty or missing.
var ErrNoWork = errors.New("no item could be taken")

// listClient is the part of the Redis client that rotating the list needs.
type listClient interface {
	lockClient
	LLen(ctx context.Context, key string) *redis.IntCmd
	LMove(ctx context.Context, source, destination, srcpos, destpos string) *redis.StringCmd
	Incr(ctx context.Context, key string) *redis.IntCmd
	RPopLPush(ctx context.Context, source, destination string) *redis.StringCmd
}

// Rotator takes work items from the circular list.
type Rotator struct {
	Client listClient
	// Keys are the keys under the prefix. Where Keys.Colocated, Take
	// rotates the list and tries locks inside Redis, a batch of candidates
	// per round trip (lua.Take), instead of two round trips per candidate.
	Keys  schema.Keys
	Token string
	TTL   time.Duration
	// MaxItemLen is the longest item the child can be given (see
	// Command.maxItemLen); longer ones are skipped.
	MaxItemLen int
	// Batch is the most candidates one server-side call looks at; 0 means
	// takeBatch. The first call of a pass looks at fewer (firstBatch).
	// Tests set it low to cross batches with short lists.
	Batch int
	// Record, when set, records each take in the item's state hash and the
	// events stream (see record.go).
	Record *runs.Recorder
	// ReplicaAcks is --replica-acks: a take that fewer replicas confirm
	// fails with an unconfirmedError, which holds the lock to give back.
	ReplicaAcks int
	Log         zerolog.Logger

	// IdleWait is --idle-wait, the least time between two sweeps of the
	// list by idle workers (see sweepEvery).
	IdleWait time.Duration

	// noLMove is set once the server turned out to lack LMOVE (Redis
	// older than 6.2), so that rotate asks only once.
	noLMove bool
	// look is what idle workers' looks go on from (see due.go).
	look looking
}

// Take rotates the list one candidate at a time (LMOVE list list LEFT RIGHT,
// which never shortens it) and tries each eligible candidate's lock (SET NX
// with the expiry), looking at no more candidates than the list held at the
// start. A candidate is eligible when it has no cooldown, backoff or pause
// key. The first lock taken wins. It returns ErrNoWork after a pass without one, and
// errStopped if stop is closed between candidates (or, where the keys are
// colocated, between batches of them). Both ways leave Redis in the same
// state.
func (r *Rotator) Take(ctx context.Context, stop <-chan struct{}) (string, *Lock, error) {
	return r.Pass().Take(ctx, stop)
}

// Pass is one pass over the list, which Take can continue after it has
// taken an item: --parallel takes several items from one pass, and still
// looks at each candidate at most once.
type Pass struct {
	r *Rotator
	// left is how many candidates the pass has yet to look at, or -1 before
	// it has read the list's length.
	left int64
	// looks is set while the pass is an idle worker's look, which turns
	// into a whole pass when it is this worker's turn to sweep (see
	// Rotator.IdlePass).
	looks bool
	// swept is set once the look has turned into a sweep.
	swept bool
	// started is when the pass's first call was sent.
	started time.Time
}

// Pass starts a pass over the list.
func (r *Rotator) Pass() *Pass { return &Pass{r: r, left: -1} }

// Take is Rotator.Take, going on from where the pass's last Take stopped.
// It returns ErrNoWork once the pass has looked at every candidate.
func (p *Pass) Take(ctx context.Context, stop <-chan struct{}) (string, *Lock, error) {
	if p.left == 0 {
		return "", nil, ErrNoWork
	}
	if p.looks {
		p.looks = false
		item, lock, sweep, err := p.lookTake(ctx)
		if err != nil || lock != nil || !sweep {
			p.left = 0
			if err == nil && lock == nil {
				err = ErrNoWork
			}
			return item, lock, err
		}
		p.swept = true
	}
	if p.r.Keys.Colocated {
		return p.takeInBatches(ctx, stop)
	}
	return p.takeEach(ctx, stop)
}

// Swept reports whether this pass was an idle worker's sweep of the whole
// list for the fleet. A sweep that takes an item found work that the due
// index did not know of (a cooldown deleted by hand, say), of which there
// may be more: the worker goes back to passes.
func (p *Pass) Swept() bool { return p.swept }

// takeEach is Take with round trips per candidate, for where an item's keys
// may live on different servers (see schema.Keys.Colocated). A candidate costs an LMOVE and one pipeline of EXISTS for its
// cooldown, backoff and pause keys; a free one also the lock attempt and the same
// EXISTS again once the lock is ours, since the two reads are not atomic: a
// finishing run writes its cooldown before it releases its lock (see
// finishEach), so the check after taking the lock sees it. The item taken
// costs two more round trips, for its fencing token and its start record
// (see takeFence and runs.Recorder.RecordStart), which lua.Take writes in the
// take itself.
func (p *Pass) takeEach(ctx context.Context, stop <-chan struct{}) (string, *Lock, error) {
	r := p.r
	list := r.Keys.List()
	if p.left < 0 {
		n, err := r.Client.LLen(ctx, list).Result()
		if err != nil {
			return "", nil, redisconn.Wrap("read length of "+quoteKey(list), err)
		}
		p.left = n
	}
	for p.left > 0 {
		select {
		case <-stop:
			return "", nil, errStopped
		default:
		}
		p.left--
		item, err := r.rotate(ctx, list)
		if errors.Is(err, redis.Nil) {
			// Another client emptied the list during the pass.
			p.left = 0
			break
		}
		if err != nil {
			return "", nil, redisconn.Wrap("rotate "+quoteKey(list), err)
		}
		if reason := items.Problem(item, r.MaxItemLen); reason != "" {
			r.Log.Warn().Str("item", items.Clip(item)).Msg("skipping item: " + reason)
			continue
		}
		if waits, err := r.waits(ctx, item); err != nil || waits {
			if err != nil {
				return "", nil, err
			}
			continue
		}
		lock := r.newLock(item)
		sent := time.Now()
		got, err := redisconn.RunConfirmed(ctx, r.Client, lua.TryLock, r.ReplicaAcks, r.TTL, []string{lock.Key}, lock.Token, lock.TTL.Milliseconds())
		if got != int64(1) && err != nil {
			return "", nil, redisconn.Wrap("take lock "+quoteKey(lock.Key), err)
		}
		switch got := got.(type) {
		case int64:
			if got != 1 {
				continue
			}
			// With a reply, the only error is redisconn.ErrNotReplicated.
			unconfirmed := err
			lock.expires = sent.Add(lock.TTL)
			waits, err := r.waits(ctx, item)
			if err == nil && !waits {
				// The fencing token, in a round trip of its own: its key
				// may live on another server than the lock's.
				r.takeFence(ctx, lock)
				// The start is recorded before a take that the replicas did
				// not confirm is given back, as lua.Take records it in the
				// take, so that both paths leave the same record.
				if err := r.Record.RecordStart(ctx, r.Client, item, r.Token, lock.Fence, sent); err != nil {
					r.Log.Warn().Err(err).Str("item", items.Clip(item)).Msg("could not record the start of the run")
				}
				if unconfirmed != nil {
					return "", nil, newUnconfirmed(lock, unconfirmed)
				}
				return item, lock, nil
			}
			// A run that finished between the two reads. The lock is ours
			// and must go; if Redis failed, it expires by itself.
			_, _ = lock.Release(ctx)
			if err != nil {
				return "", nil, err
			}
		case string:
			r.warnLockType(items.Clip(item), got)
		}
	}
	return "", nil, ErrNoWork
}

// takeInBatches is Take with lua.Take: one round trip per batch of
// candidates (firstBatch, doubling up to takeBatch), and none for LLEN,
// which the first call of a pass reads. stop is checked between calls.
func (p *Pass) takeInBatches(ctx context.Context, stop <-chan struct{}) (string, *Lock, error) {
	r := p.r
	list := r.Keys.List()
	most := r.Batch
	if most <= 0 {
		most = takeBatch
	}
	call := batchTake{Prefix: r.Keys.Prefix, Token: r.Token, TTL: r.TTL, MaxItemLen: r.MaxItemLen, Batch: min(firstBatch, most)}
	// -1 asks the first call to start the pass from the list's length.
	for p.left != 0 {
		select {
		case <-stop:
			return "", nil, errStopped
		default:
		}
		sent := time.Now()
		call.Left, call.Now, call.Record = p.left, sent, r.Record.TakeWords()
		if r.Looks() {
			// Should this call end the pass without a take, the pass swept
			// the list, and the fleet's next sweep may wait (see due.go):
			// the pass's time so far, or the last one's, stands for its cost.
			elapsed := r.look.passTime
			if p.left >= 0 {
				elapsed = max(elapsed, time.Since(p.started))
			}
			call.Sweep = sweepEvery(elapsed, r.IdleWait)
		}
		taken, err := call.run(ctx, r.Client, r.ReplicaAcks, list)
		if err != nil && !errors.Is(err, redisconn.ErrNotReplicated) {
			return "", nil, redisconn.Wrap("scan "+quoteKey(list), err)
		}
		if p.left < 0 {
			p.started = sent
			r.look.length, r.look.known = taken.Length, taken.Length >= 0
		}
		p.left = taken.Left
		call.Batch = min(2*call.Batch, most)
		if p.left == 0 && !taken.Taken {
			r.look.passTime = time.Since(p.started)
		}
		for _, s := range taken.Skipped {
			r.warnSkipped(s)
		}
		if taken.Taken {
			lock := r.newLock(taken.Item)
			lock.expires = sent.Add(r.TTL)
			lock.Fence = taken.Fence
			r.warnNoFence(lock)
			if err != nil {
				return "", nil, newUnconfirmed(lock, err)
			}
			return taken.Item, lock, nil
		}
	}
	return "", nil, ErrNoWork
}

// rotate moves the head of list to its tail and returns it, with LMOVE.
// Redis older than 6.2 has no LMOVE: the first "unknown command" says so, is
// logged once, and from then on rotate uses RPOPLPUSH, which moves the tail
// to the head instead. The list then turns the other way round, losing no
// item all the same.
func (r *Rotator) rotate(ctx context.Context, list string) (string, error) {
	if !r.noLMove {
		item, err := r.Client.LMove(ctx, list, list, "LEFT", "RIGHT").Result()
		if err == nil || !redisconn.UnknownCommand(err, "lmove") {
			return item, err
		}
		r.noLMove = true
		r.Log.Warn().Msg("this Redis has no LMOVE (it is older than 6.2): rotating with RPOPLPUSH instead, which takes items from the end of the list and puts them first, so the list turns the other way round")
	}
	return r.Client.RPopLPush(ctx, list, list).Result()
}

// newLock is the lock of item as this Rotator takes it, for this Rotator's
// runs.
func (r *Rotator) newLock(item string) *Lock {
	lock := &Lock{Key: r.Keys.Lock(item), Token: r.Token, TTL: r.TTL, Item: item, client: r.Client, acks: r.ReplicaAcks}
	if r.Keys.Colocated {
		lock.CancelKey = r.Keys.Cancel(item)
	}
	return lock
}

// takeFence increments the list's fencing token for lock, as lua.Take does
// in the take itself: a failure leaves lock.Fence 0, with a warning.
func (r *Rotator) takeFence(ctx context.Context, lock *Lock) {
	fence, err := r.Client.Incr(ctx, r.Keys.Fence()).Result()
	if err != nil {
		r.Log.Warn().Err(err).Str("item", items.Clip(lock.Item)).Msgf("could not increment the fencing token %s: the child gets W8Y_FENCE=0", quoteKey(r.Keys.Fence()))
		return
	}
	lock.Fence = fence
}

// warnNoFence warns when a take that lua.Take or lua.Due made could not
// increment the fencing token (its key holds another type, or an ACL rule
// lacks INCR): the child gets W8Y_FENCE=0, which no storage system that
// checks fences accepts.
func (r *Rotator) warnNoFence(lock *Lock) {
	if lock.Fence == 0 {
		r.Log.Warn().Str("item", items.Clip(lock.Item)).Msgf("could not increment the fencing token %s: the child gets W8Y_FENCE=0", quoteKey(r.Keys.Fence()))
	}
}

// waits reports whether item has a cooldown, a backoff or a pause key, with
// one EXISTS per key in one pipeline, since they may live on different
// servers.
func (r *Rotator) waits(ctx context.Context, item string) (bool, error) {
	pipe := r.Client.Pipeline()
	cooling := pipe.Exists(ctx, r.Keys.Cooldown(item))
	backing := pipe.Exists(ctx, r.Keys.Backoff(item))
	paused := pipe.Exists(ctx, r.Keys.Pause(item))
	if _, err := pipe.Exec(ctx); err != nil {
		return false, redisconn.Wrap("check the cooldown, backoff and pause of "+quoteKey(items.Clip(item)), err)
	}
	return cooling.Val()+backing.Val()+paused.Val() > 0, nil
}

// unconfirmedError is a take whose lock too few replicas confirmed
// (--replica-acks): the lock is ours, but a failover could lose it, so the
// caller must give it back before any child runs (see worker.giveBack).
type unconfirmedError struct {
	lock *Lock
	err  error
}

// newUnconfirmed is the unconfirmedError of lock, whose take cause reports.
func newUnconfirmed(lock *Lock, cause error) error {
	return &unconfirmedError{lock: lock, err: redisconn.Wrap("take lock "+quoteKey(lock.Key), cause)}
}

func (e *unconfirmedError) Error() string { return e.err.Error() }
func (e *unconfirmedError) Unwrap() error { return e.err }

// warnSkipped warns of an item that a take passed over for good.
func (r *Rotator) warnSkipped(s skippedItem) {
	if s.LockType != "" {
		r.warnLockType(s.Head, s.LockType)
		return
	}
	r.Log.Warn().Str("item", items.ClipHead(s.Head, s.Size)).Msg("skipping item: " + items.ProblemOf(s.Size, true, r.MaxItemLen))
}

// warnLockType warns that the lock key of item (shown clipped) holds a value
// of type kind instead of a lock. The item counts as locked: w8y can neither
// take nor wait out such a key, and must not delete what it does not own.
func (r *Rotator) warnLockType(item, kind string) {
	r.Log.Warn().Str("item", item).Msgf("skipping item: its lock key holds a %s, not a lock; an operator must delete it before the item can run", kind)
}
