package finish

import (
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
		if got := Delay(tt.failures, b, tt.factor); got != tt.want {
			t.Errorf("Delay(%d, %s) = %s, want %s", tt.failures, tt.factor, got, tt.want)
		}
	}
	if got := Delay(1, Backoff{Min: time.Millisecond, Max: time.Millisecond}, "0.75"); got != time.Millisecond {
		t.Errorf("a delay floored to 0ms = %s, want at least 1ms, which PX accepts", got)
	}
}

func TestJitterFactorStaysWithinAQuarterBelow(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		text := JitterFactor()
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || f < 1-backoffJitter || f > 1 {
			t.Fatalf("JitterFactor() = %q, want a number in [0.75, 1]", text)
		}
		seen[text] = true
	}
	if len(seen) < 100 {
		t.Errorf("only %d distinct factors in 1000 draws: no jitter", len(seen))
	}
}
