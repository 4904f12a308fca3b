package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/redisconn"
)

var (
	//go:embed trylock.lua
	tryLockSource string
	// tryLockScript is SET NX PX that also names a lock key of another type.
	tryLockScript = redis.NewScript(tryLockSource)
)

// ErrNoWork is returned by Take when one pass over the list found no item
// whose lock could be taken, or the list is empty or missing.
var ErrNoWork = errors.New("no item could be taken")

// errStopped is returned by Take when stop was closed between candidates.
var errStopped = errors.New("stopped")

// listClient is the part of the Redis client that rotating the list needs.
type listClient interface {
	lockClient
	LLen(ctx context.Context, key string) *redis.IntCmd
	LMove(ctx context.Context, source, destination, srcpos, destpos string) *redis.StringCmd
	RPopLPush(ctx context.Context, source, destination string) *redis.StringCmd
}

// Keys names the Redis keys under one prefix. Other programs write these
// keys, so their layout is part of w8y's interface.
type Keys struct {
	Prefix string
}

// List is the circular list of work items.
func (k Keys) List() string { return k.Prefix + "list" }

// Lock is the lock key of item.
func (k Keys) Lock(item string) string { return k.Prefix + "lock:" + item }

// Cooldown is the key that keeps item from running after a success until it
// expires: any key there pauses the item, so an operator can set one too.
func (k Keys) Cooldown(item string) string { return k.Prefix + "cooldown:" + item }

// Backoff is the key that keeps item from running after a failure until it
// expires; its expiry is the current failure delay.
func (k Keys) Backoff(item string) string { return k.Prefix + "backoff:" + item }

// State is the hash that records item's runs (see record.go), among them its
// consecutive failures, which the failure backoff doubles with.
func (k Keys) State(item string) string { return k.Prefix + "state:" + item }

// Events is the capped stream of runs' starts and ends (see record.go).
func (k Keys) Events() string { return k.Prefix + "events" }

// Rotator takes work items from the circular list.
type Rotator struct {
	Client listClient
	Keys   Keys
	Token  string
	TTL    time.Duration
	// MaxItemLen is the longest item the child can be given (see
	// Command.maxItemLen); longer ones are skipped.
	MaxItemLen int
	// ServerScan makes Take rotate and try locks inside Redis, a batch of
	// candidates per round trip (scan.lua), instead of two round trips per
	// candidate. Set it from canScanOnServer.
	ServerScan bool
	// Batch is the most candidates one server-side call looks at; 0 means
	// scanBatch. Tests set it low to cross batches with short lists.
	Batch int
	// Record, when set, records each take in the item's state hash and the
	// events stream (see record.go).
	Record *recorder
	// ReplicaAcks is --replica-acks: a lock that fewer replicas confirm is
	// given back at once, and the take fails (see runScript).
	ReplicaAcks int
	// Finisher, when set, ends a take that is given back (see giveBack) as
	// it ends every run, recording it.
	Finisher *finisher
	Log      zerolog.Logger

	// noLMove is set once the server turned out to lack LMOVE (Redis
	// older than 6.2), so that rotate asks only once.
	noLMove bool
}

// Take rotates the list one candidate at a time (LMOVE list list LEFT RIGHT,
// which never shortens it) and tries each eligible candidate's lock (SET NX
// with the expiry), looking at no more candidates than the list held at the
// start. A candidate is eligible when it has no cooldown or backoff key. The
// first lock taken wins. It returns ErrNoWork after a pass without one, and
// errStopped if stop is closed between candidates (or, with ServerScan,
// between batches of them). Both ways leave Redis in the same state.
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
}

// Pass starts a pass over the list.
func (r *Rotator) Pass() *Pass { return &Pass{r: r, left: -1} }

// Take is Rotator.Take, going on from where the pass's last Take stopped.
// It returns ErrNoWork once the pass has looked at every candidate.
func (p *Pass) Take(ctx context.Context, stop <-chan struct{}) (string, *Lock, error) {
	if p.left == 0 {
		return "", nil, ErrNoWork
	}
	if p.r.ServerScan {
		return p.takeInBatches(ctx, stop)
	}
	return p.takeEach(ctx, stop)
}

// takeEach is Take with round trips per candidate, for where scan.lua
// cannot run (see canScanOnServer) and an item's keys may live on different
// servers. A candidate costs an LMOVE and one pipeline of EXISTS for its
// cooldown and backoff keys; a free one also the lock attempt and the same
// EXISTS again once the lock is ours, since the two reads are not atomic: a
// finishing run writes its cooldown before it releases its lock (see
// finishEach), so the check after taking the lock sees it. The item taken
// costs one more round trip, for the start record (see recordStart), which
// scan.lua writes in the take itself.
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
		if reason := badItem(item, r.MaxItemLen); reason != "" {
			r.Log.Warn().Str("item", clip(item)).Msg("skipping item: " + reason)
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
		got, err := redisconn.RunConfirmed(ctx, r.Client, tryLockScript, r.ReplicaAcks, r.TTL, []string{lock.Key}, lock.Token, lock.TTL.Milliseconds())
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
				// The start is recorded before a take that the replicas did
				// not confirm is given back, as scan.lua records it in the
				// take, so that both paths leave the same record.
				if err := r.Record.recordStart(ctx, r.Client, item, r.Token, sent); err != nil {
					r.Log.Warn().Err(err).Str("item", item).Msg("could not record the start of the run")
				}
				if unconfirmed != nil {
					return "", nil, r.giveBack(ctx, lock, unconfirmed)
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
			r.warnLockType(clip(item), got)
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
	return &Lock{Key: r.Keys.Lock(item), Token: r.Token, TTL: r.TTL, Item: item, client: r.Client, acks: r.ReplicaAcks}
}

// waits reports whether item has a cooldown or a backoff key, with one
// EXISTS per key in one pipeline, since the two may live on different
// servers.
func (r *Rotator) waits(ctx context.Context, item string) (bool, error) {
	pipe := r.Client.Pipeline()
	cooling := pipe.Exists(ctx, r.Keys.Cooldown(item))
	backing := pipe.Exists(ctx, r.Keys.Backoff(item))
	if _, err := pipe.Exec(ctx); err != nil {
		return false, redisconn.Wrap("check the cooldown and backoff of "+quoteKey(clip(item)), err)
	}
	return cooling.Val()+backing.Val() > 0, nil
}

// giveBack releases lock, just taken but not confirmed by enough replicas
// (cause), and returns the error that the take failed with: running the
// child on a lock that a failover could lose might run the item twice.
//
// The take's start is already recorded, so the release records an end for
// it: interrupted, with no child, as when a stop signal comes between a take
// and its child. That keeps every start event followed by an end, counts
// neither as a success nor as a failure of the item, and deletes the lock
// only while it still holds our token, as every release does.
func (r *Rotator) giveBack(ctx context.Context, lock *Lock, cause error) error {
	end := runEnd{Result: resultInterrupted, At: time.Now()}
	var err error
	if r.Finisher != nil {
		_, err = r.Finisher.finish(ctx, lock, end)
	} else {
		_, err = lock.Release(ctx)
	}
	if err != nil {
		r.Log.Warn().Err(err).Str("lock_key", lock.Key).Msg("could not give back an unconfirmed lock; it will expire by itself")
	}
	return redisconn.Wrap("take lock "+quoteKey(lock.Key), cause)
}

// warnLockType warns that the lock key of item (shown clipped) holds a value
// of type kind instead of a lock. The item counts as locked: w8y can neither
// take nor wait out such a key, and must not delete what it does not own.
func (r *Rotator) warnLockType(item, kind string) {
	r.Log.Warn().Str("item", item).Msgf("skipping item: its lock key holds a %s, not a lock; an operator must delete it before the item can run", kind)
}

// badItem says why item cannot be handed to a child whose arguments and
// environment fit items of up to maxLen bytes, or returns "".
func badItem(item string, maxLen int) string {
	return whyBad(len(item), strings.IndexByte(item, 0) >= 0, maxLen)
}

// whyBad is badItem for an item of size bytes that holds a NUL byte or not.
// It checks the size first, so that scan.lua, which returns only the head of
// a skipped item, gets the same reason without sending the whole item.
func whyBad(size int, hasNUL bool, maxLen int) string {
	switch {
	case size == 0:
		return "it is empty"
	case size > maxLen:
		return fmt.Sprintf("it is %d bytes long, and the command's arguments and environment fit at most %d", size, maxLen)
	case hasNUL:
		return "it holds a NUL byte, which cannot pass through argv or the environment"
	}
	return ""
}

// clipLen is how much of a skipped item a log line shows: enough to find it
// with LRANGE, short enough that a megabyte item does not flood the log.
const clipLen = 64

// clip shortens item for a log line.
func clip(item string) string {
	return clipHead(item[:min(len(item), clipLen)], len(item))
}

// clipHead is clip for an item of size bytes of which only head, its first
// clipLen bytes or fewer, is known.
func clipHead(head string, size int) string {
	if size <= clipLen {
		return head
	}
	return fmt.Sprintf("%s... (%d bytes)", head, size)
}
