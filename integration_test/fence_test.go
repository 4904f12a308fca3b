package integration_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/redistest"
)

// TestFence: every take increments the list's fencing token, across
// workers: each child gets its own in W8Y_FENCE, the start events carry them
// strictly increasing in the order of the takes, and each item's state hash
// keeps its last run's.
func TestFence(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "fc:list", redistest.Items(6)...)
	child := `redis-cli -p "$REDIS_PORT" rpush fences "$W8Y_ITEM $W8Y_FENCE $W8Y_HOLDER" >/dev/null`
	var workers []*proc
	for range 3 {
		workers = append(workers, startW8y(t, portEnv(s), "-u", s.URL, "-k", "fc", "-c", "-q", "--cooldown", "100ms",
			"--idle-wait", "50ms", "sh", "-c", child))
	}
	redistest.WaitFor(t, "30 runs", func() bool { return s.Client.LLen(ctx(t), "fences").Val() >= 30 })
	drain(t, workers)

	type run struct{ item, holder string }
	ran := map[int64]run{}
	holders := map[string]bool{}
	last := map[string]int64{}
	for _, record := range s.list(t, "fences") {
		f := strings.Fields(record)
		fence, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || fence <= 0 {
			t.Fatalf("a child got W8Y_FENCE %q", f[1])
		}
		if _, twice := ran[fence]; twice {
			t.Errorf("two children got the fence %d", fence)
		}
		ran[fence] = run{f[0], f[2]}
		holders[f[2]] = true
		last[f[0]] = max(last[f[0]], fence)
	}
	if len(holders) < 2 {
		t.Errorf("the runs came from %d workers, want several", len(holders))
	}

	var starts []int64
	for _, m := range s.Client.XRange(ctx(t), "fc:events", "-", "+").Val() {
		if m.Values["type"] != "start" {
			continue
		}
		fence, _ := strconv.ParseInt(m.Values["fence"].(string), 10, 64)
		if len(starts) > 0 && fence <= starts[len(starts)-1] {
			t.Errorf("the start event's fence %d follows %d", fence, starts[len(starts)-1])
		}
		starts = append(starts, fence)
		if r, ok := ran[fence]; !ok || r.item != m.Values["item"] || r.holder != m.Values["holder"] {
			t.Errorf("start event %v: its child ran %+v", m.Values, r)
		}
	}
	if len(starts) != len(ran) {
		t.Errorf("%d start events, %d children", len(starts), len(ran))
	}
	for item, fence := range last {
		if got := s.Client.HGet(ctx(t), "fc:state:"+item, "last_fence").Val(); got != strconv.FormatInt(fence, 10) {
			t.Errorf("state of %s: last_fence %q, want its last run's %d", item, got, fence)
		}
	}
	if got := s.Client.Get(ctx(t), "fc:fence").Val(); got != strconv.FormatInt(slices.Max(starts), 10) {
		t.Errorf("fc:fence is %q, want the last take's %d", got, slices.Max(starts))
	}
}
