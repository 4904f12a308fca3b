// Package duration is how w8y's options take a length of time: a number of
// seconds ("5", "0.5"), because the first w8y took --key-expiry in whole
// seconds, or a Go duration ("1500ms", "2h45m").
package duration

import (
	"fmt"
	"strconv"
	"time"
)

// Parse reads a duration given as seconds or as a Go duration.
func Parse(value string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(value, 64); err == nil {
		return time.Duration(secs * float64(time.Second)), nil
	}
	parsed, err := time.ParseDuration(value)
	if err != nil {
		return 0, fmt.Errorf("%q is neither seconds nor a duration such as 1500ms", value)
	}
	return parsed, nil
}

// Flag is a duration option (go-flags reads it with Parse).
type Flag time.Duration

// UnmarshalFlag implements flags.Unmarshaler.
func (d *Flag) UnmarshalFlag(value string) error {
	parsed, err := Parse(value)
	if err != nil {
		return err
	}
	*d = Flag(parsed)
	return nil
}

// MarshalFlag implements flags.Marshaler, so --help shows defaults readably.
func (d Flag) MarshalFlag() (string, error) { return time.Duration(d).String(), nil }
