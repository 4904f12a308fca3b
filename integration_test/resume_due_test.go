package integration_test

import (
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// TestResumeMakesTheItemDue: w8yctl resume puts the item in the due index,
// so that an idle worker takes it within a look (a second or so) and not
// at its next sweep of the whole list. Here no sweep can come: the fleet's
// sweep key is held for a minute, and --idle-wait is 30s, so only the due
// entry can make the resumed item run promptly.
func TestResumeMakesTheItemDue(t *testing.T) {
	t.Parallel()
	s := setup(t, "rd")
	s.items("p")
	runCtl(t, nil, s.at("pause", "p")...).mustExit(t, 0)
	if err := s.Client.Set(ctx(t), s.key("sweep"), "test", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	start := redistest.CommandStats(t, s.Client)["zrangebyscore"]
	worker := s.start("-c", "-q", "--idle-wait", "30s", "sh", "-c", `redis-cli -p "$REDIS_PORT" rpush ran "$W8Y_ITEM" >/dev/null`)
	// The worker's first pass finds p paused; the looks that follow (a
	// script, then probes), each a ZRANGEBYSCORE, show that it is idle.
	redistest.WaitFor(t, "the worker to pass p by and look at the due index three times", func() bool {
		return redistest.CommandStats(t, s.Client)["zrangebyscore"] >= start+3
	})
	if n := s.Client.LLen(ctx(t), "ran").Val(); n != 0 {
		t.Fatalf("p ran %d times while paused", n)
	}
	resumed := time.Now()
	runCtl(t, nil, s.at("resume", "p")...).mustExit(t, 0)
	if _, err := s.Client.BLPop(ctx(t), 5*time.Second, "ran").Result(); err != nil {
		t.Fatalf("p did not run within 5s of resume (%v): resume did not make it due", err)
	}
	t.Logf("resume: p started %s after the command", time.Since(resumed).Round(time.Millisecond))
	drain(t, []*proc{worker})
}
