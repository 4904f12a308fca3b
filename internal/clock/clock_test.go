package clock

import (
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// TestReleaseBuildHasNoTestClock: only a build with the tag w8y_testclock
// reads W8Y_TEST_CLOCK_OFFSET; this test runs without it, as a release is
// built.
func TestReleaseBuildHasNoTestClock(t *testing.T) {
	t.Setenv("W8Y_TEST_CLOCK_OFFSET", "5m")
	if off := New().off; off != 0 {
		t.Errorf("a build without w8y_testclock reads a clock offset of %s", off)
	}
}

// TestMeasure: a host clock that is off by minutes is put back on Redis'
// clock, within the round trip that measured it.
func TestMeasure(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	for _, off := range []time.Duration{-5 * time.Minute, 0, 5 * time.Minute} {
		c := &Clock{off: off}
		if err := c.Measure(ctx, rdb); err != nil {
			t.Fatal(err)
		}
		if skew := c.Skew(); (skew + off).Abs() > 100*time.Millisecond {
			t.Errorf("host clock off by %s: skew %s, want about %s", off, skew, -off)
		}
		redisNow := rdb.Time(ctx).Val()
		if got := c.Now(); got.Sub(redisNow).Abs() > 100*time.Millisecond {
			t.Errorf("host clock off by %s: Now %s, Redis' TIME %s", off, got, redisNow)
		}
	}
	var unset *Clock
	if got := unset.OnRedis(time.UnixMilli(1000)); !got.Equal(time.UnixMilli(1000)) {
		t.Errorf("a nil Clock moved a time to %s", got)
	}
}
