package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzOptions: whatever a user gives one of w8y's options, parsing answers
// without panicking, and a refusal is a usage error of one line, as w8y's
// bad input is always refused (exit 2, one line on stderr). The seeds are
// the options that take a value of their own kind: durations, counts,
// codes, the URL.
func FuzzOptions(f *testing.F) {
	for _, seed := range []struct{ option, value string }{
		{"--key-expiry", "30"}, {"--key-expiry", "1500ms"}, {"-x", "-1"}, {"--cooldown", "1e400"},
		{"--failure-backoff", "nan"}, {"--idle-wait", "0"}, {"--parallel", "0"}, {"--parallel", "99999999999999999999"},
		{"--success-codes", "0,3,255"}, {"--success-codes", "256"}, {"--redis-url", "redis://w:p%40ss@h:1/x"},
		{"--replica-acks", "-3"}, {"--max-item-length", "1k"}, {"--timeout", "\n"},
	} {
		f.Add(seed.option, seed.value)
	}
	f.Fuzz(func(t *testing.T, option, value string) {
		if !strings.HasPrefix(option, "-") {
			return
		}
		_, err := parseOptions([]string{option, value, "-k", "fuzz", "true"}, io.Discard)
		if err == nil || errors.Is(err, errHelp) {
			return
		}
		if !errors.Is(err, errUsage) {
			t.Errorf("%s %q: %v is not a usage error", option, value, err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %q: the error is more than one line: %q", option, value, err)
		}
	})
}
