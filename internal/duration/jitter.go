package duration

import (
	"math/rand/v2"
	"time"
)

// Jitter spreads d over ±25%, so that workers started together drift apart
// instead of polling Redis in lockstep. A pause too long to add a quarter
// to (--idle-wait inf) stays as long as it can be: Forever.
func Jitter(d time.Duration) time.Duration {
	low, spread := d-d/4, rand.N(d/2+1)
	if low > Forever-spread {
		return Forever
	}
	return low + spread
}
