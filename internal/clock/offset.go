//go:build !w8y_testclock

package clock

import "time"

// hostOffset is 0: a release build has no test clock (see
// offset_testclock.go).
func hostOffset() time.Duration { return 0 }
