package dashboard

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
)

// Lag is how far behind the fleet is, as the due index tells: how many
// items have come due and no worker has taken, and how long the one due
// longest has waited.
//
// This is the dashboard's own reading until internal/status has one; it
// is kept here alone so that it can be swapped for status's.
type Lag struct {
	// Known is false where the index is not kept: an item's keys are not
	// colocated (Redis Cluster without a hash tag), and workers pass over
	// the list instead.
	Known bool `json:"known"`
	// Due is how many items are due and not taken.
	Due int64 `json:"due"`
	// OldestMs is how long the item due longest has waited, in
	// milliseconds; null when none is due, or when each due one was made
	// due "now" (run-now, resume), which the index keeps without a time.
	OldestMs *int64 `json:"oldest_ms"`
}

// lagClient is what readLag needs of Redis.
type lagClient interface {
	Pipeline() redis.Pipeliner
}

// readLag reads the lag from the due index with two commands that cost
// Redis O(log n) each, however long the list: a ZCOUNT of the entries due
// by now, and the first of them with a time (a score above 0).
func readLag(ctx context.Context, client lagClient, keys schema.Keys, now time.Time) (Lag, error) {
	if !keys.Colocated {
		return Lag{}, nil
	}
	until := strconv.FormatInt(now.UnixMilli(), 10)
	pipe := client.Pipeline()
	due := pipe.ZCount(ctx, keys.Due(), "-inf", until)
	oldest := pipe.ZRangeByScoreWithScores(ctx, keys.Due(), &redis.ZRangeBy{Min: "(0", Max: until, Count: 1})
	if _, err := pipe.Exec(ctx); err != nil {
		return Lag{}, redisconn.Wrap("read "+strconv.Quote(keys.Due()), err)
	}
	lag := Lag{Known: true, Due: due.Val()}
	if z := oldest.Val(); len(z) == 1 {
		age := max(now.UnixMilli()-int64(z[0].Score), 0)
		lag.OldestMs = &age
	}
	return lag, nil
}
