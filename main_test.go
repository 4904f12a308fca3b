package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redisconn"
)

// errorsIs is errors.Is, named for table tests that compare against nil too.
func errorsIs(err, target error) bool { return errors.Is(err, target) }

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{fmt.Errorf("wrap: %w", ErrLockLost), exitLockLost},
		{fmt.Errorf("%w: %q", proc.ErrNotExecutable, "x"), exitNotExecutable},
		{fmt.Errorf("%w: %q", proc.ErrNotFound, "x"), exitNotFound},
		{usageError("bad"), exitFailure},
		{redisconn.Wrap("read", errors.New("dial tcp: refused")), exitFailure},
		{redisconn.Wrap("read", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")), exitFailure},
		{errors.New("anything else"), exitFailure},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
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
		got := run(tt.args, &stdout, &stderr)
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
