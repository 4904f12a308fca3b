package duration

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	const day = 24 * time.Hour
	type parseCase struct {
		in   string
		want time.Duration
		err  string // what the error says; "" for none
	}
	tests := []parseCase{
		// Seconds, as the first w8y took them.
		{in: "5", want: 5 * time.Second},
		{in: "0.5", want: 500 * time.Millisecond},
		{in: ".5", want: 500 * time.Millisecond},
		{in: "0", want: 0},
		{in: "+2", want: 2 * time.Second},
		{in: "-3", want: -3 * time.Second},
		{in: "1e-3", want: time.Millisecond},
		{in: "1E2", want: 100 * time.Second},
		{in: "0.1", want: 100 * time.Millisecond},
		{in: "0.3", want: 300 * time.Millisecond},
		{in: "1.0000000004", want: time.Second},
		{in: "1.0000000006", want: time.Second + 1},
		// Go's durations, and days.
		{in: "1500ms", want: 1500 * time.Millisecond},
		{in: "2h45m", want: 2*time.Hour + 45*time.Minute},
		{in: "1h0.5m", want: time.Hour + 30*time.Second},
		{in: "-1.5s", want: -1500 * time.Millisecond},
		{in: "3us", want: 3 * time.Microsecond},
		{in: "3µs", want: 3 * time.Microsecond},
		{in: "30d", want: 30 * day},
		{in: "1.5d", want: 36 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "0s", want: 0},
		// A positive length never rounds to zero, which means "none" to
		// --timeout and --cooldown.
		{in: "1e-10", want: 1},
		{in: "0.4ns", want: 1},
		{in: "-0.4ns", want: -1},
		{in: "1e-99999999999", want: 1},
		{in: "0e99999999999", want: 0},
		// Too long to count, or infinite: Forever, never a wrapped-round
		// negative.
		{in: "1e10", want: Forever},
		{in: "99999999999999999999", want: Forever},
		{in: "1e300", want: Forever},
		{in: "1e99999999999", want: Forever},
		{in: "292y", err: "neither seconds nor a duration"},
		{in: "106752d", want: Forever},
		{in: "106751d", want: 106751 * day},
		{in: "2562047h47m16.854775807s", want: Forever},
		{in: "2562047h47m16.854775806s", want: Forever - 1},
		{in: "inf", want: Forever},
		{in: "+Inf", want: Forever},
		{in: "Infinity", want: Forever},
		{in: "-inf", want: -Forever},
		{in: "-1e300", want: -Forever},
		// Refused.
		{in: "nan", err: `"nan" is not a length of time`},
		{in: "NaN", err: "not a length of time"},
	}
	// Neither seconds nor a Go duration, nor days: each is refused in the
	// same words.
	for _, in := range []string{"", "abc", "5 s", " 5", "--5", "1h-5m", "1e", "1e3ms", "0x10", "1.2.3s", ".s", "5w"} {
		tests = append(tests, parseCase{in: in, err: "neither seconds nor a duration"})
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("Parse(%q) = %v, %v; want an error saying %q", tt.in, got, err, tt.err)
		}
	}
}

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{Forever: "inf", -Forever: "-inf", 1500 * time.Millisecond: "1.5s", 0: "0s"} {
		if got := Format(d); got != want {
			t.Errorf("Format(%d) = %q, want %q", d, got, want)
		}
	}
}

func TestFlag(t *testing.T) {
	var d Flag
	if err := d.UnmarshalFlag("1.5"); err != nil || time.Duration(d) != 1500*time.Millisecond {
		t.Errorf("UnmarshalFlag(1.5) = %s, %v", time.Duration(d), err)
	}
	if s, _ := d.MarshalFlag(); s != "1.5s" {
		t.Errorf("MarshalFlag = %q", s)
	}
	if err := d.UnmarshalFlag("soon"); err == nil {
		t.Error("UnmarshalFlag(soon) succeeded")
	}
	if err := d.UnmarshalFlag("inf"); err != nil || d.String() != "inf" {
		t.Errorf("UnmarshalFlag(inf) = %s, %v", d, err)
	}
}

func TestOptional(t *testing.T) {
	var o Optional
	if o.Given {
		t.Error("a zero Optional says it was given")
	}
	if err := o.UnmarshalFlag("nan"); err == nil || o.Given {
		t.Errorf("UnmarshalFlag(nan) = %v, given %v", err, o.Given)
	}
	// Whatever the value, even one that looks like a default, it was given.
	if err := o.UnmarshalFlag("-inf"); err != nil || !o.Given || time.Duration(o.Flag) != -Forever {
		t.Errorf("UnmarshalFlag(-inf) = %v, given %v, %s", err, o.Given, o.Flag)
	}
}
