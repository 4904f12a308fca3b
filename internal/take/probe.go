package take

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/script"
)

//go:embed probe.lua
var probeSource string

// probeScript is an idle worker's probe (probe.lua): it writes nothing and
// says whether a look could find anything, and when that may change by
// itself.
//
//	KEYS[1] -> the list
//	ARGV[1] -> the key prefix
//	ARGV[2] -> --fleet-max-running, or 0
//	ARGV[3] -> --fleet-rate's N, or 0; ARGV[4] -> its D in milliseconds
//
// Returns {worth, full, next, now, sweep}, which probe reads.
var probeScript = script.New(clock.Lua, probeSource)

// nextDue is what a probe said of the moment its answer may change without
// a write that wakes the worker: in, from the moment at of the probe, when
// the due index's first entry passes (an item's cooldown or pause ends),
// or -1 for never; sweep, when the fleet's sweep is due, or -1 if the probe
// did not say; probed, whether a probe said.
type nextDue struct {
	at     time.Time
	in     time.Duration
	sweep  time.Duration
	probed bool
}

// passed reports whether a moment that the probe named has passed by now,
// so that its "no" is stale and a look would find what changed: the due
// index's first entry, or the fleet's sweep, but the sweep only within
// SweepGrace (and sweepSlack) of its moment. That is when a worker's wait
// ends for it (see NextDue), and when a lone worker's fallback finds it
// due. A worker of a fleet whose wait ended later, spread by the fleet's
// size, most likely finds the step made by the worker whose fallback came
// first (the fleet's come about every 50ms): its probe, not a look, says
// whether the step is still due, which spares an idle fleet a look at each
// of its fallbacks.
func (n nextDue) passed(now time.Time) bool {
	if !n.probed {
		return false
	}
	since := now.Sub(n.at)
	return (n.in >= 0 && since >= n.in) || (n.sweep >= 0 && since >= n.sweep && since <= n.sweep+SweepGrace+sweepSlack)
}

// sweepSlack is how late past SweepGrace a wait that ended for the sweep
// may come and still look at once: a timer's lateness.
const sweepSlack = 250 * time.Millisecond

// probe is what an idle worker sends instead of a look while its last look
// found nothing: one call of probe.lua, which costs Redis a fraction of a
// look, and reports whether a look could find anything. Where it says no,
// look.lua would try no candidate and write nothing, so the probe's "no" is
// the look's own answer, and the worker takes nothing. Where a look could
// find something, full says why the answer is no all the same: ErrFull
// when every place of --fleet-max-running is in use, as the look would have
// found, ErrRateFull when --fleet-rate allows no start. A probe that fails
// says yes: the look that follows meets the same error, and says it in its
// own words.
func (p *Pass) probe(ctx context.Context) (worth bool, full error) {
	t := p.t
	look := &t.Memory.look
	look.next = nextDue{}
	reply, at, ok := look.early.use(time.Now())
	if !ok {
		var err error
		reply, err = probeScript.Run(ctx, t.Client, []string{t.Keys.List()}, t.probeArgs()...).Int64Slice()
		if err != nil || len(reply) != 5 {
			return true, nil
		}
		look.loaded = true
		at = time.Now()
	}
	look.next = nextDue{at: at, in: -1, sweep: -1, probed: true}
	if reply[2] >= 0 {
		look.next.in = time.Duration(max(reply[2]-reply[3], 0)) * time.Millisecond
	}
	if reply[4] >= 0 {
		look.next.sweep = time.Duration(max(reply[4]-reply[3], 0)) * time.Millisecond
	}
	switch reply[1] {
	case 1:
		return false, ErrFull
	case 2:
		return false, ErrRateFull
	}
	return reply[0] == 1, nil
}

// probeArgs are probe.lua's ARGV for this Taker.
func (t *Taker) probeArgs() []any {
	return []any{t.Keys.Prefix, t.FleetMax, t.Rate.Starts, t.Rate.Per.Milliseconds()}
}

// ProbeCmd is the probe that this Taker's next take would send first (see
// Pass.probe), as a command of its own, or nil where that take looks
// without one (its last look found something, or it cannot look): an idle
// worker's wait sends it behind its BLPOP, in the same write (see
// wake.Waiter.Wait), so that Redis runs it the moment the wait ends and
// the take reads its answer (Probed) instead of asking again. An idle
// worker thus wakes Redis once a wait, not twice: the wait and its probe
// arrive together.
//
// The command names the script by its hash alone, so it goes only once a
// probe of this Taker's own has run (and loaded the script where Redis
// lacked it); where Redis has lost it since (a restart), the take probes
// as it would have, which loads it again.
func (t *Taker) ProbeCmd(ctx context.Context) *redis.Cmd {
	if !t.Looks() || t.Memory == nil || !t.Memory.look.quiet || !t.Memory.look.loaded {
		return nil
	}
	args := append([]any{"evalsha", probeScript.Hash(), 1, t.Keys.List()}, t.probeArgs()...)
	return redis.NewCmd(ctx, args...)
}

// Probed keeps the answer of a ProbeCmd that Redis ran as the worker's
// wait ended, for the next take, which reads it instead of probing if it
// comes within earlyFresh; a probe that failed is forgotten, and the take
// probes itself.
func (t *Taker) Probed(cmd *redis.Cmd) {
	if t.Memory == nil || cmd == nil {
		return
	}
	reply, err := cmd.Int64Slice()
	if err != nil || len(reply) != 5 {
		t.Memory.look.early = earlyProbe{}
		if redisconn.NoScript(err) {
			t.Memory.look.loaded = false
		}
		return
	}
	t.Memory.look.early = earlyProbe{reply: reply, at: time.Now()}
}

// earlyProbe is a probe's answer that came with the end of a wait (see
// Taker.ProbeCmd), for the take that follows.
type earlyProbe struct {
	reply []int64
	at    time.Time
}

// earlyFresh is how old an early probe's answer may be and still stand for
// the take's own: the loop takes as soon as the wait ends, so an answer
// older than this belongs to a wait whose take did not follow (the worker
// stopped, or ran a finish's item instead), and the take probes again.
const earlyFresh = 100 * time.Millisecond

// fresh reports whether an early answer stands at now.
func (e earlyProbe) fresh(now time.Time) bool {
	return e.reply != nil && now.Sub(e.at) < earlyFresh
}

// use returns the early answer, if it stands at now, and forgets it: it
// stands for one probe.
func (e *earlyProbe) use(now time.Time) (reply []int64, at time.Time, ok bool) {
	reply, at, ok = e.reply, e.at, e.fresh(now)
	*e = earlyProbe{}
	return reply, at, ok
}

// SweepGrace is how long past its due moment the fleet's sweep may wait
// for an idle worker's fallback look to make its step: a wait does not end
// for the sweep alone, whose step is no item's pickup, unless the fallback
// would come later than this (a long --idle-wait), so that a lone worker
// at the default --idle-wait (1.5s, at most 1.875s) spends no wait and
// probe of its own on it, and the sweep still comes round within its
// interval and SweepGrace whatever --idle-wait says.
const SweepGrace = 2 * time.Second

// NextDue is how long after now the answer of this Taker's last probe may
// change by itself: the due index's first entry passes, or the fleet's
// sweep has been due for SweepGrace; in is negative when nothing comes due
// by itself, and probed unset when no probe has said since the last look.
// The time is Redis' own (the probe reads its clock), counted on this host
// from the probe's moment.
func (t *Taker) NextDue() (in time.Duration, probed bool) {
	if t.Memory == nil || !t.Memory.look.next.probed {
		return 0, false
	}
	next := t.Memory.look.next
	in = next.in
	if next.sweep >= 0 && (in < 0 || next.sweep+SweepGrace < in) {
		in = next.sweep + SweepGrace
	}
	if in < 0 {
		return -1, true
	}
	return max(in-time.Since(next.at), 0), true
}
