// Package settings is an item's own settings: what an operator sets for one
// item with w8yctl set (its cooldown, timeout, failure backoff or schedule),
// which every worker applies when it takes the item, over its own options.
// They live in Redis, in the item's settings hash (schema.Keys.Settings),
// one field per setting, each value as the command line writes it, so that
// an operator can read and write them with redis-cli too; this package
// says what the fields are, checks a value before w8yctl stores it, and
// reads what a take found, which a hand may have written wrong.
package settings

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/finish"
)

// The fields of an item's settings hash, each named as the option of w8y
// that it stands in for, with '_' for '-'.
const (
	Cooldown       = "cooldown"
	Timeout        = "timeout"
	FailureBackoff = "failure_backoff"
	Schedule       = "schedule"
)

// Fields are the settings, in the order that w8yctl shows them.
var Fields = []string{Cooldown, Timeout, FailureBackoff, Schedule}

// Option is field's option of w8y and w8yctl set: --cooldown for cooldown.
func Option(field string) string { return "--" + strings.ReplaceAll(field, "_", "-") }

// Stored are an item's settings as its hash holds them: field to value.
type Stored map[string]string

// Pairs returns s's settings as field, value, ..., in the order of Fields,
// which is how w8yctl and the events show them; fields it does not know
// follow, sorted.
func (s Stored) Pairs() []string {
	var out []string
	for _, f := range Fields {
		if v, ok := s[f]; ok {
			out = append(out, f, v)
		}
	}
	var others []string
	for f := range s {
		if !slices.Contains(Fields, f) {
			others = append(others, f)
		}
	}
	slices.Sort(others)
	for _, f := range others {
		out = append(out, f, s[f])
	}
	return out
}

// String shows s as w8yctl set's options would give them, as a shell
// reads them: "--cooldown 1h0m0s --schedule '0 * * * *'", or "" without
// any. A value written by hand that a terminal would act on (an escape
// sequence, a newline) shows quoted with Go's escapes.
func (s Stored) String() string {
	pairs := s.Pairs()
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		parts = append(parts, Option(pairs[i])+" "+shellWord(pairs[i+1]))
	}
	return strings.Join(parts, " ")
}

// shellWord is value as one word of a shell's command line.
func shellWord(value string) string {
	switch {
	case !utf8.ValidString(value) || strings.ContainsFunc(value, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) || strings.Contains(value, "'"):
		return strconv.Quote(value)
	case value == "" || strings.ContainsAny(value, " *?[]\"$`;&|<>(){}~#!"):
		return "'" + value + "'"
	}
	return value
}

// FromPairs reads a reply of HGETALL (field, value, ...), as the take
// scripts return an item's settings with its lock.
func FromPairs(pairs []any) Stored {
	var s Stored
	for i := 0; i+1 < len(pairs); i += 2 {
		field, ok1 := pairs[i].(string)
		value, ok2 := pairs[i+1].(string)
		if ok1 && ok2 {
			if s == nil {
				s = Stored{}
			}
			s[field] = value
		}
	}
	return s
}

// MinBackoff is the shortest MIN of a failure backoff, w8y's
// --failure-backoff's and an item's own: below it, a failing item would
// retry in a tight loop.
const MinBackoff = 10 * time.Millisecond

// Check reads value as the setting field, as w8yctl set is given it, and
// returns it in the form that the hash keeps (durations as w8y prints
// them), or an error in the user's words that names the option. A
// schedule is read in UTC without jitter: each worker reads it in its own
// --schedule-timezone, with its --jitter.
func Check(field, value string) (string, error) {
	value = strings.TrimSpace(value)
	switch field {
	case Cooldown, Timeout:
		d, err := duration.Parse(value)
		switch {
		case err != nil:
			return "", fmt.Errorf("%s %q: %s", Option(field), value, err)
		case d < 0:
			return "", fmt.Errorf("%s %q must not be negative", Option(field), value)
		case field == Cooldown && d > 0 && d < time.Millisecond:
			return "", fmt.Errorf("%s %q must be 0 or at least 1ms: Redis keeps expiries in milliseconds", Option(field), value)
		}
		return duration.Format(d), nil
	case FailureBackoff:
		var b finish.Backoff
		if err := b.UnmarshalFlag(value); err != nil {
			return "", fmt.Errorf("%s %q: %s", Option(field), value, err)
		}
		if b.Min == 0 && b.Max == 0 {
			// No backoff for this item, whatever the workers' option.
			return "0", nil
		}
		if b.Min < MinBackoff {
			return "", fmt.Errorf("%s %q: MIN must be at least %s (or 0 for none)", Option(field), value, duration.Format(MinBackoff))
		}
		if b.Max < b.Min {
			return "", fmt.Errorf("%s %q: MAX %s is less than MIN %s", Option(field), value, duration.Format(b.Max), duration.Format(b.Min))
		}
		text, _ := b.MarshalFlag()
		return text, nil
	case Schedule:
		if _, err := finish.ParseCron(value, "UTC", 0); err != nil {
			return "", err
		}
		return value, nil
	}
	return "", fmt.Errorf("%q is not a setting of an item: give %s", field, strings.Join(options(), ", "))
}

// options are the options of w8yctl set, in the order of Fields.
func options() []string {
	var out []string
	for _, f := range Fields {
		out = append(out, Option(f))
	}
	return out
}

// Run is what governs one run of an item: how long its child may run, and
// when the item may run again after it (the cooldown, the schedule and the
// failure backoff that its end sets).
type Run struct {
	// Timeout is --timeout's: 0 means none.
	Timeout  time.Duration
	Schedule finish.Schedule
}

// Defaults are a worker's own options, which an item's settings stand in
// for one by one, with what an item's own schedule is read with.
type Defaults struct {
	Run
	// Zone is --schedule-timezone, and Jitter --jitter: an item's own
	// schedule is read in the worker's zone, with its jitter.
	Zone   string
	Jitter time.Duration
}

// For is the Run of an item whose settings hash holds stored: each setting
// that it holds in place of the worker's own option. An item's cooldown
// stands in for the worker's --schedule too, and its schedule for the
// worker's --cooldown: they are alternatives (were both written by hand,
// the schedule stands). A value that does not read is reported to bad,
// and the worker's option stands in its place.
func (d Defaults) For(stored Stored, bad func(field, value string, err error)) Run {
	run := d.Run
	for _, field := range Fields {
		value, ok := stored[field]
		if !ok {
			continue
		}
		if err := d.apply(&run, field, value); err != nil {
			bad(field, value, err)
		}
	}
	return run
}

// apply sets field of run to value, or returns why value does not read.
func (d Defaults) apply(run *Run, field, value string) error {
	if _, err := Check(field, value); err != nil {
		return err
	}
	switch field {
	case Cooldown:
		c, _ := duration.Parse(strings.TrimSpace(value))
		run.Schedule.Cooldown, run.Schedule.Cron = c, finish.Cron{}
	case Timeout:
		run.Timeout, _ = duration.Parse(strings.TrimSpace(value))
	case FailureBackoff:
		var b finish.Backoff
		_ = b.UnmarshalFlag(strings.TrimSpace(value))
		run.Schedule.Backoff = b
	case Schedule:
		c, err := finish.ParseCron(strings.TrimSpace(value), d.Zone, d.Jitter)
		if err != nil {
			return err
		}
		run.Schedule.Cron, run.Schedule.Cooldown = c, 0
	}
	return nil
}

// Scheduled reports whether an item whose settings hash holds stored runs
// on a schedule, as the take scripts tell it before they know whether its
// values read: its own schedule, or the worker's (workerCron) unless its
// own cooldown stands in for that.
func Scheduled(stored Stored, workerCron bool) bool {
	if _, ok := stored[Schedule]; ok {
		return true
	}
	_, cools := stored[Cooldown]
	return workerCron && !cools
}

// Told tells, once per worker, of each stored value that does not read:
// the worker's option stands in its place, and an item taken every second
// must not fill the log with the same line.
type Told struct {
	Log  zerolog.Logger
	mu   sync.Mutex
	seen map[[3]string]bool
}

// Bad is For's bad for item.
func (t *Told) Bad(item string) func(field, value string, err error) {
	return func(field, value string, err error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		key := [3]string{item, field, value}
		if t.seen[key] {
			return
		}
		if t.seen == nil {
			t.seen = map[[3]string]bool{}
		}
		t.seen[key] = true
		t.Log.Warn().Str("item", clip.Item(item)).Str("setting", field).Str("value", clip.Item(value)).
			Msgf("the item's own %s does not read (%v): this worker's own option stands in for it", Option(field), err)
	}
}
