package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/registry"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
	"github.com/w8y/w8y/internal/take"
	"github.com/w8y/w8y/internal/wake"
)

const (
	// releaseTimeout bounds finishing a run after the child has exited. It
	// does not depend on the run's context, so a stop still releases.
	releaseTimeout = 5 * time.Second
	// retryBase and retryCap bound the pause between retries after a Redis
	// error in --continuous mode: quick enough to ride out a restart, slow
	// enough not to hammer a Redis that is down.
	retryBase = 250 * time.Millisecond
	retryCap  = 30 * time.Second
	// probeEvery is how often a --continuous worker tries Redis again while
	// it cannot reach it, whatever the back-off: the take is the probe, and
	// against a Redis that is down it costs a refused dial (go-redis' pool
	// dials anew each time, see redisconn's failOnUse), or waits out its
	// own timeout against one that does not answer. So a worker starts work
	// again within about a quarter of a second of Redis' return, however
	// long the outage was.
	probeEvery = 250 * time.Millisecond
)

// worker takes items, runs the child for each and finishes their runs: one
// pass in one-shot mode (once), or until stopped with --continuous (loop).
type worker struct {
	opts     *Options
	rotator  *Rotator
	finisher *finish.Finisher
	// children runs an item's child under its lock: a childRunner, or a
	// test's stand-in.
	children interface {
		run(ctx context.Context, item string, lock *Lock) finish.End
	}
	stops *jobctl.Router
	// hangUp closes the Redis client: see take.
	hangUp  func()
	metrics observer
	// health is nil unless --metrics-addr is given.
	health *health.Heartbeat
	log    zerolog.Logger
	// items reads the list's items as --status does, for --until-idle
	// (see status.Reader.NothingLeft); nil without it.
	items *status.Reader
	// reports is where a failed run, and a continuous worker's stop because
	// of one, get a line of their own when the log does not reach stderr
	// (see logging.FailureReports); nil when it does.
	reports io.Writer
	// needs checks the server again when it is reachable after an outage,
	// and says how full it is when it refuses a write (see needs.go); nil
	// in tests without one.
	needs *needs
	// movingSince is when a take first found the list's Cluster slot
	// moving, until one finds it moved (see slotMoving); zero otherwise.
	movingSince time.Time
	// movingLast is when a take last found it moving.
	movingLast time.Time
	// presence is the worker's entry in the registry of live workers (see
	// announce); nil in tests without one.
	presence *registry.Presence
	// waker is how an idle --continuous worker waits for a wake instead of
	// polling (see internal/wake); nil where its takes do not look, and in
	// tests without one, where it pauses instead.
	waker *wake.Waiter
	// lookedLast is set while the last wait came after a look, not a probe
	// (see idleWait).
	lookedLast bool
}

// tell writes line to reports, if any.
func (w *worker) tell(line string) {
	if w.reports != nil && line != "" {
		fmt.Fprintf(w.reports, "w8y: %s\n", line)
	}
}

// run runs up to --parallel items from one pass, or keeps running items
// with --continuous. Its error says how w8y ends (see exitCode).
func (w *worker) run(ctx context.Context) error {
	if w.opts.Item != "" {
		return w.one(ctx)
	}
	if w.opts.Continuous {
		return w.loop(ctx)
	}
	return w.once(ctx)
}

// once is one-shot mode: it takes up to --parallel items, each by a look at
// what came due or was appended (or in the sweep that a look elects it
// for), runs them together and waits for them all. It ends well if every
// child exited 0, and otherwise as the first run to end with something else
// (first in time, not in the list), so that one --parallel 1 run exits with
// its child's code.
func (w *worker) once(ctx context.Context) error {
	pass := w.rotator.LookFirst()
	done := make(chan finish.End, w.opts.Parallel)
	running := 0
	var takeErr error
	for running < w.opts.Parallel {
		item, lock, err := w.take(ctx, pass, running == 0)
		if err != nil {
			takeErr = err
			break
		}
		running++
		go func() {
			end, _ := w.runItem(ctx, item, lock, nil)
			done <- end
		}()
	}
	var first *finish.End
	for range running {
		end := <-done
		if first == nil && (end.Err != nil || end.Exit.Code != 0) {
			first = &end
		}
	}
	switch {
	case running == 0 && errors.Is(takeErr, take.ErrNoWork):
		w.metrics.IdlePass()
		w.log.Info().Msg("no item could be taken")
		return w.noWork(ctx)
	case running == 0 && errors.Is(takeErr, jobctl.ErrStopped):
		return w.stops.StopErr()
	case takeErr != nil && !errors.Is(takeErr, take.ErrNoWork) && !errors.Is(takeErr, jobctl.ErrStopped):
		// w8y's own failure outranks the children's codes.
		return takeErr
	case first == nil:
		return nil
	case errors.Is(first.Err, jobctl.ErrStopped):
		return w.stops.StopErr()
	case first.Err != nil:
		return first.Err
	}
	return &childExitError{end: *first}
}

// one is w8y --item: it takes the named item's lock, waiting up to --wait,
// runs the child under it and finishes the run as a run of the list is
// finished. It ends as a one-shot run of one child does.
func (w *worker) one(ctx context.Context) error {
	item := string(w.opts.Item)
	lock, err := w.takeNamed(ctx, item)
	if err != nil {
		return err
	}
	end, _ := w.runItem(ctx, item, lock, nil)
	switch {
	case errors.Is(end.Err, jobctl.ErrStopped):
		return w.stops.StopErr()
	case end.Err != nil:
		return end.Err
	case end.Exit.Code != 0:
		return &childExitError{end: end}
	}
	return nil
}

// takeNamed takes item's lock, waiting up to --wait while it is held (see
// take.Taker.WaitNamed). A lock that too few replicas confirmed
// (--replica-acks) is given back.
func (w *worker) takeNamed(ctx context.Context, item string) (*Lock, error) {
	held := func(why error) {
		w.log.Info().Str("item", clip.Item(item)).Str("wait", duration.Format(time.Duration(w.opts.Wait))).Msgf("%v: waiting for it (--wait)", why)
	}
	taken, err := w.rotator.WaitNamed(ctx, item, w.opts.IgnorePause, time.Duration(w.opts.Wait), w.stops.Stopped(), held)
	if errors.Is(err, jobctl.ErrStopped) {
		return nil, w.stops.StopErr()
	}
	return w.held(ctx, taken, err, true)
}

// held is the Lock of what a take took, or its error. A lock that too few
// replicas confirmed (--replica-acks, take.UnconfirmedError) is given back
// before any child runs, where the client can still reach Redis (reach).
func (w *worker) held(ctx context.Context, taken take.Taken, err error, reach bool) (*Lock, error) {
	var unconfirmed *take.UnconfirmedError
	switch {
	case errors.As(err, &unconfirmed):
		if reach {
			w.giveBack(ctx, w.rotator.lock(unconfirmed.Taken))
		}
		return nil, err
	case err != nil:
		return nil, err
	}
	return w.rotator.lock(taken), nil
}

// listCheckEvery is how often an idle --continuous worker checks again
// that its list exists: a missing list is said at the first idle pass, and
// again now and then while it stays missing, so that a worker with a
// mistyped --key-prefix is not silent forever, nor noisy.
const listCheckEvery = 10 * time.Minute

// noWork is how a run that took no item ends: take.ErrNoWork (exit
// --no-work-exit-code), or, when the list does not exist, its
// schema.NoListError, a failure of its own that w8y explains even under -q:
// a mistyped --key-prefix must not pass for a list whose items are all
// taken. A failed read of the list says nothing: the next take meets the
// same failure and reports it.
func (w *worker) noWork(ctx context.Context) error {
	n, err := w.rotator.Client.LLen(ctx, w.rotator.Keys.List()).Result()
	if err == nil && n == 0 {
		return w.rotator.Keys.NoList()
	}
	return take.ErrNoWork
}

// warnIfListMissing warns when the list does not exist, after a pass that
// found nothing to take: a mistyped --key-prefix otherwise looks just like
// a list whose items are all taken. Redis keeps no empty list, so an empty
// one reads as missing too. A failed read says nothing: the next pass meets
// the same failure and reports it.
func (w *worker) warnIfListMissing(ctx context.Context) {
	list := w.rotator.Keys.List()
	n, err := w.rotator.Client.LLen(ctx, list).Result()
	if err != nil || n > 0 {
		return
	}
	w.log.Warn().Str("list", clip.Item(list)).Msgf("the list %s does not exist or is empty: is --key-prefix (W8Y_KEY_PREFIX) right? Other programs add items with RPUSH %s ...", quoteKey(list), clip.Item(list))
}

// take takes the next item of pass, cut short by a stop signal (see
// take.CutShort): when idle says that no run of this worker needs Redis
// any more (none was started, or all have finished), a take that Redis
// does not answer is hung up on after takeGrace. A lock that too few
// replicas confirmed (--replica-acks) is given back before its error is
// returned. After a stop, take returns jobctl.ErrStopped for anything but an item
// taken.
func (w *worker) take(ctx context.Context, pass *take.Pass, idle bool) (string, *Lock, error) {
	var hangUp func()
	if idle {
		hangUp = w.hangUp
	}
	var (
		taken  take.Taken
		err    error
		hungUp bool
	)
	for {
		hungUp = take.CutShort(ctx, w.stops.Stopped(), takeGrace, hangUp, func(ctx context.Context) {
			taken, err = pass.Take(ctx, w.stops.Stopped())
		})
		if hungUp || !(w.slotMoving(err) || w.startRefused(ctx, &err)) {
			break
		}
	}
	lock, err := w.held(ctx, taken, err, !hungUp)
	// A take that succeeded after all cannot finish once the client is hung
	// up on: its lock expires by itself after --key-expiry.
	if (err != nil || hungUp) && w.stops.Stopping() {
		return "", nil, jobctl.ErrStopped
	}
	return taken.Item, lock, err
}

// startRefused reports whether *err, a take's, is the refusal of the
// checks that a one-shot run's first take makes (see startFolded), and
// whether to take again: a list kept in a later layout becomes its
// schema.SchemaError; a server that may not keep w8y's keys is read again
// by needs.check, whose refusal says how, and which lets the take go on
// without the check where INFO is refused (having said so once).
func (w *worker) startRefused(ctx context.Context, err *error) (again bool) {
	var refused *take.StartRefusal
	if !errors.As(*err, &refused) {
		return false
	}
	w.rotator.Start = take.StartWords(false, schema.Version)
	if !refused.Needs {
		*err = &schema.SchemaError{Keys: w.rotator.Keys, Found: refused.Found}
		return false
	}
	if w.needs != nil {
		if nerr := w.needs.check(ctx); nerr != nil {
			*err = nerr
			return false
		}
	}
	return true
}

// takeGrace is how long a take may go on after a stop signal before take
// hangs up on Redis: ample for a Redis that answers at all, where a take
// costs milliseconds, so that its lock is released as usual, and short
// enough for a person who pressed Ctrl-C.
const takeGrace = time.Second

// idleWait is how long an idle worker waits for a wake, with --idle-wait
// idleWait: until the moment its last probe said that an item comes due
// (its cooldown or pause ends, the fleet's sweep is due), and no longer
// than the fallback's look, which finds what no wake tells of (an outside
// RPUSH, a lock that expired). The fallback comes every --idle-wait,
// spaced by how many workers look (see registry.LookInterval), so that the
// fleet's fallbacks together come about every 50ms whatever its size. The
// first wait after a look, which says nothing of what comes due, is none:
// the probe that follows at once says; but where looks follow each other
// without a probe between (a probe that says yes, then a look that finds
// nothing), each waits take.LookEvery, so that the worker cannot spin.
//
// Workers that wait for the same moment would all wake at it for one item:
// each wakes at a moment of its own, spread over the fleet's spacing
// times the number of workers that look, so that the first wakes within
// about one spacing of it and the rest, whose probe finds the item taken,
// one after another, at the rate of the fallbacks.
func (w *worker) idleWait(idleWait time.Duration) time.Duration {
	lookers := w.presence.Lookers()
	fallback := duration.Jitter(registry.LookInterval(idleWait, lookers))
	in, probed := w.rotator.NextDue()
	lookedLast := w.lookedLast
	w.lookedLast = !probed
	switch {
	case !probed && lookedLast:
		return min(fallback, duration.Jitter(take.LookEvery))
	case !probed:
		return 0
	case in < 0:
		return fallback
	}
	spread := time.Duration(rand.Float64() * float64(lookers-1) * float64(min(registry.FleetLookSpacing, idleWait)))
	return min(fallback, in+spread)
}

// sleepCtx waits d, and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// slotRetry is how long a take waits, spread by ±25%, before it tries
// again while the list's Cluster slot moves between nodes: short, so
// that takes resume within a few tens of milliseconds of the move's end.
const slotRetry = 50 * time.Millisecond

// slotMoving reports whether err, a take's, says that the list's Cluster
// slot is moving between nodes (see internal/take's settled.lua), and
// then waits slotRetry for the take to be tried again; it says once, at
// info level, that the slot is moving, and once that it has moved. A stop
// signal ends the wait: the take is not tried again.
func (w *worker) slotMoving(err error) bool {
	if err == nil || !redisconn.SlotMoving(err) {
		// A take that took an item went through the settled slot; one that
		// found nothing may not have asked (an idle worker's probe reads
		// single keys, which a moving slot serves), so it says the slot
		// has moved only once no take has met it moving for a second.
		if !w.movingSince.IsZero() && (err == nil || time.Since(w.movingLast) >= time.Second) {
			took := w.movingLast.Sub(w.movingSince)
			w.log.Info().Float64("moving_s", took.Seconds()).Msgf("the list's Cluster slot has moved, after %s: takes go on", took.Round(time.Millisecond))
			w.movingSince = time.Time{}
		}
		return false
	}
	w.movingLast = time.Now()
	if w.movingSince.IsZero() {
		w.movingSince = w.movingLast
		w.log.Info().Msg("the list's Cluster slot is moving between nodes (a reshard): runs go on, new takes wait until it has moved")
	}
	select {
	case <-time.After(duration.Jitter(slotRetry)):
		return true
	case <-w.stops.Stopped():
		return false
	}
}
