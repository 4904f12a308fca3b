package take

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/w8y/w8y/internal/schema"
)

// The rate of --fleet-rate (Taker.Rate): at most N starts of the list's
// items in any window of DURATION, across the whole fleet, which each take
// script checks and counts in the same call as it takes the lock (see
// rate.lua, which they start with, after place.lua).
//
// The algorithm is a sliding log: <prefix>starts is a list of the Unix
// milliseconds (Redis' TIME) of the fleet's latest starts under a rate,
// newest first. A take may start an item only while the N-th newest start
// is more than DURATION ago; it then pushes its own. So no window of
// DURATION, however placed, ever holds more than N starts: the burst is N
// at once, after a quiet DURATION, and never more than N in any window.
// Unlike a token bucket or GCRA with a burst of N, which let 2N-1 starts
// into one window, a downstream quota of N per DURATION, counted however
// it is counted, is never overrun by the fleet's starts. It costs a take
// an LINDEX, and one that starts an item an LPUSH, an LTRIM, a PTTL, a
// PEXPIRE and a SET (the rate's record), whatever N; and Redis about 10
// bytes a start of the window (see schema.MaxRateStarts).

//go:embed rate.lua
var rateSource string

// ErrRateFull is returned by Pass.Take and TakeNamed when the fleet's
// starts in the last window of --fleet-rate have reached its N: nothing
// was looked at. It is an ErrNoWork, so that a worker waits as an idle one
// does, and looks again.
var ErrRateFull error = rateFullError{}

// rateFullError is ErrRateFull.
type rateFullError struct{}

func (rateFullError) Error() string        { return "the fleet's --fleet-rate allows no start now" }
func (rateFullError) Is(target error) bool { return target == ErrNoWork }

// ErrRateNotColocated is returned by CheckPlaces when the rate cannot be
// counted in the take's own step.
var ErrRateNotColocated = errors.New("--fleet-rate needs every key of the list on one server: on Redis Cluster, put a hash tag in --key-prefix, such as {work}")

// rateFence is the fence that batch.lua and look.lua reply with when the
// rate refused the take and they looked at nothing; each.lua replies it too.
const rateFence = -2

// recordReadTimeout bounds WarnOtherRate's read: a silent server is the
// take's to name.
const recordReadTimeout = 2 * time.Second

// WarnOtherRate reads, once at a worker's start, the rate that the list's
// last take recorded (schema.Keys.FleetRate), and warns when it is not this
// worker's own: two fleets on one list with other rates, or one with a rate
// beside one without. Each take holds to its own rate over the whole
// fleet's starts, so the list's starts stay within the laxer rate, and the
// stricter workers start only while their own window has room; a worker
// without a rate neither checks nor counts. It costs one GET.
func (t *Taker) WarnOtherRate(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, recordReadTimeout)
	defer cancel()
	pipe := t.Client.Pipeline()
	get := pipe.Get(ctx, t.Keys.FleetRate())
	if _, err := pipe.Exec(ctx); err != nil {
		return
	}
	other, ok := schema.ParseRate(get.Val())
	if !ok || other == t.Rate {
		return
	}
	mine := "none"
	if !t.Rate.IsZero() {
		mine = t.Rate.String()
	}
	t.Log.Warn().Str("recorded", other.String()).Str("own", mine).
		Msgf("the list's last take ran under --fleet-rate %s, and this worker's is %s: each take holds to its own rate over the whole fleet's starts (a worker without one neither checks nor counts them), so the list starts at up to the laxer rate; give every worker of the list the same --fleet-rate", other, mine)
}
