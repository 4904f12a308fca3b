package settings

import (
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/finish"
)

// TestCheck: what w8yctl set stores of each value, and the one line that
// refuses a value that does not read.
func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		field, value, want, err string
	}{
		{Cooldown, "1h", "1h0m0s", ""},
		{Cooldown, " 90s ", "1m30s", ""},
		{Cooldown, "0", "0s", ""},
		{Cooldown, "1us", "", "must be 0 or at least 1ms"},
		{Cooldown, "-1s", "", "must not be negative"},
		{Cooldown, "soon", "", `--cooldown "soon"`},
		{Timeout, "2h", "2h0m0s", ""},
		{Timeout, "0", "0s", ""},
		{Timeout, "-5m", "", "--timeout \"-5m\" must not be negative"},
		{FailureBackoff, "5s", "5s,50s", ""},
		{FailureBackoff, "5s,1m", "5s,1m0s", ""},
		{FailureBackoff, "0", "0", ""},
		{FailureBackoff, "1ms", "", "MIN must be at least 10ms"},
		{FailureBackoff, "5s,1s", "", "MAX 1s is less than MIN 5s"},
		{Schedule, "0 * * * *", "0 * * * *", ""},
		{Schedule, "@daily", "@daily", ""},
		{Schedule, "every hour", "", "is not a cron expression"},
		{Schedule, "@every 5m", "", "give --cooldown instead"},
		{"colour", "blue", "", `"colour" is not a setting of an item: give --cooldown, --timeout, --failure-backoff, --schedule`},
	} {
		got, err := Check(tt.field, tt.value)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("Check(%s, %q) = %q, %v; want %q", tt.field, tt.value, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "\n")):
			t.Errorf("Check(%s, %q) = %q, %v; want one line with %q", tt.field, tt.value, got, err, tt.err)
		}
	}
}

// TestFor: each setting of an item stands in for the worker's option; a
// cooldown and a schedule stand in for each other; a value that does not
// read is reported, and the worker's option stands.
func TestFor(t *testing.T) {
	hourly, err := finish.ParseCron("0 * * * *", "Europe/Paris", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	daily, err := finish.ParseCron("@daily", "Europe/Paris", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	worker := Defaults{
		Run:  Run{Timeout: time.Minute, Schedule: finish.Schedule{Cron: daily, Backoff: finish.Backoff{Min: time.Second, Max: 10 * time.Second}}},
		Zone: "Europe/Paris", Jitter: time.Minute,
	}
	for _, tt := range []struct {
		name   string
		stored Stored
		want   func(Run) bool
		bad    string
	}{
		{"none", nil, func(r Run) bool { return r.Timeout == time.Minute && r.Schedule.Cron.Expr == "@daily" }, ""},
		{"hourly, a longer timeout", Stored{Schedule: "0 * * * *", Timeout: "2h0m0s"}, func(r Run) bool {
			return r.Timeout == 2*time.Hour && r.Schedule.Cron.Expr == "0 * * * *" && r.Schedule.Cron.Zone.String() == "Europe/Paris" &&
				r.Schedule.Cron.Offset("x") == hourly.Offset("x") && r.Schedule.Backoff.Min == time.Second
		}, ""},
		{"a cooldown in place of the schedule", Stored{Cooldown: "1h0m0s"}, func(r Run) bool {
			return !r.Schedule.Cron.Set() && r.Schedule.Cooldown == time.Hour
		}, ""},
		{"no backoff", Stored{FailureBackoff: "0"}, func(r Run) bool { return r.Schedule.Backoff == finish.Backoff{} }, ""},
		{"a value written by hand", Stored{Timeout: "ten minutes", Cooldown: "5s"}, func(r Run) bool {
			return r.Timeout == time.Minute && r.Schedule.Cooldown == 5*time.Second
		}, Timeout},
	} {
		var bad []string
		got := worker.For(tt.stored, func(field, value string, err error) {
			if err == nil || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %s %q reported without one line of error: %v", tt.name, field, value, err)
			}
			bad = append(bad, field)
		})
		if !tt.want(got) {
			t.Errorf("%s: For(%v) = %+v", tt.name, tt.stored, got)
		}
		if strings.Join(bad, ",") != tt.bad {
			t.Errorf("%s: reported %q, want %q", tt.name, bad, tt.bad)
		}
	}
}

// TestStoredString: the settings as w8yctl shows them, in the order of
// Fields, a cron expression quoted as a shell would need it, and what a
// hand wrote that a terminal would act on escaped.
func TestStoredString(t *testing.T) {
	s := Stored{Schedule: "0 * * * *", Timeout: "2h0m0s", "colour": "blue"}
	if got, want := s.String(), "--timeout 2h0m0s --schedule '0 * * * *' --colour blue"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	// Written by hand: what a terminal would act on shows escaped.
	if got, want := (Stored{Timeout: "\x1b[31mred", Cooldown: "it's"}).String(), `--cooldown "it's" --timeout "\x1b[31mred"`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
