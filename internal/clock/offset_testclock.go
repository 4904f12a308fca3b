//go:build w8y_testclock

package clock

import (
	"os"
	"time"
)

// hostOffset is W8Y_TEST_CLOCK_OFFSET, a duration that the tests add to this
// host's clock to stand for a host whose clock is wrong. Only a build with
// the tag w8y_testclock reads it, as the integration tests build w8y; a
// release build has none (offset.go).
func hostOffset() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("W8Y_TEST_CLOCK_OFFSET"))
	return d
}
