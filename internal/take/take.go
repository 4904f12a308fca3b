package take

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/settings"
)

// ErrNoWork is returned by Pass.Take when the pass over the list found no
// item whose lock could be taken, or the list is empty or missing.
var ErrNoWork = errors.New("no item could be taken")

// A take whose stop channel was closed between two candidates (or batches
// of them) before an item was taken returns jobctl.ErrStopped, the one
// sentinel of a stop signal that came before an item was taken.

// Client is the part of the Redis client that taking an item needs: scripts
// (pipelined with WAIT for --replica-acks), a pipeline for an item's keys
// where one script cannot name them all, and the commands of the
// per-candidate path.
type Client interface {
	redisconn.ScriptClient
	Pipeline() redis.Pipeliner
	LLen(ctx context.Context, key string) *redis.IntCmd
	LMove(ctx context.Context, source, destination, srcpos, destpos string) *redis.StringCmd
	RPopLPush(ctx context.Context, source, destination string) *redis.StringCmd
	Incr(ctx context.Context, key string) *redis.IntCmd
}

// Taker takes items from one list: the settings of its takes, and the
// Memory that they learn from and add to.
type Taker struct {
	Client Client
	// Keys are the keys under the prefix. Where Keys.Colocated, a pass
	// rotates the list and tries locks inside Redis, a batch of candidates
	// per round trip (batch.lua), instead of two round trips per candidate.
	Keys  schema.Keys
	Token string
	TTL   time.Duration
	// MaxItemLen is the longest item the child can be given; longer ones
	// are skipped.
	MaxItemLen int
	// Batch is the most candidates one server-side call looks at; 0 means
	// maxBatch. The first call of a pass looks at fewer (firstBatch).
	// Tests set it low to cross batches with short lists.
	Batch int
	// Record, when set, records each take in the item's state hash and the
	// events stream (see finish.Recorder).
	Record *finish.Recorder
	// ReplicaAcks is --replica-acks: a take that fewer replicas confirm
	// fails with an UnconfirmedError, which holds the lock to give back.
	ReplicaAcks int
	// FleetMax is --fleet-max-running: a take runs only while fewer than
	// FleetMax runs of the list hold a place, anywhere in the fleet, and
	// takes one (see place.go); 0 means no cap. It needs Keys.Colocated
	// (see CheckPlaces).
	FleetMax int
	// Rate is --fleet-rate: a take runs only while the fleet started fewer
	// than Rate.Starts items in the last Rate.Per, and counts its own start
	// (see rate.go); the zero Rate is none. It needs Keys.Colocated (see
	// CheckPlaces).
	Rate schema.Rate
	// Clock puts the probe's "now" on Redis' clock, which the scripts read
	// themselves (see internal/clock); nil takes the host's to be right.
	Clock *clock.Clock
	Log   zerolog.Logger
	// Start, where set, are the words of the checks of a worker's start
	// (see StartWords) that its next look makes in the same call; a look
	// that Redis answered clears it.
	Start string
	// Settings are the worker's own options that an item's own settings
	// stand in for (see internal/settings): each Taken's Run is made from
	// them and the settings that come back with the lock.
	Settings settings.Defaults
	// NewItemsWait makes an item never run wait for its first slot where
	// it runs on a schedule (see settings.lua), rather than run now.
	NewItemsWait bool
	// Told tells once of each setting that does not read; nil tells none.
	Told *settings.Told
	// Memory is what earlier passes learned; nil until the first pass
	// makes it.
	Memory *Memory
}

// Memory is what a Taker's passes and looks learn for the next ones.
type Memory struct {
	// noLMove is set once the server turned out to lack LMOVE (Redis older
	// than 6.2), so that rotate asks only once; noLPos, LPOS (older than
	// 6.0.6), so that the pass per candidate stops asking whether an item
	// it took is still in the list.
	noLMove, noLPos bool
	// look is what idle workers' looks go on from (see look.go).
	look looking
	// batch is how many candidates the next pass in batches looks at
	// first, from what the last one looked at (see nextBatch); 0 before.
	batch int
}

// Taken is an item whose lock a take got: all that the caller needs to
// hold, refresh and release the lock.
type Taken struct {
	Item string
	// Key is the item's lock key, and Token the value it holds: ours.
	Key, Token string
	// Fence is the list's fencing token that this take got (see
	// schema.Keys.Fence), or 0 if the fence key could not be incremented.
	Fence int64
	// CancelKey is the item's cancel request key, where one script may
	// read it with the lock (see schema.Keys.Colocated), else "".
	CancelKey string
	// LocksKey is the counts' index of locks (schema.Keys.Locks), whose
	// entry the lock's refreshes move, where CancelKey is set; else "".
	LocksKey string
	// At is when the call that took it was sent, on this host's clock.
	At time.Time
	// Start is when Redis took it, on Redis' clock: the run's start, as
	// the item's state hash records it (last_start) and --schedule counts
	// it. It is the zero time where the take did not say (the pass per
	// candidate, see takeEach), and At stands for it.
	Start time.Time
	// Expires is the earliest moment the server may expire the lock: At
	// plus the TTL.
	Expires time.Time
	// Settings are the item's own settings as its hash held them at the
	// take, and Run what they make of the Taker's Settings: the run's
	// timeout and the schedule that its end sets; nil where the item has
	// none, and the worker's options stand.
	Settings settings.Stored
	Run      *settings.Run
	// fresh is a take of an item that waits for its first slot: Pass.Take
	// gives it back (park) rather than return it.
	fresh bool
}

// UnconfirmedError is a take whose lock too few replicas confirmed
// (--replica-acks): the lock is ours, but a failover could lose it, so the
// caller must give it back before any child runs. It wraps
// redisconn.ErrNotReplicated.
type UnconfirmedError struct {
	Taken Taken
	err   error
}

func (e *UnconfirmedError) Error() string { return e.err.Error() }
func (e *UnconfirmedError) Unwrap() error { return e.err }

// unconfirmed is the UnconfirmedError of taken, whose take cause reports.
func unconfirmed(taken Taken, cause error) error {
	return &UnconfirmedError{Taken: taken, err: redisconn.Wrap("take lock "+quote(taken.Key), cause)}
}

// Pass is one pass over the list, which Take can continue after it has
// taken an item: --parallel takes several items from one pass, and still
// looks at each candidate at most once.
type Pass struct {
	t *Taker
	// left is how many candidates the pass has yet to look at, or -1 before
	// it has read the list's length.
	left int64
	// length is the list's length when the pass read it, or -1 before.
	length int64
	// looks is set while the pass's takes are looks (see Taker.LookFirst),
	// until a look finds nothing.
	looks bool
	// head is set while the pass goes over the items at the list's head
	// that no worker has tried (see look.lua's "untried").
	head bool
	// looked is set once a look of the pass took an item. Its later looks
	// no longer pass over the untried items at the head, which could take
	// that item again once its run has ended, where a pass looks at each
	// candidate at most once (--parallel).
	looked bool
}

// Pass starts a whole pass over the list: every candidate is looked at
// until one is taken. --until-idle, which must know that nothing is left,
// takes this way.
func (t *Taker) Pass() *Pass {
	if t.Memory == nil {
		t.Memory = &Memory{}
	}
	return &Pass{t: t, left: -1, length: -1}
}

// LookFirst starts the way a worker takes: each Take is a look at the
// appended items and the due index, whose cost does not grow with the
// list, and turns into a pass only over the items at the list's head that
// no worker has tried yet. Where the Taker does not look (see Looks), it
// is Pass.
func (t *Taker) LookFirst() *Pass {
	p := t.Pass()
	p.looks = t.Looks()
	return p
}

// Take takes an item: with a pass that looks first, by a look (or a pass
// over the untried items at the list's head that a look hands it);
// otherwise it rotates the list and tries each eligible candidate's lock,
// looking at no more candidates than the list held at the start of the
// pass, and going on from where the pass's last Take stopped. A candidate
// is eligible when it has no cooldown, backoff or pause key. The first lock
// taken wins. It returns ErrNoWork once the pass has looked at every
// candidate, or a look found nothing, and jobctl.ErrStopped if stop is closed
// between candidates (or, where the keys are colocated, between batches of
// them or looks). Both ways of a pass leave Redis in the same state.
//
// An item that waits for its first slot (see settings.go) is not returned:
// its lock is given back with a cooldown until that slot, and the pass
// goes on.
func (p *Pass) Take(ctx context.Context, stop <-chan struct{}) (Taken, error) {
	for {
		taken, err := p.take(ctx, stop)
		if err != nil || !taken.fresh {
			return taken, err
		}
		run, err := p.t.park(ctx, taken)
		if err != nil {
			// The lock is ours, and expires by itself: the item waits that
			// long, as after any take whose worker lost Redis.
			return Taken{}, err
		}
		if run {
			return taken, nil
		}
	}
}

// take is Take, fresh takes included.
func (p *Pass) take(ctx context.Context, stop <-chan struct{}) (Taken, error) {
	for {
		if p.left == 0 {
			return Taken{}, ErrNoWork
		}
		for p.looks {
			if stopped(stop) {
				return Taken{}, jobctl.ErrStopped
			}
			// A probe that named a moment now passed (an item's due entry,
			// the sweep's step that came due just now) would say yes: the
			// look goes first, and what it finds is the next probe's to
			// say; but an answer that came with the wait's end (see
			// Taker.ProbeCmd) is newer than that moment, and says.
			if look := &p.t.Memory.look; look.next.passed(time.Now()) && !look.early.fresh(time.Now()) {
				look.next = nextDue{}
			} else if p.t.Memory.look.quiet && !p.looked {
				if worth, full := p.probe(ctx); !worth {
					p.left = 0
					if full != nil {
						return Taken{}, full
					}
					return Taken{}, ErrNoWork
				}
			}
			look, err := p.look(ctx)
			switch {
			case err != nil:
				p.left = 0
				return Taken{}, p.t.listRefused(ctx, err)
			case look.ok:
				p.looked = true
				return look.taken, nil
			case look.full != nil:
				p.left = 0
				return Taken{}, look.full
			case look.more:
				// Appended items are still to be tried: a bounded batch each
				// look, each tried once by the fleet.
				continue
			case look.sweeping:
				// This worker drives the fleet's sweep: its next step at
				// once, a bounded one each look, until it is over.
				continue
			case look.pass:
				p.looks = false
			case look.untried > 0 && !p.looked:
				// Items at the head that no worker has tried: a pass over
				// them, which rotates them as a one-shot run always has.
				p.looks, p.head, p.left = false, true, look.untried
			default:
				p.left = 0
				return Taken{}, ErrNoWork
			}
		}
		var taken Taken
		var err error
		if p.t.Keys.Colocated {
			taken, err = p.takeInBatches(ctx, stop)
		} else {
			taken, err = p.takeEach(ctx, stop)
		}
		if p.head && errors.Is(err, ErrNoWork) && !errors.Is(err, ErrFull) && !errors.Is(err, ErrRateFull) {
			// The untried items are tried now: the look may elect a sweep.
			p.looks, p.head, p.left = true, false, -1
			continue
		}
		return taken, p.t.listRefused(ctx, err)
	}
}

// listRefused is err, the error of a take, in the words that every command
// gives a list key of another type (schema.Keys.NotAList) where the list key
// is one: Redis' WRONGTYPE names no key. The TYPE it asks costs a round trip
// on a refusal alone, which ends the worker.
func (t *Taker) listRefused(ctx context.Context, err error) error {
	if !errors.Is(err, redisconn.ErrRefused) {
		return err
	}
	pipe := t.Client.Pipeline()
	kind := pipe.Type(ctx, t.Keys.List())
	if _, terr := pipe.Exec(ctx); terr != nil {
		return err
	}
	switch k := kind.Val(); k {
	case "list", "none":
		return err
	default:
		return redisconn.Refusal(t.Keys.NotAList(k))
	}
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// taken is the Taken of item's lock as this Taker takes it, by a call sent
// at sent.
func (t *Taker) taken(item string, sent time.Time) Taken {
	taken := Taken{Item: item, Key: t.Keys.Lock(item), Token: t.Token, At: sent, Expires: sent.Add(t.TTL)}
	if t.Keys.Colocated {
		taken.CancelKey, taken.LocksKey = t.Keys.Cancel(item), t.Keys.Locks()
	}
	return taken
}

// warnNoFence warns when a take that batch.lua or look.lua made could not
// increment the fencing token (its key holds another type, or an ACL rule
// lacks INCR): the child gets W8Y_FENCE=0, which no storage system that
// checks fences accepts.
func (t *Taker) warnNoFence(taken Taken) {
	if taken.Fence == 0 {
		t.Log.Warn().Str("item", clip.Item(taken.Item)).Msgf("could not increment the fencing token %s: the child gets W8Y_FENCE=0", quote(t.Keys.Fence()))
	}
}

// skippedItem is an item that a take passed over for good: the child cannot
// be given it (Size is its size) or its lock key holds a value of another
// type (LockType names it). Head is its first clip.Len bytes.
type skippedItem struct {
	Head     string
	Size     int
	LockType string
}

// decodeSkipped reads the pairs that end batch.lua's and look.lua's replies:
// the items passed over that an operator should hear of.
func decodeSkipped(pairs []any) []skippedItem {
	var out []skippedItem
	for i := 0; i+1 < len(pairs); i += 2 {
		head, _ := pairs[i].(string)
		skipped := skippedItem{Head: head[:min(len(head), clip.Len)]}
		switch v := pairs[i+1].(type) {
		case int64:
			skipped.Size = int(v)
		case string:
			skipped.LockType = v
		}
		out = append(out, skipped)
	}
	return out
}

// warnSkipped warns of an item that a take passed over for good.
func (t *Taker) warnSkipped(s skippedItem) {
	if s.LockType != "" {
		t.warnLockType(s.Head, s.LockType)
		return
	}
	t.Log.Warn().Str("item", clip.Head(s.Head, s.Size)).Msg("skipping item: " + childcmd.ItemProblemOf(s.Size, true, t.MaxItemLen))
}

// warnLockType warns that the lock key of item (shown clipped) holds a value
// of type kind instead of a lock. The item counts as locked: w8y can neither
// take nor wait out such a key, and must not delete what it does not own.
func (t *Taker) warnLockType(item, kind string) {
	t.Log.Warn().Str("item", item).Msgf("skipping item: its lock key holds a %s, not a lock; an operator must delete it before the item can run", kind)
}

// quote quotes key for messages, its head only when it is long.
func quote(key string) string { return fmt.Sprintf("%q", clip.Item(key)) }

// redisTime is ms, a time on Redis' clock in Unix milliseconds that a
// script returned, or the zero time where it gave none.
func redisTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
