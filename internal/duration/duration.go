// Package duration is how w8y's options take a length of time: a number of
// seconds ("5", "0.5", "1e-3"), because the first w8y took --key-expiry in
// whole seconds, or numbers with units as Go writes durations, with days
// added ("1500ms", "2h45m", "30d").
//
// Every value means what it says or is refused: a length too long to count
// in nanoseconds (about 292 years) or infinite becomes Forever, which the
// options that bound a wait read as "effectively never", instead of wrapping
// round to a negative value; a positive length shorter than a nanosecond is
// one nanosecond, never zero, which several options read as "none".
//
// Jitter spreads such a length, for the pauses that many workers take at
// once, without wrapping Forever round either.
package duration

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// Forever is the longest duration there is, about 292 years: what "inf" and
// every longer value become. It is effectively never.
const Forever = time.Duration(math.MaxInt64)

// Units lists the units that Parse takes, for --help.
const Units = "ns, us, ms, s, m, h, d"

// units are the lengths of the units that Parse takes, in nanoseconds.
var units = map[string]int64{
	"ns": 1,
	"us": int64(time.Microsecond),
	"µs": int64(time.Microsecond), // U+00B5, as Go writes it
	"μs": int64(time.Microsecond), // U+03BC
	"ms": int64(time.Millisecond),
	"s":  int64(time.Second),
	"m":  int64(time.Minute),
	"h":  int64(time.Hour),
	"d":  24 * int64(time.Hour),
}

// precision is the mantissa of the arithmetic: far more than the 63 bits of
// a duration, so that rounding to a nanosecond happens once, at the end.
const precision = 256

// errNaN is Parse's answer to "nan", which strconv.ParseFloat would take.
var errNaN = errors.New("not a number")

// Parse reads a length of time given as a number of seconds or as numbers
// with units (see Units); a sign, if any, comes first. It rounds to the
// nearest nanosecond, but a length that is not zero stays at least a
// nanosecond long, and one longer than Forever (or infinite) is Forever.
// Negative lengths come back as such: each option says whether it takes them.
func Parse(value string) (time.Duration, error) {
	ns, err := parse(value)
	if errors.Is(err, errNaN) {
		return 0, fmt.Errorf("%q is not a length of time", value)
	}
	if err != nil {
		return 0, fmt.Errorf("%q is neither seconds nor a duration such as 1500ms or 30d", value)
	}
	return round(ns), nil
}

// parse returns value in nanoseconds, exactly or to far more than a
// nanosecond's precision.
func parse(value string) (*big.Float, error) {
	body := strings.TrimLeft(value, "+-")
	if len(value)-len(body) > 1 {
		return nil, errors.New("more than one sign")
	}
	negative := strings.HasPrefix(value, "-")
	var ns *big.Float
	var err error
	switch {
	case strings.EqualFold(body, "nan"):
		return nil, errNaN
	case strings.EqualFold(body, "inf"), strings.EqualFold(body, "infinity"):
		ns = new(big.Float).SetInf(false)
	case isSeconds(body):
		ns, err = decimal(body)
		if err == nil {
			ns.Mul(ns, big.NewFloat(float64(time.Second)))
		}
	default:
		ns, err = withUnits(body)
	}
	if err != nil {
		return nil, err
	}
	if negative {
		ns.Neg(ns)
	}
	return ns, nil
}

// isSeconds reports whether s is a plain number: digits with an optional
// fraction and exponent, and no unit.
func isSeconds(s string) bool {
	mantissa, exponent, hasExponent := strings.Cut(strings.ToLower(s), "e")
	if hasExponent {
		exponent = strings.TrimLeft(exponent, "+-")
		if exponent == "" || strings.Trim(exponent, "0123456789") != "" {
			return false
		}
	}
	whole, fraction, _ := strings.Cut(mantissa, ".")
	return whole+fraction != "" && strings.Trim(whole+fraction, "0123456789") == ""
}

// decimal reads an unsigned decimal number, with an exponent if any.
func decimal(s string) (*big.Float, error) {
	// big.Float keeps its exponent in 32 bits, so "1e99999999999" is an
	// error rather than a number it cannot hold: such a number is Forever,
	// or for a negative exponent as good as zero.
	if mantissa, exponent, ok := strings.Cut(strings.ToLower(s), "e"); ok && len(strings.TrimLeft(exponent, "+-0")) > 6 {
		f, err := decimal(mantissa)
		switch {
		case err != nil || f.Sign() == 0:
			return f, err
		case strings.HasPrefix(exponent, "-"):
			return new(big.Float).SetMantExp(big.NewFloat(1), -1<<20), nil
		}
		return new(big.Float).SetInf(false), nil
	}
	f, _, err := big.ParseFloat(s, 10, precision, big.ToNearestEven)
	return f, err
}

// withUnits reads one or more unsigned numbers, each followed by a unit, as
// in "2h45m" or "1.5d", and returns their sum in nanoseconds.
func withUnits(s string) (*big.Float, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	sum := new(big.Float).SetPrec(precision)
	for s != "" {
		n := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
		if n <= 0 {
			return nil, errors.New("no number before a unit")
		}
		number := s[:n]
		s = s[n:]
		end := strings.IndexFunc(s, func(r rune) bool { return r == '.' || r >= '0' && r <= '9' })
		if end < 0 {
			end = len(s)
		}
		unit, ok := units[s[:end]]
		if !ok || strings.Count(number, ".") > 1 || number == "." {
			return nil, errors.New("bad number or unit")
		}
		s = s[end:]
		f, _, err := big.ParseFloat(number, 10, precision, big.ToNearestEven)
		if err != nil {
			return nil, err
		}
		sum.Add(sum, f.Mul(f, new(big.Float).SetInt64(unit)))
	}
	return sum, nil
}

// round turns ns into a Duration: the nearest nanosecond, at least one for
// a length that is not zero, and at most Forever either way.
func round(ns *big.Float) time.Duration {
	if ns.Sign() == 0 {
		return 0
	}
	limit := new(big.Float).SetInt64(math.MaxInt64)
	abs := new(big.Float).Abs(ns)
	if abs.IsInf() || abs.Cmp(limit) >= 0 {
		return time.Duration(ns.Sign()) * Forever
	}
	abs.Add(abs, big.NewFloat(0.5))
	whole, _ := abs.Int64() // truncates: abs+0.5 truncated is abs rounded
	whole = max(whole, 1)
	return time.Duration(int64(ns.Sign()) * whole)
}

// Format writes d as Go does, but Forever and its negative as "inf" and
// "-inf", as they were most likely given.
func Format(d time.Duration) string {
	switch d {
	case Forever:
		return "inf"
	case -Forever:
		return "-inf"
	}
	return d.String()
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
func (d Flag) MarshalFlag() (string, error) { return d.String(), nil }

// String is Format of d, for messages about options.
func (d Flag) String() string { return Format(time.Duration(d)) }

// Optional is a duration option whose default depends on other options, so
// it must know whether it was given at all (on the command line or in the
// environment), whatever value it was given.
type Optional struct {
	Flag
	Given bool
}

// UnmarshalFlag implements flags.Unmarshaler.
func (o *Optional) UnmarshalFlag(value string) error {
	if err := o.Flag.UnmarshalFlag(value); err != nil {
		return err
	}
	o.Given = true
	return nil
}
