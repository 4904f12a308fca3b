package status

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
)

// Places is how many of the places of --fleet-max-running are in use: the
// runs that took one whose lock still exists (a run whose worker died
// holds its place until its lock expires), and the cap that the last take
// under it enforced.
type Places struct {
	InUse int64 `json:"in_use"`
	Limit int64 `json:"limit"`
}

// Places reads the places of --fleet-max-running (see schema.Keys.Running):
// one pipeline for the cap and the members, one more of EXISTS for their
// locks. It returns nil when no cap is recorded: the fleet runs without one.
// A member whose lock is gone is not counted, as a take counts it; reading
// changes nothing.
func (s *Reader) Places(ctx context.Context) (*Places, error) {
	pipe := s.Client.Pipeline()
	limit := pipe.Get(ctx, s.Keys.FleetMax())
	members := pipe.SMembers(ctx, s.Keys.Running())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisconn.Wrap("read the places of --fleet-max-running ("+strconv.Quote(s.Keys.Running())+")", err)
	}
	n, err := limit.Int64()
	if err != nil {
		return nil, nil
	}
	places := &Places{Limit: n}
	locks := members.Val()
	if len(locks) == 0 {
		return places, nil
	}
	pipe = s.Client.Pipeline()
	exists := make([]*redis.IntCmd, len(locks))
	for i, lock := range locks {
		exists[i] = pipe.Exists(ctx, lock)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, redisconn.Wrap("read the locks of the places in use", err)
	}
	for _, e := range exists {
		places.InUse += e.Val()
	}
	return places, nil
}
