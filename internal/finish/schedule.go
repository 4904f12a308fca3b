package finish

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/schema"
)

// Schedule is when an item may run again after a run, across the fleet.
type Schedule struct {
	// Cooldown keeps an item from running after a success; 0 means none.
	Cooldown time.Duration
	// Cron is --schedule, the alternative to Cooldown: after a success, the
	// item's cooldown lasts until its next slot.
	Cron Cron
	// Backoff keeps an item from running after a failure; its zero value
	// means none. The count of consecutive failures that it doubles with
	// lives in the item's state hash, which expires after --state-ttl.
	Backoff Backoff
}

// CooldownAfter is how long the success that ended as end says keeps its
// item from running: Cooldown, or with a Cron, until the item's next slot
// after the run's start: its take (end.Started), or where that is unknown
// the child's start (end.At less its run time). 0 means none.
func (s Schedule) CooldownAfter(end End) time.Duration {
	if end.Result != schema.ResultSuccess {
		return 0
	}
	if s.Cron.Set() {
		return s.Cron.CooldownAfter(end.Item, runStart(end), end.At)
	}
	return s.Cooldown
}

// NextSlot is, with a Cron, the slot that the success that ended as end
// waits for: the instant its cooldown (CooldownAfter) ends, which the state
// hash keeps as next_slot so that status can say when the item runs next,
// and that it waits for a slot. It is the zero time without a Cron, after
// anything but a success, and where the cooldown ends at no slot: the slot
// came during the run (no cooldown), or none comes within five years.
func (s Schedule) NextSlot(end End) time.Time {
	if end.Result != schema.ResultSuccess || !s.Cron.Set() {
		return time.Time{}
	}
	return s.Cron.Slot(end.Item, runStart(end), end.At)
}

// runStart is when the run that ended as end started, as a schedule counts
// it: its take (end.Started), or where that is unknown the child's start
// (end.At less its run time).
func runStart(end End) time.Time {
	if end.Started.IsZero() {
		return end.At.Add(-end.Exit.Duration)
	}
	return end.Started
}

// backoffJitter is the most that jitter takes off a failure delay: a
// quarter, as --idle-wait's jitter. Only taking off keeps every delay within
// MAX and within the doubling the user asked for, and the next delay
// (at least 1.5 times this one's nominal value) is still always longer, so
// retry times visibly grow. It spreads items that failed together (a
// dependency went down) so that they do not all retry at once.
const backoffJitter = 0.25

// JitterFactor returns the factor that the finish script multiplies a
// failure delay by, in [1-backoffJitter, 1], as the text sent to Redis. It
// is drawn here because a Redis script must not depend on randomness, and
// sent as text so that Go reads back exactly the number that Lua does.
func JitterFactor() string {
	return strconv.FormatFloat(1-backoffJitter*rand.Float64(), 'f', 4, 64)
}

// Delay is the delay after the failures-th consecutive failure:
// MIN·2^(failures-1), at most MAX, times factor (from JitterFactor), in
// whole milliseconds and at least one. finishScript computes the same from
// the same numbers; keep the two in step.
func Delay(failures int64, b Backoff, factor string) time.Duration {
	f, err := strconv.ParseFloat(factor, 64)
	if err != nil {
		f = 1
	}
	n := max(failures, 1)
	ms := math.Min(float64(b.Max.Milliseconds()), float64(b.Min.Milliseconds())*math.Pow(2, float64(n-1)))
	return time.Duration(max(math.Floor(ms*f), 1)) * time.Millisecond
}

// Backoff is --failure-backoff: MIN[,MAX], each a duration. Its zero value
// means no backoff.
type Backoff struct {
	Min, Max time.Duration
}

// backoffMaxFactor makes the default MAX of --failure-backoff: ten times MIN
// is four doublings and a bit, so a broken item settles at a retry every
// few minutes for a MIN of seconds, without being forgotten for hours.
const backoffMaxFactor = 10

// UnmarshalFlag implements flags.Unmarshaler.
func (b *Backoff) UnmarshalFlag(value string) error {
	minText, maxText, hasMax := strings.Cut(value, ",")
	lo, err := duration.Parse(strings.TrimSpace(minText))
	if err != nil {
		return err
	}
	// A MIN too long to multiply makes a MAX of forever, not a negative one.
	hi := duration.Forever
	if lo <= duration.Forever/backoffMaxFactor {
		hi = lo * backoffMaxFactor
	}
	if hasMax {
		if hi, err = duration.Parse(strings.TrimSpace(maxText)); err != nil {
			return err
		}
	}
	*b = Backoff{Min: lo, Max: hi}
	return nil
}

// MarshalFlag implements flags.Marshaler.
func (b Backoff) MarshalFlag() (string, error) {
	if b == (Backoff{}) {
		return "", nil
	}
	return duration.Format(b.Min) + "," + duration.Format(b.Max), nil
}
