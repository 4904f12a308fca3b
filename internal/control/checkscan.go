package control

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
)

// How w8yctl check reads what it judges: the keys under the prefix, on every
// master of a Cluster, and whether items are in the list after all.

// absentBatch is how many LPOS one round trip of absent sends. An LPOS of
// an item that the list lacks reads the whole list, about 1ms on a list of
// 100,000 items, and Redis runs a pipeline's commands back to back: a
// thousand of them in one pipeline held other clients up for half a
// second (see docs/operating.md), eight for some 10ms.
const absentBatch = 8

// absent returns which of list the list does not hold, one LPOS each.
func (f *Fleet) absent(ctx context.Context, list []string) (map[string]bool, error) {
	gone := make(map[string]bool)
	asked := make(map[string]bool)
	for len(list) > 0 {
		pipe := f.Client.Pipeline()
		at := make(map[string]*redis.IntCmd)
		for len(list) > 0 && len(at) < absentBatch {
			item := list[0]
			list = list[1:]
			if !asked[item] {
				asked[item] = true
				at[item] = pipe.LPos(ctx, f.Keys.List(), item, redis.LPosArgs{})
			}
		}
		if len(at) == 0 {
			break
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, redisconn.Wrap("read "+strconv.Quote(f.Keys.List()), err)
		}
		for item, cmd := range at {
			if errors.Is(cmd.Err(), redis.Nil) {
				gone[item] = true
			}
		}
	}
	return gone, nil
}

// scanner is a client that SCAN can be sent to: a server, or one master
// of a Cluster.
type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// scan calls each with the keys under the prefix, CheckBatch at a time,
// with SCAN MATCH on every master of a Cluster (whose keys, without a hash
// tag, are spread over them all).
func (f *Fleet) scan(ctx context.Context, each func([]string) error) error {
	cluster, ok := f.Client.(interface {
		ForEachMaster(context.Context, func(context.Context, *redis.Client) error) error
	})
	if !ok {
		return f.scanNode(ctx, f.Client, each)
	}
	// ForEachMaster calls fn on every master at once.
	var mu sync.Mutex
	return cluster.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
		return f.scanNode(ctx, master, func(keys []string) error {
			mu.Lock()
			defer mu.Unlock()
			return each(keys)
		})
	})
}

// scanNode is scan on one server.
func (f *Fleet) scanNode(ctx context.Context, node scanner, each func([]string) error) error {
	match := globEscape(f.Keys.Prefix) + "*"
	var cursor uint64
	for {
		keys, next, err := node.Scan(ctx, cursor, match, CheckBatch).Result()
		if err != nil {
			return redisconn.Wrap("SCAN the keys under "+strconv.Quote(f.Keys.Prefix), err)
		}
		if err := each(keys); err != nil {
			return err
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}
