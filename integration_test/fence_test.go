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
	s := setup(t, "fc")
	s.items(redistest.Items(6)...)
	child := `redis-cli -p "$REDIS_PORT" rpush fences "$W8Y_ITEM $W8Y_FENCE $W8Y_HOLDER" >/dev/null`
	var workers []*proc
	for range 3 {
		workers = append(workers, s.start("-c", "-q", "--cooldown", "100ms", "--idle-wait", "50ms", "sh", "-c", child))
	}
	redistest.WaitFor(t, "30 runs", func() bool { return s.Client.LLen(ctx(t), "fences").Val() >= 30 })
	drain(t, workers)

	// The starts, in the order of the takes.
	type run struct{ item, holder string }
	started := map[int64]run{}
	last := map[string]int64{}
	var fences []int64
	for _, m := range s.Client.XRange(ctx(t), s.key("events"), "-", "+").Val() {
		if m.Values["type"] != "start" {
			continue
		}
		fence, err := strconv.ParseInt(m.Values["fence"].(string), 10, 64)
		if err != nil || len(fences) > 0 && fence <= fences[len(fences)-1] {
			t.Errorf("the start event's fence %q follows %v", m.Values["fence"], fences[max(len(fences)-1, 0):])
		}
		fences = append(fences, fence)
		item := m.Values["item"].(string)
		started[fence] = run{item, m.Values["holder"].(string)}
		last[item] = max(last[item], fence)
	}
	// Each child got its take's fence. The drain may stop a child before it
	// records its own: at most one per worker.
	children := s.server.list(t, "fences")
	holders := map[string]bool{}
	for _, record := range children {
		f := strings.Fields(record)
		fence, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || started[fence] != (run{f[0], f[2]}) {
			t.Errorf("a child of %s by %s got W8Y_FENCE %q, whose take was of %+v", f[0], f[2], f[1], started[fence])
		}
		holders[f[2]] = true
	}
	if len(started)-len(children) > len(workers) || len(started) < len(children) {
		t.Errorf("%d starts, %d children that recorded their fence", len(started), len(children))
	}
	if len(holders) < 2 {
		t.Errorf("the runs came from %d workers, want several", len(holders))
	}
	for item, fence := range last {
		if got := s.Client.HGet(ctx(t), s.key("state:"+item), "last_fence").Val(); got != strconv.FormatInt(fence, 10) {
			t.Errorf("state of %s: last_fence %q, want its last take's %d", item, got, fence)
		}
	}
	if got := s.Client.Get(ctx(t), s.key("fence")).Val(); got != strconv.FormatInt(slices.Max(fences), 10) {
		t.Errorf("fc:fence is %q, want the last take's %d", got, slices.Max(fences))
	}
}
