package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/w8y/w8y/internal/lua"
	"github.com/w8y/w8y/internal/redisconn"
)

// An idle --continuous worker, once a pass over the list has found nothing
// to take, no longer passes over the whole list every --idle-wait: it looks
// (lua.Due) at what may have become eligible since, which costs Redis the
// same for ten items as for a million, and leaves the whole list to a sweep
// that one idle worker of the fleet makes now and then. See docs/how-it-works.md,
// "Idle workers".
const (
	// lookEvery is the longest pause between an idle worker's looks, however
	// long --idle-wait is, before jitter (±25%): an item that an operator
	// makes due now is taken within a second.
	lookEvery = 800 * time.Millisecond
	// lookMost is how many due entries, and how many new items, one look
	// tries.
	lookMost = 10
	// sweepCost is how many times longer than a pass over the whole list
	// takes the fleet waits between two sweeps: two thousand keeps the
	// sweeps to at most half a millisecond of Redis CPU a second, for the
	// whole fleet (a pass's time is mostly Redis' time).
	sweepCost = 2000
	// sweepMax bounds the wait between sweeps, whatever the list's size: it
	// is the longest that a change only a sweep notices (a cooldown or lock
	// deleted by hand) waits.
	sweepMax = time.Hour
)

// looking is what a Rotator learns from its passes and looks for the next
// look.
type looking struct {
	// length is the list's length at the start of the last pass, or how
	// much of it the last look saw (less than its length while items
	// appended at once are still to be tried), if known.
	length int64
	known  bool
	// passTime is how long the last whole pass took, or 0 before one.
	passTime time.Duration
	// off is set once the server turned out to lack a command that lua.Due
	// needs (LPOS: Redis older than 6.0.6); idle workers then pass over the
	// whole list, as before.
	off bool
}

// sweepEvery is how long the fleet waits between sweeps of a list whose
// whole pass took passTime: sweepCost times that, at least --idle-wait
// (a short list is swept as often as it was passed over before there were
// looks) and at most sweepMax.
func sweepEvery(passTime, idleWait time.Duration) time.Duration {
	if passTime > sweepMax/sweepCost {
		return sweepMax
	}
	return min(max(passTime*sweepCost, idleWait), sweepMax)
}

// Looks reports whether an idle worker of this Rotator looks instead of
// passing over the list: only where one script may touch all of an item's
// keys (see schema.Keys.Colocated).
func (r *Rotator) Looks() bool { return r.Keys.Colocated && !r.look.off }

// IdlePass is the take of an idle worker: a look, or when the look says it
// is this worker's turn to sweep, a pass over the whole list. Where the
// Rotator does not look, it is Pass.
func (r *Rotator) IdlePass() *Pass {
	p := r.Pass()
	p.looks = r.Looks()
	return p
}

// lookTake is Pass.Take's look: the item taken, or whether to sweep.
func (p *Pass) lookTake(ctx context.Context) (string, *Lock, bool, error) {
	r := p.r
	list := r.Keys.List()
	sent := time.Now()
	length := int64(-1)
	if r.look.known {
		length = r.look.length
	}
	words := "now=" + strconv.FormatInt(sent.UnixMilli(), 10) +
		" most=" + strconv.Itoa(lookMost) +
		" sweep=" + strconv.FormatInt(sweepEvery(r.look.passTime, r.IdleWait).Milliseconds(), 10) +
		r.Record.TakeWords()
	got, err := redisconn.RunConfirmed(ctx, r.Client, lua.Due, r.ReplicaAcks, r.TTL, []string{list},
		r.Keys.Prefix, r.Token, r.TTL.Milliseconds(), length, r.MaxItemLen, words)
	reply, ok := got.([]any)
	if !ok {
		if err != nil && redisconn.UnknownCommand(err, "lpos") {
			r.look.off = true
			r.Log.Warn().Msg("this Redis has no LPOS (it is older than 6.0.6): idle workers pass over the whole list every --idle-wait instead of looking at what came due")
			return "", nil, true, nil
		}
		if err == nil {
			err = fmt.Errorf("unexpected reply from lua.Due: %T", got)
		}
		return "", nil, false, redisconn.Wrap("look at "+quoteKey(list), err)
	}
	if len(reply) < 4 || len(reply)%2 != 0 {
		return "", nil, false, redisconn.Wrap("look at "+quoteKey(list), fmt.Errorf("unexpected reply from lua.Due: %d values", len(reply)))
	}
	r.look.length, r.look.known = reply[0].(int64)
	for _, s := range decodeSkipped(reply[4:]) {
		r.warnSkipped(s)
	}
	if item, taken := reply[1].(string); taken {
		lock := r.newLock(item)
		lock.expires = sent.Add(r.TTL)
		lock.Fence, _ = reply[3].(int64)
		r.warnNoFence(lock)
		if errors.Is(err, redisconn.ErrNotReplicated) {
			return "", nil, false, newUnconfirmed(lock, err)
		}
		return item, lock, false, nil
	}
	if err != nil && !errors.Is(err, redisconn.ErrNotReplicated) {
		return "", nil, false, redisconn.Wrap("look at "+quoteKey(list), err)
	}
	sweep, _ := reply[2].(int64)
	return "", nil, sweep == 1, nil
}
