package take

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
)

// The idle look and the sweep. An idle --continuous worker, once a pass over
// the list has found nothing to take, no longer passes over the whole list
// every --idle-wait: it looks (dueScript) at what may have become eligible
// since, which costs Redis the same for ten items as for a million, and
// leaves the whole list to a sweep that one idle worker of the fleet makes
// now and then.
const (
	// LookEvery is the longest pause between an idle worker's looks,
	// however long --idle-wait is, before jitter (±25%): an item that an
	// operator makes due now is taken within a second.
	LookEvery = 800 * time.Millisecond
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

//go:embed due.lua
var dueSource string

// dueScript is an idle worker's look at the list: it tries the items that
// were appended since its last look and those whose due entry has passed,
// moves a due item it takes to the list's tail, and says when to pass over
// the whole list for the fleet (due.lua says how, at its top).
//
//	KEYS[1] -> the list
//	ARGV[1] -> the key prefix (the due index, the sweep key and each item's
//	           keys are under it, on the list's server)
//	ARGV[2] -> our token
//	ARGV[3] -> the lock's TTL in milliseconds
//	ARGV[4] -> how much of the list the last look saw, or -1
//	ARGV[5] -> the longest item the child can be given
//	ARGV[6] -> options: "now=MS most=N sweep=MS [state_ttl=MS events=N]"
//
// Returns {seen, item or false, sweep (1 or 0), fence, head1,
// size-or-type1, ...}, which look reads.
var dueScript = redis.NewScript(dueSource)

// looking is what a Taker learns from its passes and looks for the next
// look.
type looking struct {
	// length is the list's length at the start of the last pass, or how
	// much of it the last look saw (less than its length while items
	// appended at once are still to be tried), if known.
	length int64
	known  bool
	// passTime is how long the last whole pass took, or 0 before one.
	passTime time.Duration
	// off is set once the server turned out to lack a command that
	// dueScript needs (LPOS: Redis older than 6.0.6); idle workers then
	// pass over the whole list, as before.
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

// Looks reports whether an idle worker of this Taker looks instead of
// passing over the list: only where one script may touch all of an item's
// keys (see schema.Keys.Colocated).
func (t *Taker) Looks() bool {
	return t.Keys.Colocated && (t.Memory == nil || !t.Memory.look.off)
}

// look is Pass.Take's look: the item taken (ok), or whether to sweep.
func (p *Pass) look(ctx context.Context) (taken Taken, ok, sweep bool, err error) {
	t := p.t
	look := &t.Memory.look
	list := t.Keys.List()
	sent := time.Now()
	length := int64(-1)
	if look.known {
		length = look.length
	}
	words := "now=" + strconv.FormatInt(sent.UnixMilli(), 10) +
		" most=" + strconv.Itoa(lookMost) +
		" sweep=" + strconv.FormatInt(sweepEvery(look.passTime, t.IdleWait).Milliseconds(), 10) +
		t.Record.TakeWords()
	got, err := redisconn.RunConfirmed(ctx, t.Client, dueScript, t.ReplicaAcks, t.TTL, []string{list},
		t.Keys.Prefix, t.Token, t.TTL.Milliseconds(), length, t.MaxItemLen, words)
	reply, isList := got.([]any)
	if !isList {
		if err != nil && redisconn.UnknownCommand(err, "lpos") {
			look.off = true
			t.Log.Warn().Msg("this Redis has no LPOS (it is older than 6.0.6): idle workers pass over the whole list every --idle-wait instead of looking at what came due")
			return Taken{}, false, true, nil
		}
		if err == nil {
			err = fmt.Errorf("unexpected reply from due.lua: %T", got)
		}
		return Taken{}, false, false, redisconn.Wrap("look at "+quote(list), err)
	}
	if len(reply) < 4 || len(reply)%2 != 0 {
		return Taken{}, false, false, redisconn.Wrap("look at "+quote(list), fmt.Errorf("unexpected reply from due.lua: %d values", len(reply)))
	}
	look.length, look.known = reply[0].(int64)
	for _, s := range decodeSkipped(reply[4:]) {
		t.warnSkipped(s)
	}
	if item, isTaken := reply[1].(string); isTaken {
		taken := t.taken(item, sent)
		taken.Fence, _ = reply[3].(int64)
		t.warnNoFence(taken)
		if errors.Is(err, redisconn.ErrNotReplicated) {
			return Taken{}, false, false, unconfirmed(taken, err)
		}
		return taken, true, false, nil
	}
	if err != nil && !errors.Is(err, redisconn.ErrNotReplicated) {
		return Taken{}, false, false, redisconn.Wrap("look at "+quote(list), err)
	}
	s, _ := reply[2].(int64)
	return Taken{}, false, s == 1, nil
}
