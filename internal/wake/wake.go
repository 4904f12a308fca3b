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
func (w *Waiter) Wait(ctx context.Context, d time.Duration) (woken bool, err error) {
	if d < shortest {
		return false, nil
	}
	keys := []string{w.Keys.Wake(), w.Keys.WakeOf(w.Holder)}
	if d < precise {
		err = w.Client.Do(ctx, "blpop", keys[0], keys[1], strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Err()
	} else {
		err = w.Client.BLPop(ctx, d.Truncate(time.Second), keys...).Err()
	}
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

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
