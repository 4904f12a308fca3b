package main

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Schedule is when an item may run again after a run, across the fleet.
type Schedule struct {
	// Cooldown keeps an item from running after a success; 0 means none.
	Cooldown time.Duration
	// Backoff keeps an item from running after a failure; its zero value
	// means none. The count of consecutive failures that it doubles with
	// lives in the item's state hash, which expires after --state-ttl.
	Backoff Backoff
}

// backoffJitter is the most that jitter takes off a failure delay: a
// quarter, as --idle-wait's jitter. Only taking off keeps every delay within
// MAX and within the doubling the user asked for, and the next delay
// (at least 1.5 times this one's nominal value) is still always longer, so
// retry times visibly grow. It spreads items that failed together (a
// dependency went down) so that they do not all retry at once.
const backoffJitter = 0.25

// jitterFactor returns the factor that the finish script multiplies a
// failure delay by, in [1-backoffJitter, 1], as the text sent to Redis. It
// is drawn here because a Redis script must not depend on randomness, and
// sent as text so that Go reads back exactly the number that Lua does.
func jitterFactor() string {
	return strconv.FormatFloat(1-backoffJitter*rand.Float64(), 'f', 4, 64)
}

// backoffDelay is the delay after the failures-th consecutive failure:
// MIN·2^(failures-1), at most MAX, times factor (from jitterFactor), in
// whole milliseconds and at least one. lua.Finish computes the same from
// the same numbers; keep the two in step.
func backoffDelay(failures int64, b Backoff, factor string) time.Duration {
	f, err := strconv.ParseFloat(factor, 64)
	if err != nil {
		f = 1
	}
	n := max(failures, 1)
	ms := math.Min(float64(b.Max.Milliseconds()), float64(b.Min.Milliseconds())*math.Pow(2, float64(n-1)))
	return time.Duration(max(math.Floor(ms*f), 1)) * time.Millisecond
}
