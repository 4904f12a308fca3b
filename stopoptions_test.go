package main

import (
	"io"
	"strings"
	"syscall"
	"testing"
)

// TestParseSignal: --timeout-signal takes a name with or without SIG, in
// any case, or a number, as kill(1) and timeout(1) do, and nothing else.
func TestParseSignal(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want syscall.Signal
	}{
		{"TERM", syscall.SIGTERM},
		{"SIGTERM", syscall.SIGTERM},
		{"15", syscall.SIGTERM},
		{"term", syscall.SIGTERM},
		{"sigUsr1", syscall.SIGUSR1},
		{" INT ", syscall.SIGINT},
		{"9", syscall.SIGKILL},
		{"0", 0},
		{"-1", 0},
		{"65", 0},
		{"", 0},
		{"SIG", 0},
		{"NOPE", 0},
		{"SIGSIGTERM", 0},
	} {
		got, err := parseSignal(tt.in)
		if got != tt.want || (err == nil) != (tt.want != 0) {
			t.Errorf("parseSignal(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// TestStopOptions: the defaults, and the bad values refused in the user's
// words.
func TestStopOptions(t *testing.T) {
	opts, err := parseOptions([]string{"true"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if syscall.Signal(opts.TimeoutSignal) != syscall.SIGTERM || opts.drain() != 0 {
		t.Errorf("defaults: --timeout-signal %v, --drain-timeout %v; want SIGTERM and 0", opts.TimeoutSignal, opts.drain())
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout-signal", "HUPP", "true"}, `--timeout-signal "HUPP": "HUPP" is not a signal`},
		{[]string{"--drain-timeout", "-1s", "true"}, "--drain-timeout must not be negative"},
	} {
		_, err := parseOptions(tt.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestOneItemOptions: --wait and --ignore-pause go with --item, which runs
// one item once, and bad values are refused in the user's words.
func TestOneItemOptions(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--wait", "1s", "true"}, "--wait and --ignore-pause go with --item"},
		{[]string{"--ignore-pause", "true"}, "--wait and --ignore-pause go with --item"},
		{[]string{"--item", "a", "-c", "true"}, "--item runs one named item once"},
		{[]string{"--item", "a", "--parallel", "2", "true"}, "--item runs one named item once"},
		{[]string{"--item", "a", "--wait", "-1s", "true"}, "--wait must not be negative"},
		{[]string{"--item", "a", "--wait", "1s", "--ignore-pause", "true"}, ""},
		// An empty NAME (an unset "$NAME") is no --item: refused, not read
		// as a run of the list's next item.
		{[]string{"--item", "", "true"}, `--item "": an empty name is no item: give the name of the item to run`},
		{[]string{"--item=", "true"}, "an empty name is no item"},
	} {
		_, err := parseOptions(tt.args, io.Discard)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%q: got %v, want %q", tt.args, err, tt.want)
		}
	}
}
