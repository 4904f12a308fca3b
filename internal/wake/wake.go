// Package wake is how an idle worker waits for work without polling: it
// blocks (BLPOP) on the fleet's wake list, which w8y's own writes that make
// an item takeable now push a token to (w8yctl run-now, add and resume, a
// finish that leaves its item due or frees a place of --fleet-max-running:
// see schema.Keys.Wake), and on a list of its own, which it pushes to
// itself to end its wait early. The wait's timeout is the caller's: the
// next time it knows that an item comes due, and a bounded fallback for
// what w8y did not write (an outside RPUSH, a lock that expires).
//
// A token wakes one waiting worker, the one that has waited longest (Redis
// serves blocked clients in order), so that one run-now sends one worker
// after its item, not the whole fleet. A wake that is lost (a Redis
// restart, a failover, a token taken by a worker that then found nothing)
// only delays a take until the fallback; and the blocked connection is the
// one the worker takes with, so waiting costs no connection of its own.
//
// A blocking command works alike on one server, on Sentinel (the
// connection fails over with its primary) and on Redis Cluster, where the
// two lists share the list's hash tag: w8y waits only where one script
// reaches every key of the list (schema.Keys.Colocated).
package wake

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/schema"
)

// Client is the part of a Redis client that waiting needs.
type Client interface {
	BLPop(ctx context.Context, timeout time.Duration, keys ...string) *redis.StringSliceCmd
	Do(ctx context.Context, args ...any) *redis.Cmd
	Pipeline() redis.Pipeliner
}

// Waiter waits for the tokens that wake the worker whose holder token is
// Holder.
type Waiter struct {
	Client Client
	Keys   schema.Keys
	Holder string

	// patient holds the clones of Client that a wait with a command behind
	// it reads through, by the extra time they wait (see patientFor); mu
	// guards it.
	mu      sync.Mutex
	patient map[time.Duration]*redis.Client
}

// shortest is the shortest wait that Wait blocks for: BLPOP reads a
// timeout of 0 as forever, and Redis counts its timeouts in milliseconds.
const shortest = time.Millisecond

// precise is the longest wait that Wait sends with its milliseconds:
// go-redis' BLPop sends whole seconds (it truncates 1.9s to 1s, and 0.3s
// to 1s), and a command of one's own waits for its reply no longer than
// the client's read timeout (3s by default), so a wait this short is sent
// as it is, and a longer one in whole seconds, which the next wait, after
// the probe, makes good.
const precise = 2 * time.Second

// Wait blocks until a token wakes the worker, or d has passed: woken
// reports a token (the fleet's, or the worker's own from Interrupt). An
// error is Redis', which the take that follows meets too.
//
// then are sent behind the wait in the same write, so that Redis runs
// them as the wait ends (a blocked client's next command waits for its
// block to end) and one wake of Redis serves all: the take's probe (see
// take.Taker.ProbeCmd) and the registry's beat when it is due (see
// registry.Presence.BeatCmd). That takes a client whose pipelines wait for
// their replies longer than d (a *redis.Client's clone, sharing its
// connections); where there is none (Redis Cluster), or d is too short to
// wait for, then are not sent, and their errors say so.
func (w *Waiter) Wait(ctx context.Context, d time.Duration, then ...redis.Cmder) (woken bool, err error) {
	var patient Client
	if len(then) > 0 && d >= shortest {
		patient = w.patientFor(d)
	}
	if patient == nil {
		for _, cmd := range then {
			cmd.SetErr(ErrNotSent)
		}
	}
	if d < shortest {
		return false, nil
	}
	keys := []string{w.Keys.Wake(), w.Keys.WakeOf(w.Holder)}
	switch {
	case patient != nil:
		pipe := patient.Pipeline()
		wait := pipe.Do(ctx, "blpop", keys[0], keys[1], seconds(d))
		for _, cmd := range then {
			_ = pipe.Process(ctx, cmd)
		}
		_, _ = pipe.Exec(ctx)
		err = wait.Err()
	case d < precise:
		err = w.Client.Do(ctx, "blpop", keys[0], keys[1], seconds(d)).Err()
	default:
		err = w.Client.BLPop(ctx, d.Truncate(time.Second), keys...).Err()
	}
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

// ErrNotSent is the error of a command that Wait was given to send behind
// the wait and did not send.
var ErrNotSent = errors.New("not sent with the wait")

// seconds is d as BLPOP's timeout: seconds, to the millisecond (Redis 6.0
// and later read a fraction).
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}

// patientFor returns a client that shares the Waiter's connections and
// whose pipelines wait for replies at least d longer than its own (go-redis
// reads a pipeline's replies within the client's read timeout, whatever its
// commands), or nil where the Waiter's client has no such clone (a
// Cluster's). Clones are kept by the length they wait for, rounded up to
// a power of two times patientStep, so that a worker's waits, whose
// lengths vary, share a few, and a Redis that stops answering is still
// found out within about twice the wait.
func (w *Waiter) patientFor(d time.Duration) Client {
	rc, ok := w.Client.(*redis.Client)
	if !ok {
		return nil
	}
	read := rc.Options().ReadTimeout
	if read < 0 {
		// No read deadline: a pipeline waits as long as it takes.
		return rc
	}
	step := patientStep
	for step < d {
		step *= 2
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.patient[step]; ok {
		return c
	}
	if w.patient == nil {
		w.patient = map[time.Duration]*redis.Client{}
	}
	c := rc.WithTimeout(step + read)
	w.patient[step] = c
	return c
}

// patientStep is the shortest extra wait of patientFor's clones.
const patientStep = 250 * time.Millisecond

// Interrupt ends the worker's wait now, or its next one at once if none is
// under way: a token in the worker's own list, which expires with the
// fleet's tokens if no wait takes it.
func (w *Waiter) Interrupt(ctx context.Context) error {
	key := w.Keys.WakeOf(w.Holder)
	pipe := w.Client.Pipeline()
	pipe.RPush(ctx, key, "1")
	pipe.PExpire(ctx, key, schema.WakeTTL)
	_, err := pipe.Exec(ctx)
	return err
}
