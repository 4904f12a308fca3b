package take

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/w8y/w8y/internal/duration"
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
// it is counted, is never overrun by the fleet's starts. It costs a
// LINDEX, an LPUSH, an LTRIM and a PEXPIRE a take, whatever N, and Redis
// about 10 bytes a start of the window (see MaxRateStarts).

//go:embed rate.lua
var rateSource string

// MaxRateStarts is the largest N of --fleet-rate: the log keeps N starts,
// about 10 MB of Redis' memory at this bound. A quota that allows more
// starts than that in its window is one that a fleet of processes, each
// run a process of its own, is unlikely to reach.
const MaxRateStarts = 1_000_000

// Rate is --fleet-rate as an option: at most Starts starts of the list's
// items in any window of Per, fleet-wide. The zero Rate is none.
type Rate struct {
	Starts int
	Per    time.Duration
}

// IsZero reports whether r is no rate (the option left out).
func (r Rate) IsZero() bool { return r.Starts == 0 }

// String is r as the option takes it: "5/2s", "100/1h".
func (r Rate) String() string {
	if r.IsZero() {
		return ""
	}
	return strconv.Itoa(r.Starts) + "/" + FormatPer(r.Per)
}

// FormatPer writes a rate's window as a user writes it: "1h", not "1h0m0s".
func FormatPer(d time.Duration) string {
	s := duration.Format(d)
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// errRate is what UnmarshalFlag says of a value that is not N/DURATION.
func errRate(value, why string) error {
	return fmt.Errorf("%q is not a rate: %s", value, why)
}

// UnmarshalFlag implements go-flags' Unmarshaler: N/DURATION, a whole
// number of starts from 1 to MaxRateStarts and a length of time of at
// least a millisecond (Redis' clock counts milliseconds), not inf. A rate
// of 0 starts would run nothing, and is refused rather than read as "no
// rate", which is the option left out.
func (r *Rate) UnmarshalFlag(value string) error {
	n, per, ok := strings.Cut(strings.TrimSpace(value), "/")
	if !ok {
		return errRate(value, "give N/DURATION, at most N starts in any DURATION, such as 100/1h or 5/2s")
	}
	starts, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || starts < 1 || starts > MaxRateStarts {
		return errRate(value, fmt.Sprintf("N must be a whole number of starts from 1 to %d, as in 100/1h (leave the option out for no rate)", MaxRateStarts))
	}
	d, err := duration.Parse(strings.TrimSpace(per))
	if err != nil {
		return errRate(value, fmt.Sprintf("after the slash, %v", err))
	}
	if d < time.Millisecond || d == duration.Forever {
		return errRate(value, "the DURATION after the slash must be at least 1ms and not inf, as in 100/1h")
	}
	*r = Rate{Starts: starts, Per: d.Round(time.Millisecond)}
	return nil
}

// MarshalFlag implements go-flags' Marshaler.
func (r Rate) MarshalFlag() (string, error) { return r.String(), nil }

// word is the take scripts' option word for r: " rate=N/MS", or "".
func (r Rate) word() string {
	if r.IsZero() {
		return ""
	}
	return " rate=" + strconv.Itoa(r.Starts) + "/" + strconv.FormatInt(r.Per.Milliseconds(), 10)
}

// ParseRecord reads the rate that the list's last take under one recorded
// (schema.Keys.FleetRate: "N/MS"), or says it is not one.
func ParseRecord(record string) (Rate, bool) {
	n, ms, ok := strings.Cut(record, "/")
	starts, err1 := strconv.Atoi(n)
	per, err2 := strconv.ParseInt(ms, 10, 64)
	if !ok || err1 != nil || err2 != nil || starts < 1 || per < 1 {
		return Rate{}, false
	}
	return Rate{Starts: starts, Per: time.Duration(per) * time.Millisecond}, true
}

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
	other, ok := ParseRecord(get.Val())
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
