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

// lagLook is how many of the entries due by now readLag checks against
// the item's keys: an entry may be stale, since a run that outlives its
// first lock expiry keeps its lock but not its entry up to date, and an
// idle worker's look, which would move it, may not come while all are
// busy. Entries past the first lagLook are counted as they are.
const lagLook = 1000

// readLag reads the lag from the due index: a ZCOUNT of the entries due
// by now and the oldest lagLook of them (O(log n + lagLook) each, however
// long the list), then, in one pipeline, whether each of these is still
// held by a lock, a pause, a cooldown or a backoff, which its stale entry
// does not know: such an item is not late.
func readLag(ctx context.Context, client lagClient, keys schema.Keys, now time.Time) (Lag, error) {
	if !keys.Colocated {
		return Lag{}, nil
	}
	until := strconv.FormatInt(now.UnixMilli(), 10)
	pipe := client.Pipeline()
	count := pipe.ZCount(ctx, keys.Due(), "-inf", until)
	oldest := pipe.ZRangeByScoreWithScores(ctx, keys.Due(), &redis.ZRangeBy{Min: "-inf", Max: until, Count: lagLook})
	if _, err := pipe.Exec(ctx); err != nil {
		return Lag{}, redisconn.Wrap("read "+strconv.Quote(keys.Due()), err)
	}
	entries := oldest.Val()
	if len(entries) == 0 {
		return Lag{Known: true}, nil
	}
	pipe = client.Pipeline()
	held := make([]*redis.IntCmd, len(entries))
	for i, z := range entries {
		item, _ := z.Member.(string)
		// One EXISTS of the four keys: they share a slot where the keys
		// are colocated.
		held[i] = pipe.Exists(ctx, keys.Lock(item), keys.Pause(item), keys.Cooldown(item), keys.Backoff(item))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return Lag{}, redisconn.Wrap("read the keys of the items due", err)
	}
	lag := Lag{Known: true, Due: count.Val()}
	for i, z := range entries {
		if held[i].Val() > 0 {
			lag.Due--
			continue
		}
		// Entries come oldest first; a score of 0 says "now", without a
		// time.
		if lag.OldestMs == nil && z.Score > 0 {
			age := max(now.UnixMilli()-int64(z.Score), 0)
			lag.OldestMs = &age
		}
	}
	return lag, nil
}
