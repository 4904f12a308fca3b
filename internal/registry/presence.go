package registry

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

const (
	// beatEvery is how often a worker announces itself while nothing
	// changes: three beats per TTL, so that one late or lost beat (a slow
	// Redis, a failover) does not drop a live worker.
	beatEvery = TTL / 3
	// fleetBeats bounds the beats a second of the whole fleet: a worker
	// beats every beatEvery while the fleet is small (up to 100 workers,
	// 20 beats a second), and less often in a larger one, up to
	// slowestBeat (see beatInterval). Each beat is a wake of an otherwise
	// idle Redis, which costs it more than the script (about 75 µs of CPU
	// on the project's VMs: docs/benchmarks.md); twenty a second is what
	// the fleet's fallback looks come to (FleetLookSpacing).
	fleetBeats = 20
	// slowestBeat bounds how seldom a worker beats, and so how long a dead
	// worker's entry lasts (three beats): 3 minutes in a fleet of 1,200
	// workers or more, which then beats n/60 times a second.
	slowestBeat = time.Minute
	// changeGap is the least time between two beats that a change (an item
	// started or ended) brings on: a worker that runs many short items
	// announces at most four times a second, not twice an item, and the
	// registry still shows a run within a quarter of a second.
	changeGap = 250 * time.Millisecond
	// oneShotQuiet is how long a one-shot run goes unannounced: a run
	// that ends sooner (most cron runs) costs Redis no write for the
	// registry, and one that runs longer is shown from then on, while the
	// operator can still see it.
	oneShotQuiet = time.Second
	// beatTimeout bounds one beat.
	beatTimeout = 5 * time.Second
	// removeTimeout bounds the removal at the end: a worker that stops
	// while Redis hangs must not wait long for an entry that expires by
	// itself anyway.
	removeTimeout = time.Second
	// measureEvery is how long the skew of Redis' clock may go unmeasured:
	// a beat that rides an idle worker's wait (see BeatCmd) cannot measure
	// it, since its reply comes when the wait ends, so the beat that comes
	// due once the last measurement is this old goes on its own.
	measureEvery = time.Minute
)

// Self is what a worker says of itself, which does not change while it
// runs.
type Self struct {
	Holder  string
	Host    string
	PID     int
	Version string
	Started time.Time
	// Continuous is --continuous; Slots is --parallel.
	Continuous bool
	Slots      int
	// Looks says that the worker looks at the due index while it has a
	// free slot, and so counts in schema.Keys.Looking then.
	Looks bool
}

// Presence is one worker's own entry in the registry: what the worker
// tells it (Started, Ended) is announced by Run, at once (within changeGap)
// and then every beatEvery, until Run's context ends and it removes the
// entry.
type Presence struct {
	client BeatClient
	keys   schema.Keys
	self   Self
	log    zerolog.Logger
	// clock puts the entry's expiry on Redis' clock, whose skew each beat
	// measures again (see internal/clock).
	clock *clock.Clock

	mu      sync.Mutex
	running []Run
	since   time.Time
	// changed wakes Run when what the worker runs has changed.
	changed chan struct{}
	// lookers is the count of live workers that look, as the last beat
	// read it.
	lookers atomic.Int64
	// interval is the time until the next beat, which the last beat set
	// from the fleet's size; the entry expires after three of them. mu
	// guards it and the schedule below.
	interval time.Duration
	// last is when the last beat was made, next when the next is due;
	// riding is set while a beat rides a wait (see BeatCmd); measured is
	// when a beat last measured the skew of Redis' clock. rearm tells Run
	// that next has moved.
	last, next, measured time.Time
	riding               bool
	rearm                chan struct{}
}

// beatInterval is how often each of live workers beats: every beatEvery,
// or in a fleet of more than beatEvery × fleetBeats (100) workers, so that
// the fleet beats fleetBeats times a second (15 s each for 300 workers),
// but at least every slowestBeat (from 1,200 workers on).
func beatInterval(live int64) time.Duration {
	return min(max(beatEvery, time.Duration(live)*time.Second/fleetBeats), slowestBeat)
}

// NewPresence makes the Presence of the worker self under keys, whose
// expiries clk puts on Redis' clock; Run announces it.
func NewPresence(client BeatClient, keys schema.Keys, self Self, clk *clock.Clock, log zerolog.Logger) *Presence {
	return &Presence{client: client, keys: keys, self: self, clock: clk, log: log, since: self.Started, changed: make(chan struct{}, 1),
		interval: beatEvery, rearm: make(chan struct{}, 1)}
}

// Started tells the registry that the worker runs item from now on. A nil
// Presence does nothing, as in tests without Redis.
func (p *Presence) Started(item string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if len(p.running) == 0 {
		p.since = time.Now()
	}
	p.running = append(p.running, Run{Item: item, Since: time.Now()})
	p.mu.Unlock()
	p.wake()
}

// Ended tells the registry that the worker's run of item has ended.
func (p *Presence) Ended(item string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if i := slices.IndexFunc(p.running, func(r Run) bool { return r.Item == item }); i >= 0 {
		p.running = slices.Delete(p.running, i, i+1)
	}
	if len(p.running) == 0 {
		p.since = time.Now()
	}
	p.mu.Unlock()
	p.wake()
}

func (p *Presence) wake() { signal(p.changed) }

// signal wakes whoever waits on c, if no wake is pending.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Lookers is how many live workers look for work, this one among them, as
// the last beat counted them: at least 1.
func (p *Presence) Lookers() int {
	if p == nil {
		return 1
	}
	return int(max(1, p.lookers.Load()))
}

// entry is the worker's Entry as it is now, and whether it looks.
func (p *Presence) entry(now time.Time, ttl time.Duration) (Entry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entryLocked(now, ttl)
}

// entryLocked is entry, with mu held.
func (p *Presence) entryLocked(now time.Time, ttl time.Duration) (Entry, bool) {
	mode, state := "one-shot", schema.WorkerIdle
	if p.self.Continuous {
		mode = "continuous"
	}
	if len(p.running) > 0 {
		state = schema.WorkerBusy
	}
	e := Entry{
		Holder: p.self.Holder, Host: p.self.Host, PID: p.self.PID, Version: p.self.Version, Mode: mode,
		Started: p.self.Started, State: state, Since: p.since, Running: slices.Clone(p.running), Expires: now.Add(ttl),
	}
	return e, p.self.Looks && len(p.running) < p.self.Slots
}

// Run announces the worker at once, again within changeGap of each
// change and every beatEvery, until ctx ends; it then removes the entry
// and returns. The registry is for operators and for spacing looks, and no
// run depends on it: a beat that Redis refuses (an ACL rule without the
// registry's commands) is warned of once it has failed twice in a row,
// since a first failure is most often the one the worker reports itself
// (a refused password), and one lost beat costs nothing; a Redis that is
// unreachable the loop reports itself. A removal that fails is left to
// the entry's expiry.
//
// A one-shot run announces itself only once it has run for oneShotQuiet,
// and removes an entry only where it wrote one.
func (p *Presence) Run(ctx context.Context) {
	failures := 0
	announced := false
	beat := func() {
		bctx, cancel := context.WithTimeout(ctx, beatTimeout)
		defer cancel()
		announced = true
		err := p.announce(bctx, p.clock.Now())
		if err != nil {
			// The next in a whole beat, as after one that went through.
			p.mu.Lock()
			p.next = time.Now().Add(p.interval)
			p.mu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			if failures >= 2 {
				p.log.Info().Msg("this worker is announced in the registry of live workers again")
			}
			failures = 0
			return
		case errors.Is(err, redisconn.ErrRefused):
			failures++
		default:
			p.log.Debug().Err(err).Msg("could not announce this worker in the registry of live workers")
			return
		}
		if failures == 2 {
			p.log.Warn().Err(err).Msg("could not announce this worker in the registry of live workers (see the ACL rule in docs/recipes.md); w8yctl workers does not show it until it can")
		}
	}
	first := oneShotQuiet
	if p.self.Continuous {
		beat()
		first = time.Until(p.nextBeat())
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			if !announced {
				return
			}
			// A beat that ctx cut short was written before the removal, so
			// Redis has it first; at worst its entry lingers until TTL.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
			defer cancel()
			if err := p.remove(rctx); err != nil {
				p.log.Debug().Err(err).Msg("could not remove this worker from the registry of live workers; its entry expires by itself")
			}
			return
		case <-p.changed:
			if !announced {
				// Not yet shown: the first beat tells what runs then.
				continue
			}
			// Coalesce the changes of the next changeGap into one beat.
			select {
			case <-ctx.Done():
				continue
			case <-time.After(changeGap):
			}
		case <-p.rearm:
			// A beat rides a wait, or has ridden one: the next is due
			// later, or at once where it failed.
			timer.Reset(time.Until(p.nextBeat()))
			continue
		case <-timer.C:
			if due := time.Until(p.nextBeat()); due > 0 {
				timer.Reset(due)
				continue
			}
		}
		beat()
		timer.Reset(time.Until(p.nextBeat()))
	}
}

// nextBeat is when the next beat is due.
func (p *Presence) nextBeat() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// beaten records a beat made at at, which counted lookers and live, and
// measured the skew of Redis' clock if measured says so.
func (p *Presence) beaten(at time.Time, lookers, live int64, measured bool) {
	p.mu.Lock()
	p.interval = beatInterval(live)
	p.last, p.next = at, at.Add(p.interval)
	if measured {
		p.measured = at
	}
	p.mu.Unlock()
	// Last: whoever sees the count sees the beat's schedule too.
	p.lookers.Store(lookers)
}

// BeatCmd is the beat that an idle worker's wait of d sends behind it (see
// wake.Waiter.Wait), where the next beat comes due during the wait, or
// nil: Redis runs it as the wait ends, so that the beat costs an idle Redis
// no wake of its own (a fleet of 300 idle workers beats 20 times a second,
// a third of its reads). The beat then comes up to d late, which the
// entry's three beats of life allow only where it still comes within two
// beats of the last; and its reply comes when the wait ends, too late to
// measure the skew of Redis' clock, so one beat a measureEvery goes on its
// own. Beaten takes the reply. Only a --continuous worker's beat rides,
// where the registry's keys share the list's server, once Run has made
// the first.
func (p *Presence) BeatCmd(ctx context.Context, d time.Duration) *redis.Cmd {
	if p == nil || !p.self.Continuous || !p.keys.Colocated {
		return nil
	}
	now := time.Now()
	end := now.Add(d)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last.IsZero() || p.riding || now.Sub(p.measured) >= measureEvery ||
		p.next.After(end) || end.After(p.last.Add(2*p.interval)) {
		return nil
	}
	p.riding = true
	// Run leaves it to this wait, and beats again a whole beat after it.
	p.next = end.Add(p.interval)
	signal(p.rearm)
	ttl := 3 * p.interval
	e, looks := p.entryLocked(p.clock.OnRedis(end), ttl)
	args := []any{"evalsha", beatScript.Hash(), 3, p.keys.Worker(e.Holder), p.keys.Workers(), p.keys.Looking(),
		e.Holder, ttl.Milliseconds(), map[bool]int{true: 1}[looks]}
	return redis.NewCmd(ctx, append(args, e.values()...)...)
}

// Beaten takes the reply of a beat that BeatCmd gave, which ran as the
// wait ended: its counts, as a beat of Run's own; where it failed (Redis
// lost the script, the wait failed), Run beats at once.
func (p *Presence) Beaten(cmd *redis.Cmd) {
	if p == nil || cmd == nil {
		return
	}
	reply, err := cmd.Int64Slice()
	if err == nil && len(reply) == 3 {
		p.beaten(time.Now(), reply[0], reply[1], false)
	} else {
		p.log.Debug().Err(err).Msg("a beat sent with a wait failed: the worker beats now")
		p.mu.Lock()
		p.next = time.Now()
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.riding = false
	p.mu.Unlock()
	signal(p.rearm)
}

// BeatClient is the part of the Redis client that a worker's beat needs:
// a script where the registry's keys live on one server, else a pipeline.
type BeatClient interface {
	Client
	redis.Scripter
}

//go:embed beat.lua
var beatSource string

// beatScript is a beat in one call (beat.lua), where the keys are
// colocated.
var beatScript = script.New(clock.Lua, beatSource)

// announce writes the entry and its expiry (three beats), drops the dead
// workers' members, and counts the live workers and those that look, in
// one round trip: one script call where the keys live on one server, else
// a pipeline of the same writes, whose expiries are on Redis' clock as
// this host knows it.
func (p *Presence) announce(ctx context.Context, now time.Time) error {
	p.mu.Lock()
	ttl := 3 * p.interval
	p.mu.Unlock()
	e, looks := p.entry(now, ttl)
	if p.keys.Colocated {
		return p.announceInOne(ctx, e, looks, ttl)
	}
	hash, expires := p.keys.Worker(e.Holder), float64(e.Expires.UnixMilli())
	dead := "(" + strconv.FormatInt(now.UnixMilli(), 10)
	pipe := p.client.Pipeline()
	// Each beat measures the skew of Redis' clock again, for the next
	// beat and the worker's other times (see internal/clock).
	redisNow := pipe.Time(ctx)
	sent := p.clock.Host()
	pipe.HSet(ctx, hash, e.values()...)
	pipe.PExpire(ctx, hash, ttl)
	pipe.ZAdd(ctx, p.keys.Workers(), redisZ(expires, e.Holder))
	pipe.ZRemRangeByScore(ctx, p.keys.Workers(), "-inf", dead)
	if looks {
		pipe.ZAdd(ctx, p.keys.Looking(), redisZ(expires, e.Holder))
	} else {
		pipe.ZRem(ctx, p.keys.Looking(), e.Holder)
	}
	pipe.ZRemRangeByScore(ctx, p.keys.Looking(), "-inf", dead)
	lookers := pipe.ZCount(ctx, p.keys.Looking(), after(now), "+inf")
	live := pipe.ZCount(ctx, p.keys.Workers(), after(now), "+inf")
	if _, err := pipe.Exec(ctx); err != nil {
		return redisconn.Wrap("announce the worker in "+strconv.Quote(p.keys.Workers()), err)
	}
	p.clock.Set(redisNow.Val(), sent, p.clock.Host())
	p.beaten(time.Now(), lookers.Val(), live.Val(), true)
	return nil
}

// announceInOne is announce's beat in one script call, which reads Redis'
// clock itself: an idle worker's beat costs Redis one command every few
// seconds.
func (p *Presence) announceInOne(ctx context.Context, e Entry, looks bool, ttl time.Duration) error {
	args := []any{e.Holder, ttl.Milliseconds(), map[bool]int{true: 1}[looks]}
	args = append(args, e.values()...)
	sent := p.clock.Host()
	reply, err := beatScript.Run(ctx, p.client, []string{p.keys.Worker(e.Holder), p.keys.Workers(), p.keys.Looking()}, args...).Int64Slice()
	if err == nil && len(reply) != 3 {
		err = fmt.Errorf("unexpected reply from beat.lua: %v", reply)
	}
	if err != nil {
		return redisconn.Wrap("announce the worker in "+strconv.Quote(p.keys.Workers()), err)
	}
	p.clock.Set(time.UnixMilli(reply[2]), sent, p.clock.Host())
	p.beaten(time.Now(), reply[0], reply[1], true)
	return nil
}

// remove deletes the entry, in one round trip.
func (p *Presence) remove(ctx context.Context) error {
	pipe := p.client.Pipeline()
	pipe.Del(ctx, p.keys.Worker(p.self.Holder))
	pipe.ZRem(ctx, p.keys.Workers(), p.self.Holder)
	pipe.ZRem(ctx, p.keys.Looking(), p.self.Holder)
	if _, err := pipe.Exec(ctx); err != nil {
		return redisconn.Wrap("remove the worker from "+strconv.Quote(p.keys.Workers()), err)
	}
	return nil
}
