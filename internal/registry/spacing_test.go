package registry

import (
	"testing"
	"time"
)

// TestLookInterval: a small fleet's workers look every base (w8y's is
// --idle-wait, at most 100ms); a larger one's space their looks by the
// fleet's size, so that the fleet as a whole looks about every 50ms (or
// every base, when that is shorter), however many workers it has.
func TestLookInterval(t *testing.T) {
	const base = 100 * time.Millisecond
	for _, tc := range []struct {
		base    time.Duration
		lookers int
		want    time.Duration
	}{
		{base, 0, base},
		{base, 1, base},
		{base, 2, base},
		{base, 3, 3 * FleetLookSpacing},
		{base, 17, 17 * FleetLookSpacing},
		{base, 300, 15 * time.Second},
		{base, 3000, 150 * time.Second},
		{10 * time.Millisecond, 1, 10 * time.Millisecond},
		{10 * time.Millisecond, 3, 30 * time.Millisecond},
		{500 * time.Millisecond, 100, 5 * time.Second},
	} {
		got := LookInterval(tc.base, tc.lookers)
		if got != tc.want {
			t.Errorf("LookInterval(%s, %d) = %s, want %s", tc.base, tc.lookers, got, tc.want)
		}
		// The fleet's looks per second stay bounded.
		if rate := float64(max(tc.lookers, 1)) / got.Seconds(); rate > 1/min(FleetLookSpacing, tc.base).Seconds()+1e-9 && tc.lookers > 1 {
			t.Errorf("%d workers at %s look %.1f times a second", tc.lookers, got, rate)
		}
	}
}
