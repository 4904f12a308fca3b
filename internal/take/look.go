package take

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/w8y/w8y/internal/redisconn"
)

// The look. Every take where one script reaches an item's keys (see
// Taker.Looks) starts with a look (lookScript) at what may be eligible: the
// items appended since the fleet last looked, and the due index. It costs
// Redis the same for ten items as for a million, but for the step of the
// fleet's sweep that it makes while one is due (see index.go), which is
// bounded too.
const (
	// LookEvery is the pause, before jitter (±25%), of an idle worker
	// whose looks follow each other without a probe between (a probe that
	// said yes, then a look that found nothing): short, as such a worker
	// has something to find, and long enough that it cannot spin. An idle
	// worker otherwise waits for a wake (see internal/wake), until what
	// its probe says comes due, or its fallback's look.
	LookEvery = 125 * time.Millisecond
	// lookMost is how many due entries one look tries.
	lookMost = 10
	// lookNew is how many appended items one look tries, at most: as many
	// as the pass's largest batch (maxBatch), which keeps a look to about a
	// millisecond of Redis' time however many items were pushed at once;
	// the take looks again while more are left, each tried once for the
	// whole fleet.
	lookNew = maxBatch
)

//go:embed look.lua
var lookSource string

// lookScript is a look at the list: it makes the step of the fleet's sweep
// that is due, if one is, then tries the items appended since the fleet's
// last look and those whose due entry has passed, and moves a due item it
// takes to the list's tail (look.lua says how, at its top).
//
//	KEYS[1] -> the list
//	ARGV[1] -> the key prefix (the due index, the sweep and seen keys and
//	           each item's keys are under it, on the list's server)
//	ARGV[2] -> our token
//	ARGV[3] -> the lock's TTL in milliseconds
//	ARGV[4] -> the longest item the child can be given
//	ARGV[5] -> options: "most=N new=N sweep=N every_ms=MS sweep_min=MS
//	           sweep_max=MS sweep_lease=MS [head=0] [state_ttl=MS events=N]
//	           [cap=N] [rate=N/MS]"
//
// Returns {unseen, item or false, swept, fence, untried, sweeping, settings,
// now, head1, size-or-type1, ...}, which look reads.
var lookScript = indexed(lookSource)

// looking is what a Taker learns from its passes and looks for the next
// look.
type looking struct {
	// off is set once the server turned out to lack a command that
	// lookScript needs (LPOS: Redis older than 6.0.6); takes then pass over
	// the whole list, as before.
	off bool
	// quiet is set while the last look found nothing at all: the next one
	// probes first (see probe).
	quiet bool
	// next is what the last probe said of when its answer may change by
	// itself (see Taker.NextDue); zero after a look.
	next nextDue
	// early is a probe's answer that came with the end of a wait (see
	// Taker.ProbeCmd), which the next take reads instead of probing.
	early earlyProbe
	// loaded is set once a probe of this Taker's ran: Redis has the
	// script, which ProbeCmd names by its hash alone.
	loaded bool
}

// Looks reports whether a take of this Taker starts with a look instead of
// a pass over the list: only where one script may touch all of an item's
// keys (see schema.Keys.Colocated).
func (t *Taker) Looks() bool {
	return t.Keys.Colocated && (t.Memory == nil || !t.Memory.look.off)
}

// lookReply is what one look did: the item it took (ok), whether appended
// items are still to be tried (more), how many items at the list's head no
// worker has tried yet (untried).
type lookReply struct {
	taken    Taken
	ok, more bool
	// pass is set when this server cannot look (it lacks LPOS): the take
	// passes over the whole list instead.
	pass bool
	// sweeping is set when this caller drives the fleet's sweep, whose next
	// step may come at once (see index.lua's sweepStep).
	sweeping bool
	// full is ErrFull when every place of --fleet-max-running was in use,
	// ErrRateFull when --fleet-rate allowed no start: the look tried
	// nothing.
	full    error
	untried int64
}

// look is one call of lookScript for Pass.Take.
func (p *Pass) look(ctx context.Context) (lookReply, error) {
	t := p.t
	look := &t.Memory.look
	list := t.Keys.List()
	sent := time.Now()
	head := ""
	if p.looked {
		// The pass took by a look already: no pass over the head, which
		// could take that item again.
		head = " head=0"
	}
	args := t.lookArgs(head)
	if t.Start != "" {
		args[4] = args[4].(string) + " " + t.Start
	}
	got, err := redisconn.RunConfirmed(ctx, t.Client, lookScript, t.ReplicaAcks, t.TTL, []string{list}, args...)
	if refused := startRefusal(err); refused != nil {
		return lookReply{}, refused
	}
	reply, isList := got.([]any)
	if isList {
		t.Start = ""
	}
	if !isList {
		if err != nil && redisconn.UnknownCommand(err, "lpos") {
			look.off = true
			t.Log.Warn().Msg("this Redis has no LPOS (it is older than 6.0.6): every take passes over the whole list instead of looking at what came due")
			return lookReply{pass: true}, nil
		}
		if err == nil {
			err = fmt.Errorf("unexpected reply from look.lua: %T", got)
		}
		return lookReply{}, redisconn.Wrap("look at "+quote(list), err)
	}
	if len(reply) < 8 || len(reply)%2 != 0 {
		return lookReply{}, redisconn.Wrap("look at "+quote(list), fmt.Errorf("unexpected reply from look.lua: %d values", len(reply)))
	}
	unseen, _ := reply[0].(int64)
	untried, _ := reply[4].(int64)
	t.logSwept(reply[2])
	if taken, isTaken := t.readTaken(reply, sent); isTaken {
		if errors.Is(err, redisconn.ErrNotReplicated) {
			return lookReply{}, unconfirmed(taken, err)
		}
		return lookReply{taken: taken, ok: true}, nil
	}
	if err != nil && !errors.Is(err, redisconn.ErrNotReplicated) {
		return lookReply{}, redisconn.Wrap("look at "+quote(list), err)
	}
	if full := refusal(reply[3]); full != nil {
		// Every place is in use, or the rate allows no start: the next
		// take probes first, as after a look that found nothing, and the
		// probe counts the places and reads the rate's log (see probe),
		// so that a worker waiting for a place or for the rate costs
		// Redis what an idle one does.
		look.quiet = true
		return lookReply{full: full}, nil
	}
	sweeping, _ := reply[5].(int64)
	out := lookReply{more: unseen > 0, untried: untried, sweeping: sweeping == 1}
	look.quiet = !out.more && untried == 0 && !out.sweeping
	look.next = nextDue{}
	look.early = earlyProbe{}
	return out, nil
}

// refusal is the error of a take script's fence that says it looked at
// nothing (fullFence, rateFence), or nil.
func refusal(fence any) error {
	switch fence {
	case int64(fullFence):
		return ErrFull
	case int64(rateFence):
		return ErrRateFull
	}
	return nil
}

// logSwept tells of the items that the step of the sweep in a look's reply
// gave an entry in the due index, or an earlier one: items that no take
// would have found until then.
func (t *Taker) logSwept(swept any) {
	if n, _ := swept.(int64); n > 0 {
		t.Log.Info().Int64("items", n).Msg("the fleet's sweep found items that no take would have found (a key deleted by hand, an entry of the due index lost, an item appended behind an outside LREM): they are due now, or when what holds them expires")
	}
}

// lookArgs are lookScript's arguments for a look, with head
// " head=0" to look on past untried items at the list's head, or "".
func (t *Taker) lookArgs(head string) []any {
	words := "most=" + strconv.Itoa(lookMost) +
		" new=" + strconv.Itoa(lookNew) + sweepWords() + head + t.takeWords()
	return []any{t.Keys.Prefix, t.Token, t.TTL.Milliseconds(), t.MaxItemLen, words}
}

// readTaken reads the item that lookScript's reply, to a look sent at sent,
// says it took, if any, and warns of the items it skipped for good.
func (t *Taker) readTaken(reply []any, sent time.Time) (Taken, bool) {
	for _, s := range decodeSkipped(reply[8:]) {
		t.warnSkipped(s)
	}
	item, isTaken := reply[1].(string)
	if !isTaken {
		return Taken{}, false
	}
	taken := t.taken(item, sent)
	taken.Fence, _ = reply[3].(int64)
	now, _ := reply[7].(int64)
	taken.Start = redisTime(now)
	t.ownReply(&taken, reply[6])
	t.warnNoFence(taken)
	return taken, true
}
