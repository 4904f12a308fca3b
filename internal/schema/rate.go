package schema

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/w8y/w8y/internal/duration"
)

// MaxRateStarts is the largest N of --fleet-rate: the log of the fleet's
// starts (Keys.Starts) keeps N of them, about 10 MB of Redis' memory at
// this bound. A quota that allows more starts than that in its window is
// one that a fleet of processes, each run a process of its own, is
// unlikely to reach.
const MaxRateStarts = 1_000_000

// Rate is a --fleet-rate: at most Starts starts of the list's items in any
// window of Per, fleet-wide, as the option gives it and as the last take
// under it records it (Keys.FleetRate). The zero Rate is none.
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

// Record is r as Keys.FleetRate holds it, and as the take scripts read it:
// "N/MS", N starts per MS milliseconds.
func (r Rate) Record() string {
	return strconv.Itoa(r.Starts) + "/" + strconv.FormatInt(r.Per.Milliseconds(), 10)
}

// ParseRate reads a rate's Record, or says it is not one.
func ParseRate(record string) (Rate, bool) {
	n, ms, ok := strings.Cut(record, "/")
	starts, err1 := strconv.Atoi(n)
	per, err2 := strconv.ParseInt(ms, 10, 64)
	if !ok || err1 != nil || err2 != nil || starts < 1 || per < 1 {
		return Rate{}, false
	}
	return Rate{Starts: starts, Per: time.Duration(per) * time.Millisecond}, true
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

// UnmarshalFlag implements go-flags' Unmarshaler for --fleet-rate:
// N/DURATION, a whole number of starts from 1 to MaxRateStarts and a
// length of time of at least a millisecond (Redis' clock counts
// milliseconds), not inf. A rate of 0 starts would run nothing, and is
// refused rather than read as "no rate", which is the option left out.
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
