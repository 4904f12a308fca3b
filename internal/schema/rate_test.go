package schema

import (
	"strings"
	"testing"
	"time"
)

// TestRateUnmarshal: --fleet-rate takes N/DURATION and nothing else, and
// says in the user's words what is wrong with the rest.
func TestRateUnmarshal(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Rate
		err  string
	}{
		{in: "100/1h", want: Rate{100, time.Hour}},
		{in: "5/2s", want: Rate{5, 2 * time.Second}},
		{in: " 5 / 2s ", want: Rate{5, 2 * time.Second}},
		{in: "1/1500ms", want: Rate{1, 1500 * time.Millisecond}},
		{in: "3/30", want: Rate{3, 30 * time.Second}},
		{in: "1/1d", want: Rate{1, 24 * time.Hour}},
		{in: "1000000/1h", want: Rate{MaxRateStarts, time.Hour}},
		{in: "5", err: `"5" is not a rate: give N/DURATION, at most N starts in any DURATION, such as 100/1h or 5/2s`},
		{in: "", err: `"" is not a rate: give N/DURATION`},
		{in: "0/1s", err: `"0/1s" is not a rate: N must be a whole number of starts from 1 to 1000000`},
		{in: "-1/1s", err: `"-1/1s" is not a rate: N must be a whole number`},
		{in: "2.5/1s", err: `"2.5/1s" is not a rate: N must be a whole number`},
		{in: "1000001/1h", err: `"1000001/1h" is not a rate: N must be a whole number of starts from 1 to 1000000`},
		{in: "x/1s", err: `"x/1s" is not a rate: N must be a whole number`},
		{in: "5/0s", err: `"5/0s" is not a rate: the DURATION after the slash must be at least 1ms and not inf`},
		{in: "5/0", err: `"5/0" is not a rate: the DURATION after the slash must be at least 1ms`},
		{in: "5/-1s", err: `"5/-1s" is not a rate: the DURATION after the slash must be at least 1ms`},
		{in: "5/100us", err: `"5/100us" is not a rate: the DURATION after the slash must be at least 1ms`},
		{in: "5/inf", err: `"5/inf" is not a rate: the DURATION after the slash must be at least 1ms and not inf`},
		{in: "5/x", err: `"5/x" is not a rate: after the slash, "x" is neither seconds nor a duration`},
		{in: "5/1s/2", err: `"5/1s/2" is not a rate: after the slash, "1s/2" is neither seconds nor a duration`},
	} {
		var got Rate
		err := got.UnmarshalFlag(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%q: %+v, %v; want %+v", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.err)):
			t.Errorf("%q: %v; want %s...", tt.in, err, tt.err)
		}
	}
}

// TestRateString: a rate is shown as a user writes it, and its record
// reads back.
func TestRateString(t *testing.T) {
	for _, tt := range []struct {
		rate Rate
		want string
	}{
		{Rate{5, 2 * time.Second}, "5/2s"},
		{Rate{100, time.Hour}, "100/1h"},
		{Rate{1, 90 * time.Minute}, "1/1h30m"},
		{Rate{3, time.Minute}, "3/1m"},
		{Rate{1, 1500 * time.Millisecond}, "1/1.5s"},
		{Rate{}, ""},
	} {
		if got := tt.rate.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.rate, got, tt.want)
		}
		if tt.rate.IsZero() {
			continue
		}
		if back, ok := ParseRate(tt.rate.Record()); !ok || back != tt.rate {
			t.Errorf("%q reads back as %+v, %v", tt.rate.Record(), back, ok)
		}
	}
	for _, bad := range []string{"", "5", "0/1000", "5/0", "x/1", "5/x"} {
		if r, ok := ParseRate(bad); ok {
			t.Errorf("record %q read as %+v", bad, r)
		}
	}
}
