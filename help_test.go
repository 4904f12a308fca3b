package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/cli"
)

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"--version"}} {
		var out strings.Builder
		_, err := parseOptions(args, &out)
		if !errors.Is(err, errHelp) {
			t.Errorf("%v: error %v, want errHelp", args, err)
		}
		if out.Len() == 0 {
			t.Errorf("%v printed nothing", args)
		}
	}
	var out strings.Builder
	_, _ = parseOptions([]string{"--help"}, &out)
	help := out.String()
	for _, want := range []string{"--redis-url", "W8Y_KEY_PREFIX", "Redis:\n", "Continuous mode:\n", "Logging:\n",
		"--log-format=console|json", "A DURATION is a number of seconds", "30d", "Exit codes:", "122", "124", "125", "126", "127"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	// --kill-after starts out as unsetDuration, which go-flags would show
	// as its default: the description says what the default is.
	if strings.Contains(help, "-2562047h") {
		t.Error("--help shows --kill-after's internal unset value as its default")
	}
	// Readable on an 80-column terminal, and short enough to read.
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	for _, line := range lines {
		if len(line) > 80 {
			t.Errorf("a %d-column line: %q", len(line), line)
		}
	}
	// 123 lines since --status's filters (--state, --match, --limit) came;
	// 127 since --schedule, --schedule-timezone and --jitter; 139 since
	// --timeout-signal, --drain-timeout, --item, --wait and --ignore-pause
	// (two lines each, and the exit code 121); 141 since
	// --fleet-max-running; 143 since --unsafe-item-in-script; 147 since
	// the exit code 120; 148 since --allow-eviction; 150 since --fleet-rate;
	// 152 since --first-run-now.
	if len(lines) > 152 {
		t.Errorf("--help is %d lines long", len(lines))
	}
}

// TestVariablesAreNamedAfterOptions: --help says that every option's
// variable is named after it (W8Y_ and the long name in capitals), which
// holds for every option that has a variable.
func TestVariablesAreNamedAfterOptions(t *testing.T) {
	for _, opt := range cli.AllOptions(newParser(&Options{})) {
		if opt.EnvDefaultKey == "" {
			continue
		}
		if want := "W8Y_" + strings.ToUpper(strings.ReplaceAll(opt.LongName, "-", "_")); opt.EnvDefaultKey != want {
			t.Errorf("--%s has the variable %s, want %s", opt.LongName, opt.EnvDefaultKey, want)
		}
	}
}

func TestVersionShowsTheCommit(t *testing.T) {
	var out strings.Builder
	if _, err := parseOptions([]string{"--version"}, &out); !errors.Is(err, errHelp) {
		t.Fatal(err)
	}
	v, c := buildVersion()
	if want := "w8y " + v + " (commit " + c + ")\n"; out.String() != want {
		t.Errorf("--version printed %q, want %q", out.String(), want)
	}
}

func TestManPage(t *testing.T) {
	var out strings.Builder
	if _, err := parseOptions([]string{"--man-page"}, &out); !errors.Is(err, errHelp) {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{".TH w8y 1", ".SH SYNOPSIS", ".SH DESCRIPTION", ".SH OPTIONS", ".SS Continuous mode",
		`\-\-state\-ttl`, `\-\-metrics\-addr`, `\-\-cooldown`, `\-\-parallel`, `\-\-keep\-output`, `\fB123\fP`, `\-\-redis\-cluster`, `\-\-replica\-acks`,
		`\fB\-\-log\-format\fP=\fIconsole|json\fP`, "Choices: console, json.", ".SH ENVIRONMENT", ".SH EXIT STATUS", `\fB125\fP`} {
		if !strings.Contains(page, want) {
			t.Errorf("the man page lacks %q", want)
		}
	}
	// Each option names its variable; none shows a variable as a default,
	// as go-flags' own page did.
	for _, opt := range cli.AllOptions(newParser(&Options{})) {
		if opt.EnvDefaultKey != "" && !opt.Hidden && !strings.Contains(page, "Variable: "+cli.Troff(opt.EnvDefaultKey)+".") {
			t.Errorf("the man page does not name %s", opt.EnvDefaultKey)
		}
	}
	if strings.Contains(page, "<default: $") {
		t.Error("the man page shows a variable as a default")
	}
	// It is hidden from --help, which is for people, not for make man.
	out.Reset()
	_, _ = parseOptions([]string{"--help"}, &out)
	if strings.Contains(out.String(), "man-page") {
		t.Error("--help shows --man-page")
	}
}

// TestShellCompletion: w8y __complete WORDS... prints the completions of
// the last word: w8y's options while they are being typed, an option's
// choices, and nothing (so that bash completes file names) for a free
// value, the executable and everything after it.
func TestShellCompletion(t *testing.T) {
	tests := []struct {
		words []string
		want  []string
	}{
		{[]string{"--sta"}, []string{"--state", "--state-ttl", "--status"}},
		{[]string{"-k", "work", "--conti"}, []string{"--continuous"}},
		{[]string{"-ck", "work", "--conti"}, []string{"--continuous"}},
		{[]string{"--no-"}, []string{"--no-events", "--no-log-timestamps", "--no-work-exit-code"}},
		{[]string{"--log-format", ""}, []string{"console", "json"}},
		{[]string{"--log-level", "w"}, []string{"warn"}},
		{[]string{"--log-level=e"}, []string{"--log-level=error"}},
		{[]string{"-f", ""}, nil},
		{[]string{"--key-prefix", "--"}, nil},
		{[]string{"-k", "x", "sh", "--con"}, nil},
		{[]string{"-k", "x", "--", "--con"}, nil},
		{[]string{"-k", "x", "s"}, nil},
	}
	for _, tt := range tests {
		var out strings.Builder
		_, err := parseOptions(append([]string{completeArg}, tt.words...), &out)
		if !errors.Is(err, errHelp) {
			t.Errorf("%q: error %v, want errHelp", tt.words, err)
		}
		if got := strings.Fields(out.String()); !slices.Equal(got, tt.want) {
			t.Errorf("%q completed to %q, want %q", tt.words, got, tt.want)
		}
	}
}

// TestStrayCompletionVariable: GO_FLAGS_COMPLETION in the environment
// would make go-flags complete instead of parsing, and a real run do
// nothing; it is refused in words instead.
func TestStrayCompletionVariable(t *testing.T) {
	t.Setenv("GO_FLAGS_COMPLETION", "1")
	_, err := parseOptions([]string{"-k", "work", "true"}, io.Discard)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "GO_FLAGS_COMPLETION is set") {
		t.Errorf("error %v", err)
	}
}
