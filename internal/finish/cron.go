package finish

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron is --schedule: an item may run once per slot of a cron expression,
// anywhere in the fleet. Its zero value means no schedule.
//
// It needs nothing of its own in Redis: at the end of a success the item's
// cooldown key is set to last until its next slot (see CooldownAfter), so
// that the take, the due index, --status and --until-idle read a schedule
// exactly as they read --cooldown. An item is thus eligible once its last
// successful start lies before the most recent slot; a failed run sets no
// cooldown and is retried under --failure-backoff within the slot; and a
// fleet that was down for several slots finds the cooldown long gone and
// runs the item once, not once per missed slot.
type Cron struct {
	// Expr is the expression as the user wrote it, for messages.
	Expr  string
	every cron.Schedule
	// Zone is the time zone the expression's fields are read in.
	Zone *time.Location
	// Jitter is --jitter: each item's slots are moved later by a part of
	// it fixed per item (see Offset).
	Jitter time.Duration
}

// cronParser reads five fields (minute, hour, day of month, month, day of
// week) or six, the first then being seconds, and the @hourly-style
// descriptors. robfig/cron's parser is used rather than our own: cron's
// day-of-month/day-of-week "or" rule, names (MON, JAN), ranges with steps
// and the search for the next slot across DST changes are easy to get
// subtly wrong, and it has them right and tested.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron reads expr in zone, the IANA name of a time zone ("" is UTC),
// with jitter. Its errors name what was wrong in the user's words.
func ParseCron(expr, zone string, jitter time.Duration) (Cron, error) {
	if zone == "" {
		zone = "UTC"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "Local" {
		return Cron{}, fmt.Errorf("--schedule-timezone %q is not a time zone: give an IANA name such as UTC or Europe/Paris", zone)
	}
	if strings.HasPrefix(strings.TrimSpace(expr), "TZ=") || strings.HasPrefix(strings.TrimSpace(expr), "CRON_TZ=") {
		return Cron{}, fmt.Errorf("--schedule %q: give the time zone with --schedule-timezone, not in the expression", expr)
	}
	// robfig/cron also reads "@every 5m", a delay from each run rather than
	// slots of the clock: that is --cooldown, whose runs drift.
	if strings.HasPrefix(strings.TrimSpace(expr), "@every") {
		return Cron{}, fmt.Errorf("--schedule %q is a delay, not slots of the clock: for at most one run per delay, give --cooldown instead", expr)
	}
	every, err := cronParser.Parse(expr)
	if err != nil {
		return Cron{}, fmt.Errorf("--schedule %q is not a cron expression (%s): give five fields, minute hour day-of-month month day-of-week, or six with seconds first, e.g. \"0 2 * * *\"", expr, cronProblem(expr, err))
	}
	if every.Next(time.Now().In(loc)).IsZero() {
		return Cron{}, fmt.Errorf("--schedule %q has no slot in the next five years", expr)
	}
	if jitter < 0 {
		return Cron{}, fmt.Errorf("--jitter must not be negative, got %s", jitter)
	}
	return Cron{Expr: expr, every: every, Zone: loc, Jitter: jitter}, nil
}

// cronProblem says what robfig/cron found wrong with expr in a user's
// words: two of its messages speak Go's (the fields as a Go slice, and
// strconv's "invalid syntax").
func cronProblem(expr string, err error) string {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "expected "):
		return fmt.Sprintf("it has %d fields", len(strings.Fields(expr)))
	case strings.HasPrefix(msg, "failed to parse int from "):
		field, _, _ := strings.Cut(strings.TrimPrefix(msg, "failed to parse int from "), ": ")
		return fmt.Sprintf("%q is not a number", field)
	}
	return msg
}

// Set reports whether c is a schedule, not the zero value.
func (c Cron) Set() bool {
	return c.every != nil
}

// Offset is how much later than the schedule's slots item's slots are: a
// part of Jitter fixed by a hash of the item, so that every worker
// computes the same, and the items of one list spread evenly over it.
func (c Cron) Offset(item string) time.Duration {
	ms := c.Jitter.Milliseconds()
	if ms <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(item))
	return time.Duration(h.Sum64()%uint64(ms)) * time.Millisecond
}

// Next is item's first slot after t, its offset included, or the zero time
// when none comes within five years (robfig/cron's horizon).
func (c Cron) Next(item string, t time.Time) time.Time {
	off := c.Offset(item)
	next := c.every.Next(t.Add(-off).In(c.Zone))
	if next.IsZero() {
		return time.Time{}
	}
	return next.Add(off)
}

// Slot is the slot that a success of item that started at start waits
// for, as seen at now: its first slot after start, or the zero time when
// that slot has come by now or none comes within five years.
func (c Cron) Slot(item string, start, now time.Time) time.Time {
	next := c.Next(item, start)
	if next.IsZero() || !next.After(now) {
		return time.Time{}
	}
	return next
}

// noSlot is the cooldown after a success when no later slot comes within
// robfig/cron's horizon of five years (ParseCron refuses an expression
// without any slot, but one can have its last slot behind it): as long as
// that horizon, since the item is not to run again before it.
const noSlot = 5 * 365 * 24 * time.Hour

// CooldownAfter is how long, from now, a success of item that started at
// start keeps it from running: until its next slot after start, rounded up
// to the millisecond so that the cooldown never ends before the slot. It is
// 0 when that slot has already come (the run outlasted it: the item is due
// again at once, once for however many slots passed).
func (c Cron) CooldownAfter(item string, start, now time.Time) time.Duration {
	next := c.Next(item, start)
	if next.IsZero() {
		return noSlot
	}
	left := next.Sub(now)
	if left <= 0 {
		return 0
	}
	return (left + time.Millisecond - 1).Truncate(time.Millisecond)
}
