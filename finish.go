package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed pause.lua
	pauseSource string
	//go:embed count.lua
	countSource string
)

// finishClient is the part of the Redis client that finishing a run needs.
type finishClient interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

// finisher writes what the end of a run changes: it releases the run's lock
// and records the item's cooldown, failure backoff and consecutive failures
// (see Schedule and release.lua).
type finisher struct {
	client   finishClient
	keys     Keys
	schedule Schedule
	// oneScript does it all in one round trip with release.lua, which is
	// only correct where an item's keys all live on one server (see
	// canScanOnServer). Elsewhere each key gets its own commands.
	oneScript bool
	// jitter returns backoff jitter factors; jitterFactor unless a test sets it.
	jitter func() string
}

// finished is what finishing a run did.
type finished struct {
	// Released is set when our lock was deleted; unset when it was gone or
	// someone else's by then.
	Released bool
	// Failures is the item's consecutive failures after the run, or -1 when
	// the run did not change them.
	Failures int64
	// Delay is the failure delay set, or 0.
	Delay time.Duration
	// Problem says why the state hash could not be written, or is "".
	Problem string
}

// finish ends the run of item that held lock and ended with res. The lock
// is deleted only if it still holds our token; the rest is written either
// way, since a lost lock is a failed run.
func (f *finisher) finish(ctx context.Context, item string, lock *Lock, res result) (finished, error) {
	factor := "1"
	if f.jitter != nil {
		factor = f.jitter()
	}
	s := f.schedule
	if !f.oneScript {
		return f.finishEach(ctx, item, lock, res, factor)
	}
	keys := []string{lock.Key, f.keys.Cooldown(item), f.keys.Backoff(item), f.keys.State(item)}
	reply, err := releaseScript.Run(ctx, f.client, keys, lock.Token, string(res),
		s.Cooldown.Milliseconds(), s.Backoff.Min.Milliseconds(), s.Backoff.Max.Milliseconds(), factor,
		s.StateTTL.Milliseconds()).Slice()
	if err != nil {
		return finished{}, redisError("finish the run of "+quoteKey(lock.Key), err)
	}
	if len(reply) != 4 {
		return finished{}, redisError("finish the run of "+quoteKey(lock.Key), fmt.Errorf("unexpected reply from release.lua: %d values", len(reply)))
	}
	released, _ := reply[0].(int64)
	failures, _ := reply[1].(int64)
	delay, _ := reply[2].(int64)
	problem, _ := reply[3].(string)
	out := finished{Released: released == 1, Failures: failures, Problem: problem}
	if delay > 0 {
		out.Delay = time.Duration(delay) * time.Millisecond
	}
	return out, nil
}

// finishEach is finish with scripts on one key each (count.lua, pause.lua,
// release.lua), for where an item's keys may live on different servers. It
// costs two round trips after a success (the count and cooldown in one
// pipeline, then the release) and three after a failure (the count, then
// the backoff that depends on it, then the release). Scripts in a pipeline
// go as EVAL, with their text: a pipeline cannot fall back from EVALSHA. The lock is released last: a worker that takes it
// afterwards then finds the cooldown or backoff already set (see takeEach).
func (f *finisher) finishEach(ctx context.Context, item string, lock *Lock, res result, factor string) (finished, error) {
	s := f.schedule
	out := finished{Failures: -1}
	state := f.keys.State(item)
	switch {
	case res == resultSuccess:
		pipe := f.client.Pipeline()
		count := pipe.Eval(ctx, countSource, []string{state}, "success", s.StateTTL.Milliseconds())
		if s.Cooldown > 0 {
			pipe.Eval(ctx, pauseSource, []string{f.keys.Cooldown(item)}, lock.Token, s.Cooldown.Milliseconds())
		}
		cmds, _ := pipe.Exec(ctx)
		for _, cmd := range cmds[1:] {
			if err := cmd.Err(); err != nil {
				return out, redisError("set the cooldown of "+quoteKey(clip(item)), err)
			}
		}
		problem, err := countProblem(count.Err())
		if err != nil {
			return out, redisError("count the runs of "+quoteKey(clip(item)), err)
		}
		out.Problem = problem
	case res.failed():
		n, err := f.client.Eval(ctx, countSource, []string{state}, "failure", s.StateTTL.Milliseconds()).Int64()
		problem, err := countProblem(err)
		if err != nil {
			return out, redisError("count the failures of "+quoteKey(clip(item)), err)
		}
		if out.Problem = problem; problem == "" {
			out.Failures = n
		} else {
			n = 1
		}
		if s.Backoff != (Backoff{}) {
			out.Delay = backoffDelay(n, s.Backoff, factor)
			if err := f.client.Eval(ctx, pauseSource, []string{f.keys.Backoff(item)}, lock.Token, out.Delay.Milliseconds()).Err(); err != nil {
				return out, redisError("set the backoff of "+quoteKey(clip(item)), err)
			}
		}
	}
	released, err := lock.Release(ctx)
	if err != nil {
		return out, err
	}
	out.Released = released
	return out, nil
}

// countProblem sorts an error from count.lua: the state hash of another type
// or holding a count that is not a number is a problem to report, as
// release.lua reports it, and anything else is Redis failing.
func countProblem(err error) (string, error) {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return "", err
	}
	if msg := err.Error(); strings.HasPrefix(msg, "WRONGTYPE") || strings.Contains(msg, "not an integer") {
		return msg, nil
	}
	return "", err
}
