package main

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 10 * time.Second}
	tests := []struct {
		failures int64
		factor   string
		want     time.Duration
	}{
		{1, "1", time.Second},
		{2, "1", 2 * time.Second},
		{3, "1", 4 * time.Second},
		{4, "1", 8 * time.Second},
		{5, "1", 10 * time.Second}, // 16s, capped at MAX
		{60, "1", 10 * time.Second},
		{5000, "1", 10 * time.Second}, // 2^4999 is +Inf, still capped
		{0, "1", time.Second},         // a count reset meanwhile is a first failure
		{-3, "1", time.Second},
		{1, "0.75", 750 * time.Millisecond},
		{3, "0.8123", 3249 * time.Millisecond}, // 4000 x 0.8123 = 3249.2, floored
		{5, "0.75", 7500 * time.Millisecond},   // jitter applies below MAX too
		{1, "junk", time.Second},
	}
	for _, tt := range tests {
		if got := backoffDelay(tt.failures, b, tt.factor); got != tt.want {
			t.Errorf("backoffDelay(%d, %s) = %s, want %s", tt.failures, tt.factor, got, tt.want)
		}
	}
	if got := backoffDelay(1, Backoff{Min: time.Millisecond, Max: time.Millisecond}, "0.75"); got != time.Millisecond {
		t.Errorf("a delay floored to 0ms = %s, want at least 1ms, which PX accepts", got)
	}
}

func TestJitterFactorStaysWithinAQuarterBelow(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		text := jitterFactor()
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || f < 1-backoffJitter || f > 1 {
			t.Fatalf("jitterFactor() = %q, want a number in [0.75, 1]", text)
		}
		seen[text] = true
	}
	if len(seen) < 100 {
		t.Errorf("only %d distinct factors in 1000 draws: no jitter", len(seen))
	}
}

func TestClassify(t *testing.T) {
	codes := []int{0, 3}
	tests := []struct {
		exit    ChildExit
		err     error
		stopped bool
		want    result
	}{
		{ChildExit{Code: 0}, nil, false, resultSuccess},
		{ChildExit{Code: 3}, nil, false, resultSuccess},
		{ChildExit{Code: 1}, nil, false, resultFailure},
		{ChildExit{Code: 137}, nil, false, resultFailure},
		{ChildExit{Code: 143}, nil, true, resultInterrupted},
		{ChildExit{Code: 0}, nil, true, resultSuccess}, // it finished its work
		{ChildExit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), false, resultTimeout},
		{ChildExit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), true, resultTimeout},
		{ChildExit{Code: 0}, fmt.Errorf("%w: x", ErrLockLost), false, resultLockLost},
		{ChildExit{}, errStopped, true, resultInterrupted},
		{ChildExit{}, fmt.Errorf("%w: gone", ErrNotFound), false, resultFailure},
		{ChildExit{}, errors.New("anything else"), false, resultFailure},
	}
	for _, tt := range tests {
		if got := classify(tt.exit, tt.err, codes, tt.stopped); got != tt.want {
			t.Errorf("classify(%+v, %v, stopped %v) = %s, want %s", tt.exit, tt.err, tt.stopped, got, tt.want)
		}
	}
	for _, r := range []result{resultFailure, resultTimeout, resultLockLost} {
		if !r.failed() {
			t.Errorf("%s does not count as failed", r)
		}
	}
	for _, r := range []result{resultSuccess, resultInterrupted} {
		if r.failed() {
			t.Errorf("%s counts as failed", r)
		}
	}
}
