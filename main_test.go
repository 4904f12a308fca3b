package main

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/take"
)

func TestExitCode(t *testing.T) {
	const noWork = 3
	tests := []struct {
		err     error
		want    int
		explain bool
	}{
		{nil, exitOK, false},
		{&childExitError{end: finish.End{Item: "a", Exit: proc.Exit{Code: 7}}}, 7, false},
		{fmt.Errorf("wrapped: %w", &childExitError{end: finish.End{Exit: proc.Exit{Code: 143, Signal: syscall.SIGTERM}}}), 143, false},
		{jobctl.StopError{Signal: syscall.SIGINT}, 130, false},
		{take.ErrNoWork, noWork, false},
		{fmt.Errorf("wrap: %w", lease.ErrLost), exitLockLost, false},
		{fmt.Errorf("%w: x", ErrTimeout), exitTimeout, false},
		{fmt.Errorf("%w: %q", proc.ErrNotExecutable, "x"), exitNotExecutable, true},
		{fmt.Errorf("%w: %q", proc.ErrNotFound, "x"), exitNotFound, true},
		{usageError("bad"), exitFailure, true},
		{redisconn.Wrap("read", errors.New("dial tcp: refused")), exitFailure, true},
		{redisconn.Wrap("read", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")), exitFailure, true},
		{&schema.SchemaError{Keys: schema.Keys{Prefix: "w:"}, Found: "2"}, exitFailure, true},
		{errors.New("anything else"), exitFailure, true},
	}
	for _, tt := range tests {
		if got, explain := exitCode(tt.err, noWork); got != tt.want || explain != tt.explain {
			t.Errorf("exitCode(%v) = %d, %v; want %d, %v", tt.err, got, explain, tt.want, tt.explain)
		}
	}
}

// TestExitTableHasEveryCode: every code that exitCode can make is in the
// table that --help and the man page show.
func TestExitTableHasEveryCode(t *testing.T) {
	var codes []string
	for _, st := range exitStatuses {
		codes = append(codes, st.Code)
	}
	for _, code := range []int{exitOK, exitLockLost, exitTimeout, exitFailure, exitNotExecutable, exitNotFound} {
		if !slices.Contains(codes, fmt.Sprint(code)) {
			t.Errorf("exit code %d is not in the table %q", code, codes)
		}
	}
}

// TestDocsExitCodes: the reference's table of exit codes lists the codes
// of the one table, in its order.
func TestDocsExitCodes(t *testing.T) {
	section := doctest.Section(t, "docs/reference.md", "## Exit codes")
	var got []string
	row := regexp.MustCompile("(?m)^\\| `?([0-9N+]+)`? \\|")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		got = append(got, m[1])
	}
	var want []string
	for _, st := range exitStatuses {
		want = append(want, st.Code)
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/reference.md's exit codes %q, want %q as in exitStatuses", got, want)
	}
}

// TestDocsLinks: every relative link of the README and of the pages in
// docs/ leads to a file that exists and, with an #anchor, to a heading of
// that page, as GitHub names them; and the README links to every page.
func TestDocsLinks(t *testing.T) {
	problems, err := doctest.Links(doctest.Root(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestRunBadInput(t *testing.T) {
	tests := []struct {
		args []string
		want int
		line string
	}{
		{[]string{"--bogus", "true"}, exitFailure, "unknown flag"},
		{[]string{}, exitFailure, "missing executable"},
		{[]string{"-u", "http://localhost", "true"}, exitFailure, "invalid URL scheme"},
		{[]string{"-u", "redis://user:hunter2@host:notaport", "true"}, exitFailure, "invalid port"},
		{[]string{"w8y-no-such-command"}, exitNotFound, "executable not found"},
	}
	for _, tt := range tests {
		var stdout, stderr strings.Builder
		got := run(tt.args, nil, &stdout, &stderr)
		if got != tt.want {
			t.Errorf("%q: exit %d, want %d", tt.args, got, tt.want)
		}
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "w8y: ") || !strings.Contains(lines[0], tt.line) {
			t.Errorf("%q: stderr %q, want one line containing %q", tt.args, stderr.String(), tt.line)
		}
		if strings.Contains(stderr.String(), "hunter2") {
			t.Errorf("%q: the password leaked: %q", tt.args, stderr.String())
		}
	}
}
