package redisconn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/script"
)

// ErrNotReplicated marks a write that fewer replicas than asked for
// confirmed in time. A failover may lose such a write.
var ErrNotReplicated = errors.New("not confirmed by enough replicas")

// ScriptClient runs Lua scripts, and pipelines, so that WAIT can go on the
// same connection as the script whose writes it waits for.
type ScriptClient interface {
	redis.Scripter
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// ReplicaWait is how long WAIT waits for replicas on behalf of a lock of
// ttl: replication takes well under a millisecond on a healthy link, so a
// replica that has not confirmed a write by then is cut off or gone, which
// is what the wait is there to notice; and it is short against the lease,
// whose refreshes it delays.
func ReplicaWait(ttl time.Duration) time.Duration {
	return max(min(ttl/10, time.Second), time.Millisecond)
}

// RunConfirmed runs s as s.Run does. With replicas > 0 it sends
// WAIT replicas after it, in the same round trip on the same connection,
// and returns the script's reply along with ErrNotReplicated when fewer
// replicas confirmed the script's writes within ReplicaWait(ttl). Then the
// reply is still valid: the script ran, and the caller must undo or not
// count what it did.
//
// Replication in Redis is asynchronous: a lock that the master took but had
// not yet sent to a replica is gone when Sentinel promotes that replica,
// and another worker can take the item on the new master while the first
// still runs it. A lock that the replicas confirmed survives the failover.
func RunConfirmed(ctx context.Context, c ScriptClient, s *script.Script, replicas int, ttl time.Duration, keys []string, args ...any) (any, error) {
	if replicas <= 0 {
		return s.Run(ctx, c, keys, args...).Result()
	}
	var cmd *redis.Cmd
	var wait *redis.IntCmd
	send := func(byHash bool) {
		// The pipeline's own error is that of its first failed command,
		// which the two commands report themselves.
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if byHash {
				cmd = s.EvalSha(ctx, p, keys, args...)
			} else {
				cmd = s.Eval(ctx, p, keys, args...)
			}
			// Pipeliner lacks a Wait method; the command is the same.
			wait = redis.NewIntCmd(ctx, "wait", replicas, ReplicaWait(ttl).Milliseconds())
			return p.Process(ctx, wait)
		})
	}
	send(true)
	if NoScript(cmd.Err()) {
		send(false)
	}
	reply, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	confirmed, err := wait.Result()
	if err != nil {
		return reply, fmt.Errorf("%w: WAIT failed: %w", ErrNotReplicated, err)
	}
	if confirmed < int64(replicas) {
		return reply, fmt.Errorf("%w: %d of the %d replicas wanted confirmed it within %s", ErrNotReplicated, confirmed, replicas, ReplicaWait(ttl))
	}
	return reply, nil
}
