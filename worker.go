package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/registry"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
	"github.com/w8y/w8y/internal/take"
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
}

// tell writes line to reports, if any.
func (w *worker) tell(line string) {
	if w.reports != nil && line != "" {
		fmt.Fprintf(w.reports, "w8y: %s\n", line)
	}
}

// observer counts what the worker does, for --metrics-addr (see
// metrics_on.go).
type observer interface {
	ChildStarted()
	ChildEnded()
	RunEnded(result schema.Result, ran bool, took time.Duration)
	FailureStreak(failures int64)
	IdlePass()
}

// noMetrics is the observer without --metrics-addr: it counts nothing.
type noMetrics struct{}

func (noMetrics) ChildStarted()                               {}
func (noMetrics) ChildEnded()                                 {}
func (noMetrics) RunEnded(schema.Result, bool, time.Duration) {}
func (noMetrics) FailureStreak(int64)                         {}
func (noMetrics) IdlePass()                                   {}

// childExitError is a run whose child's exit code w8y exits with: the
// first child of a one-shot run that did not exit 0, or a failed run that
// ends --continuous.
type childExitError struct{ end finish.End }

func (e *childExitError) Error() string {
	return fmt.Sprintf("item %q: the child ended with %s", clip.Item(e.end.Item), e.end.Exit)
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
	var unconfirmed *take.UnconfirmedError
	switch {
	case errors.Is(err, jobctl.ErrStopped):
		return nil, w.stops.StopErr()
	case errors.As(err, &unconfirmed):
		w.giveBack(ctx, w.rotator.lock(unconfirmed.Taken))
		return nil, err
	case err != nil:
		return nil, err
	}
	return w.rotator.lock(taken), nil
}

// loop is --continuous: it keeps up to --parallel children running, each
// slot taking the next item as it frees. It pauses after a pass that found
// nothing, retries Redis errors with backoff, and stops taking items after a
// stop signal, --max-items or --max-runtime, or a failed run with
// --stop-on-failure. It returns once the running children have finished.
func (w *worker) loop(ctx context.Context) error {
	l := &continuous{w: w, done: make(chan slotEnd, w.opts.Parallel)}
	stopped := w.stops.Stopped()
	var deadline <-chan time.Time
	if d := time.Duration(w.opts.MaxRuntime); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		deadline = timer.C
	}
	for {
		// Each turn is progress as far as /healthz goes. Where the loop
		// then waits, either a pause was announced or children run, and
		// each running child beats while it runs (see childRunner), so a
		// worker that drains after a stop, --max-items or --max-runtime
		// stays healthy until its last child ends.
		w.health.Beat(0)
		l.fill(ctx)
		if l.closing && l.running == 0 {
			return l.result()
		}
		select {
		case s := <-l.done:
			l.running--
			l.ended(s.end)
			if s.next != nil {
				// Taken by the run's finish, in the same call: run as an
				// item that fill took.
				l.reachable()
				l.retries = 0
				l.start(ctx, s.next)
			}
		case <-l.paused:
			l.paused = nil
		case <-stopped:
			stopped = nil
			l.close("")
		case <-deadline:
			deadline = nil
			l.close("--max-runtime reached: no new items will be taken")
		}
	}
}

// continuous is the state of a --continuous worker's loop.
type continuous struct {
	w *worker
	// done receives the end of each run that a slot started, and the item
	// that its finish took, if it took one.
	done    chan slotEnd
	running int
	taken   int
	// retries counts Redis errors in a row, which the retry pause doubles
	// with.
	retries int
	// quiet is until when a retry goes unlogged: a worker that cannot
	// reach Redis tries it every probeEvery, but says so only as often as
	// the back-off would retry.
	quiet time.Time
	// unreachable is when Redis last became unreachable, or zero while it
	// answers: its return is worth a line, as its loss was.
	unreachable time.Time
	// paused is set while no item is taken: after an idle pass, or a Redis
	// error or lost lock.
	paused <-chan time.Time
	// closing is set once no more items are taken; the loop then waits for
	// the running children. closed is the same, for the slots to read.
	closing bool
	closed  atomic.Bool
	// exit, once set, is how the loop ends when it is not a drain or a
	// limit reached.
	exit error
	// failed is the run whose failure ends the loop, if one does.
	failed *finish.End
	// listChecked is when an idle pass last checked that the list exists
	// (see warnIfListMissing).
	listChecked time.Time
}

// fill takes items while slots are free and nothing pauses or closes the
// loop: up to --max-items, each taken item run in a slot of its own, a
// pass that found nothing handled by idle, a Redis error retried.
func (l *continuous) fill(ctx context.Context) {
	w := l.w
	for !l.closing && l.paused == nil && l.running < w.opts.Parallel {
		if w.opts.MaxItems > 0 && l.taken >= w.opts.MaxItems {
			l.close("--max-items reached: no new items will be taken")
			return
		}
		// Every take looks first (see Rotator.LookFirst), but --until-idle's,
		// which must know that nothing is left: it passes over the whole
		// list, as status.Reader.NothingLeft reads it.
		pass := w.rotator.LookFirst()
		if w.opts.UntilIdle {
			pass = w.rotator.Pass()
		}
		_, lock, err := w.take(ctx, pass, l.running == 0)
		if err == nil || errors.Is(err, take.ErrNoWork) {
			l.reachable()
		}
		switch {
		case err == nil:
			l.retries = 0
			l.start(ctx, lock)
		case errors.Is(err, take.ErrNoWork):
			l.retries = 0
			l.foundNothing(ctx)
		case errors.Is(err, jobctl.ErrStopped):
			l.close("")
		default:
			l.retryOrEnd(err)
		}
	}
}

// slotEnd is how a slot's run ended, and the Lock of the next item, which
// its finish took, or nil.
type slotEnd struct {
	end  finish.End
	next *Lock
}

// start runs the item of lock, which is ours, in a slot of its own. A
// worker of one slot that may take more items takes the next one as the
// run finishes, in the same call (see worker.finish), after a run that
// ended well, unless a stop or the loop's close came first: a busy
// worker's item costs Redis one round trip instead of two.
func (l *continuous) start(ctx context.Context, lock *Lock) {
	w := l.w
	l.running++
	l.taken++
	var then func(finish.End) bool
	if w.opts.Parallel == 1 && !w.opts.UntilIdle && (w.opts.MaxItems == 0 || l.taken < w.opts.MaxItems) {
		then = func(end finish.End) bool {
			return end.Result == schema.ResultSuccess && end.Err == nil && !w.stops.Stopping() && !l.closed.Load()
		}
	}
	go func() {
		end, next := w.runItem(ctx, lock.Item, lock, then)
		l.done <- slotEnd{end: end, next: next}
	}()
}

// foundNothing handles a pass that found nothing to take: it warns now and
// then if the list is missing, ends a --until-idle worker that has nothing
// left to run, and otherwise pauses, no longer than the next look at what
// came due.
func (l *continuous) foundNothing(ctx context.Context) {
	w := l.w
	w.metrics.IdlePass()
	if !w.opts.UntilIdle && (l.listChecked.IsZero() || time.Since(l.listChecked) >= listCheckEvery) {
		w.warnIfListMissing(ctx)
		l.listChecked = time.Now()
	}
	if w.opts.UntilIdle && l.running == 0 {
		done, err := w.items.NothingLeft(ctx, w.rotator.MaxItemLen)
		if err != nil {
			l.retryOrEnd(err)
			return
		}
		if done {
			l.untilIdleDone(ctx)
			return
		}
	}
	wait := time.Duration(w.opts.IdleWait)
	if w.rotator.Looks() && !w.opts.UntilIdle {
		wait = w.lookPause(wait)
	}
	l.pause(duration.Jitter(wait))
}

// untilIdleDone ends a --until-idle worker that found nothing left to run:
// well if it took an item, and otherwise as a one-shot run that took none
// ends (see worker.noWork), so that a Job whose worker found no work, or
// no list, does not pass for one that did it.
func (l *continuous) untilIdleDone(ctx context.Context) {
	l.close("--until-idle: nothing is left to run (every item cools down or cannot run): no new items will be taken")
	if l.taken == 0 {
		l.end(l.w.noWork(ctx))
	}
}

// retryOrEnd retries after err, a Redis error, if a retry may mend it, and
// otherwise ends the loop with it.
func (l *continuous) retryOrEnd(err error) {
	if errors.Is(err, redisconn.ErrUnavailable) {
		l.retry(err)
		return
	}
	l.end(err)
}

// ended decides what the end of a run means for the loop: go on, pause and
// retry, or end with the run's failure.
func (l *continuous) ended(end finish.End) {
	w := l.w
	switch {
	case w.stops.Stopping():
		// Draining: however the child ended, w8y exits 0.
		l.close("")
	case end.Result == schema.ResultSuccess, errors.Is(end.Err, jobctl.ErrStopped):
	case end.Result == schema.ResultCancelled:
		// An operator stopped the run, not the item: the worker goes on,
		// even when the request counts the run as the item's failure.
		w.log.Info().Str("item", clip.Item(end.Item)).Msg("going on: the run was cancelled")
	case errors.Is(end.Err, lease.ErrLost):
		l.retry(end.Err)
	case errors.Is(end.Err, ErrTimeout) && slices.Contains(w.opts.ExitCodes, exitTimeout):
		w.log.Warn().Err(end.Err).Msg("going on: --exit-codes lists 124")
	case end.Err != nil && !errors.Is(end.Err, ErrTimeout):
		// The child could not be started: no item can be run.
		l.end(end.Err)
	case !w.opts.stopsOnFailure():
		w.log.Warn().Str("item", clip.Item(end.Item)).Str("result", string(end.Result)).Msg("going on: the item backs off (--failure-backoff)")
	case end.Err != nil:
		l.stopFor(end, end.Err)
	default:
		l.stopFor(end, &childExitError{end: end})
	}
}

// stopFor ends the loop with err because end, a failed run, stops the
// worker (--stop-on-failure, or no --failure-backoff).
func (l *continuous) stopFor(end finish.End, err error) {
	if l.exit == nil {
		l.failed = &end
	}
	l.end(err)
}

// pause takes no items for d.
func (l *continuous) pause(d time.Duration) {
	l.paused = time.After(d)
	// /healthz expects the next beat after the pause, however long.
	l.w.health.Beat(d)
}

// retry pauses after err, longer with each error in a row, and says for
// how long; while Redis is unreachable, it pauses no longer than
// probeEvery, and says so as often as the back-off would have retried.
// After a stop signal nothing is retried: the loop closes instead.
func (l *continuous) retry(err error) {
	if l.w.stops.Stopping() {
		l.close("")
		return
	}
	backoff := duration.Jitter(min(retryBase<<l.retries, retryCap))
	if retryBase<<l.retries < retryCap {
		l.retries++
	}
	wait := backoff
	if errors.Is(err, redisconn.ErrUnavailable) {
		if l.unreachable.IsZero() {
			l.unreachable = time.Now()
		}
		wait = min(backoff, duration.Jitter(probeEvery))
	}
	if now := time.Now(); !now.Before(l.quiet) {
		if l.w.needs != nil {
			err = l.w.needs.full(context.Background(), err)
		}
		l.w.log.Error().Err(err).Float64("retry_in_s", wait.Seconds()).Msgf("retrying in %s", wait.Round(time.Millisecond))
		l.quiet = now.Add(backoff)
	}
	l.pause(wait)
}

// reachable notes that Redis answered, and says so, with how long it was
// unreachable since the first failure, if it had not.
func (l *continuous) reachable() {
	l.quiet = time.Time{}
	if l.unreachable.IsZero() {
		return
	}
	down := time.Since(l.unreachable)
	l.w.log.Info().Float64("down_s", down.Seconds()).Msgf("Redis is reachable again, after %s", down.Round(time.Millisecond))
	l.unreachable = time.Time{}
	// A restart or a failover may bring a server that evicts, or a
	// replica: the worker stops taking items, as it would not have
	// started.
	if l.w.needs != nil {
		if err := l.w.needs.check(context.Background()); err != nil {
			l.w.log.Error().Msg(err.Error())
			l.end(err)
		}
	}
}

// close stops taking items, saying why (and how many it took) unless why
// is "" or it was closed already.
func (l *continuous) close(why string) {
	if !l.closing && why != "" {
		l.w.log.Info().Int("items", l.taken).Msg(why)
	}
	l.closing = true
	l.closed.Store(true)
}

// end closes the loop so that it ends with err, unless it is ending with
// another error already.
func (l *continuous) end(err error) {
	if l.exit == nil {
		l.exit = err
	}
	l.close("")
}

// result is how the loop ends once its last child has finished.
func (l *continuous) result() error {
	if l.failed != nil {
		// The last line of a worker that a failed item stopped says which,
		// how, and what would have kept it going: with systemd's restart
		// limits, one item that always fails can stop a whole list.
		why := l.w.stopsBecause(*l.failed)
		l.w.log.Error().Str("item", clip.Item(l.failed.Item)).Str("result", string(l.failed.Result)).
			Int("exit_code", l.failed.Exit.Code).Msg(why)
		l.w.tell(why)
	}
	if l.exit != nil {
		return l.exit
	}
	if l.w.stops.Stopping() {
		l.w.log.Info().Msg("drained; exiting")
	} else {
		l.w.log.Info().Int("items", l.taken).Msg("done; exiting")
	}
	return nil
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

// stopsBecause says why a --continuous worker stops after end, a failed
// run, and which option would have kept it going.
func (w *worker) stopsBecause(end finish.End) string {
	code := end.Exit.Code
	switch end.Result {
	case schema.ResultTimeout:
		code = exitTimeout
	case schema.ResultLockLost:
		code = exitLockLost
	}
	what := fmt.Sprintf("stopping: item %q failed (exit code %d)", clip.Item(end.Item), code)
	if w.opts.StopOnFailure {
		return what + ", and --stop-on-failure stops the worker on a failed run; without it, --failure-backoff backs the item off and goes on"
	}
	keep := "--failure-backoff MIN[,MAX] (W8Y_FAILURE_BACKOFF) would back the item off and go on"
	if end.Result == schema.ResultTimeout {
		keep += ", and listing 124 in --exit-codes would count a timeout as a success"
	}
	return what + ", and without --failure-backoff a --continuous worker stops on a failed run; " + keep
}

// take takes the next item of pass, cut short by a stop signal (see
// take.CutShort): when idle says that no run of this worker needs Redis
// any more (none was started, or all have finished), a take that Redis
// does not answer is hung up on after takeGrace. A lock that too few
// replicas confirmed (--replica-acks) is given back before its error is
// returned. After a stop, take returns jobctl.ErrStopped for anything but an item
// taken.
func (w *worker) take(ctx context.Context, pass *Pass, idle bool) (item string, lock *Lock, err error) {
	var hangUp func()
	if idle {
		hangUp = w.hangUp
	}
	var hungUp bool
	for {
		hungUp = take.CutShort(ctx, w.stops.Stopped(), takeGrace, hangUp, func(ctx context.Context) {
			item, lock, err = pass.Take(ctx, w.stops.Stopped())
		})
		if hungUp || !w.slotMoving(err) {
			break
		}
	}
	var unconfirmed *unconfirmedError
	if errors.As(err, &unconfirmed) && !hungUp {
		w.giveBack(ctx, unconfirmed.lock)
	}
	// A take that succeeded after all cannot finish once the client is hung
	// up on: its lock expires by itself after --key-expiry.
	if (err != nil || hungUp) && w.stops.Stopping() {
		return "", nil, jobctl.ErrStopped
	}
	return item, lock, err
}

// takeGrace is how long a take may go on after a stop signal before take
// hangs up on Redis: ample for a Redis that answers at all, where a take
// costs milliseconds, so that its lock is released as usual, and short
// enough for a person who pressed Ctrl-C.
const takeGrace = time.Second

// giveBack ends a take that too few replicas confirmed: running a child on a
// lock that a failover could lose might run the item twice.
//
// The take's start is already recorded, so giveBack records an end for it:
// interrupted, with no child, as when a stop signal comes between a take
// and its child. That keeps every start event followed by an end, counts
// neither as a success nor as a failure of the item, and deletes the lock
// only while it still holds our token, as every release does.
func (w *worker) giveBack(ctx context.Context, lock *Lock) {
	end := finish.End{Item: lock.Item, Result: schema.ResultInterrupted, At: time.Now()}
	if _, err := w.finisher.Finish(ctx, lock.Key, lock.Token, end); err != nil {
		w.log.Warn().Err(err).Str("lock_key", clip.Item(lock.Key)).Msg("could not give back an unconfirmed lock; it will expire by itself")
	}
}

// runItem runs the child on item, whose lock is ours, and finishes the run:
// it releases the lock and records the item's cooldown or backoff, state and
// end event. then, if not nil, says whether the worker takes another item
// after the run's end: the finish then takes it too, where one call can
// (see worker.finish), and runItem returns its Lock.
func (w *worker) runItem(ctx context.Context, item string, lock *Lock, then func(finish.End) bool) (finish.End, *Lock) {
	w.presence.Started(item)
	defer w.presence.Ended(item)
	end := w.children.run(ctx, item, lock)
	next := w.finish(ctx, lock, end, then != nil && then(end))
	w.tell(reportedFailure(end))
	return end, next
}

// finish releases lock if it is still ours and records what the run's end
// changes for its item, all in one round trip where it can (see finisher):
// its cooldown or backoff, consecutive failures, state and end event. With
// takeNext, the same call looks for the next item as the worker's take
// would first (see take.Taker.FinishThenLook), and finish returns the Lock
// of the item it took, or nil.
func (w *worker) finish(ctx context.Context, lock *Lock, end finish.End, takeNext bool) (next *Lock) {
	w.metrics.RunEnded(end.Result, end.Exited, end.Exit.Duration)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	log := w.log.With().Str("item", clip.Item(lock.Item)).Str("lock_key", clip.Item(lock.Key)).Logger()
	end.Started = lock.Taken
	var done finish.Reply
	var err error
	if takeNext {
		var taken take.Taken
		var ok bool
		done, taken, ok, err = w.rotator.FinishThenLook(ctx, w.finisher, lock.Key, lock.Token, end)
		if ok {
			next = w.rotator.lock(taken)
		}
	} else {
		done, err = w.finisher.Finish(ctx, lock.Key, lock.Token, end)
	}
	// A restart or failover shorter than releaseTimeout must not leave the
	// run unrecorded and its lock to expire: a finish that was not applied
	// (no connection, or a primary demoted by a failover, see finish.Resend)
	// is sent again, at the lease's retry pace, until it is.
	for err != nil && finish.Resend(err) && sleepCtx(ctx, lease.RetryEvery(lock.TTL)) {
		done, err = w.finisher.Finish(ctx, lock.Key, lock.Token, end)
	}
	if err != nil {
		log.Error().Err(err).Str("result", string(end.Result)).Msg("could not finish the run; the lock will expire by itself")
		return nil
	}
	w.metrics.FailureStreak(done.Failures)
	if !done.Released {
		log.Warn().Msg("the lock was no longer ours at release; left alone")
	}
	if done.Problem != "" {
		log.Warn().Str("state_key", clip.Item(w.finisher.Record.Keys.State(lock.Item))).Msg("could not count the item's failures: " + done.Problem)
	}
	if done.Delay > 0 {
		log.Info().Str("result", string(end.Result)).Int64("consecutive_failures", done.Failures).
			Float64("backoff_s", float64(done.Delay.Milliseconds())/1000).Msg("item backs off")
	}
	return next
}

// lookPause is an idle worker's pause before its next look, with
// --idle-wait idleWait: the fleet's looks are spaced by how many workers
// look (see registry.LookInterval).
func (w *worker) lookPause(idleWait time.Duration) time.Duration {
	return registry.LookInterval(min(idleWait, take.LookEvery), w.presence.Lookers())
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
