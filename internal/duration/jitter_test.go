package duration

import (
	"testing"
	"time"
)

func TestJitterStaysWithinAQuarter(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, time.Second, 30 * time.Second} {
		for range 1000 {
			got := Jitter(d)
			if got < d*3/4 || got > d*5/4 {
				t.Fatalf("Jitter(%s) = %s, outside ±25%%", d, got)
			}
		}
	}
}

// TestJitterOfForeverIsForever: adding a quarter to --idle-wait inf must not
// wrap round to a negative pause, which would make an idle worker spin.
func TestJitterOfForeverIsForever(t *testing.T) {
	for _, d := range []time.Duration{Forever, Forever - time.Hour} {
		for range 100 {
			if got := Jitter(d); got < d*3/4 {
				t.Fatalf("Jitter(%s) = %s, shorter than three quarters of it", d, got)
			}
		}
	}
}
