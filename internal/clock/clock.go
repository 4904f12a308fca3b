// Package clock is the fleet's one clock: Redis'. Every time that Redis
// keeps or compares (a cooldown's end, a due score, a schedule slot, a
// pause's expiry, a worker's entry in the registry) is on the clock of the
// Redis server, so that a host whose clock is wrong by minutes changes
// nothing that another host sees. The scripts read Redis' TIME themselves;
// a Clock is for the times that a host computes or compares in Go (a
// schedule's slot, the probe of what came due, the registry's expiries),
// which it puts on Redis' clock by the skew it last measured.
//
// A host still uses its own clock for what only it sees: a lease's
// deadline, a child's timeout, the pace of its looks.
package clock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Clock converts this host's times to Redis' clock. The zero Clock, and a
// nil one, take the host's clock to be Redis' until Measure says otherwise.
type Clock struct {
	// skew is Redis' clock less this host's, in nanoseconds, as last
	// measured.
	skew atomic.Int64
	// off is the test-only offset of this host's clock (see offset.go):
	// 0 in every release build.
	off time.Duration
}

// New returns a Clock that takes this host's clock to be right until
// Measure says otherwise.
func New() *Clock {
	return &Clock{off: hostOffset()}
}

// host is this host's clock: time.Now, but for a test's offset.
func (c *Clock) host() time.Time {
	if c == nil {
		return time.Now()
	}
	return time.Now().Add(c.off)
}

// Skew is Redis' clock less this host's, as last measured.
func (c *Clock) Skew() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.skew.Load())
}

// Now is the time on Redis' clock, as this host knows it.
func (c *Clock) Now() time.Time {
	return c.OnRedis(time.Now())
}

// OnRedis is t, a reading of this host's clock (time.Now), on Redis'
// clock. The monotonic reading is dropped: the result is a wall time, to
// compare only with Redis' times.
func (c *Clock) OnRedis(t time.Time) time.Time {
	if c == nil || t.IsZero() {
		return t
	}
	return t.Add(c.off + c.Skew()).Round(0)
}

// Timer is the part of a Redis client that Measure needs.
type Timer interface {
	Time(ctx context.Context) *redis.TimeCmd
}

// Measure reads Redis' TIME and sets the skew from it: Redis' time less
// this host's at the middle of the round trip, which is within half the
// round trip of the truth.
func (c *Clock) Measure(ctx context.Context, client Timer) error {
	sent := c.host()
	got, err := client.Time(ctx).Result()
	if err != nil {
		return err
	}
	c.Set(got, sent, c.host())
	return nil
}

// Set sets the skew from redisNow, Redis' TIME read between sent and got,
// two readings of this host's clock (c.host), for a caller that reads TIME
// in a pipeline of its own.
func (c *Clock) Set(redisNow, sent, got time.Time) {
	if c == nil || redisNow.IsZero() {
		return
	}
	mid := sent.Add(got.Sub(sent) / 2).Round(0)
	c.skew.Store(int64(redisNow.Sub(mid)))
}

// Host is this host's clock, as Set wants its readings.
func (c *Clock) Host() time.Time { return c.host() }
