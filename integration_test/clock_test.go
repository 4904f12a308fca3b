package integration_test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fleet's one clock is Redis' (docs/how-it-works.md, "One clock:
// Redis'"): these tests give workers clocks that are wrong by minutes
// (W8Y_TEST_CLOCK_OFFSET, which only the integration tests' build reads,
// see internal/clock) and want what a fleet of right clocks does.

// clockEnv is the environment of a worker whose clock is off by offset.
func clockEnv(b *bundle, offset string) []string {
	return append(append([]string{}, b.env...), "W8Y_TEST_CLOCK_OFFSET="+offset)
}

// TestOneClockSchedule: two workers whose clocks are five minutes apart
// either way run each item once in each slot of a seconds-field schedule,
// as TestScheduleRunsOncePerSlot's right clocks do. Their clocks are off by
// a second more than five minutes, which is a whole number of two-second
// slots and so would move no slot: a worker that found the slot on its own
// clock would start the item a slot late, or twice in one.
func TestOneClockSchedule(t *testing.T) {
	items := []string{"a", "b", "c"}
	b := withList(t, "oneclock", items...)
	args := b.at("-c", "-q", "--schedule", everyTwoSeconds, "--idle-wait", "50ms", "sh", "-c", stampTake("oneclock"))
	fleet := []*proc{
		startW8y(t, clockEnv(b, "-5m1s"), args...),
		startW8y(t, clockEnv(b, "5m1s"), args...),
	}
	takes := b.takesUntil(t, items, 4)
	drain(t, fleet)
	for _, item := range items {
		if !oneStartPerSlot(takes[item]) {
			var slots []int64
			for _, at := range takes[item] {
				slots = append(slots, slotOf(at, 0))
			}
			t.Errorf("%q started in slots %v (takes %v): want one start per slot", item, slots, takes[item])
		}
		if pttl := b.Client.PTTL(ctx(t), b.key("cooldown:"+item)).Val(); pttl > slotLength {
			t.Errorf("cooldown of %q expires in %s, after its next slot", item, pttl)
		}
	}
	b.noLocks()
}

// TestOneClockCooldown: a run on a host whose clock is five minutes fast
// cools its item down for exactly --cooldown, and an idle worker whose
// clock is five minutes slow takes the item when the cooldown ends, as one
// with a right clock would: within a few of its looks, not at the fleet's
// next sweep (5s later on a list this short) nor ten minutes later.
func TestOneClockCooldown(t *testing.T) {
	b := withList(t, "cool", "a")
	const cooldown = 3 * time.Second
	// The child records Redis' time at its start and its end.
	stamp := func(list string) string {
		return `redis-cli -p "$REDIS_PORT" rpush ` + list + ` "$(redis-cli -p "$REDIS_PORT" time | tr '\n' ' ')" >/dev/null`
	}
	child := []string{"sh", "-c", stamp("starts") + "; " + stamp("ends")}
	args := b.at(append([]string{"-q", "--cooldown", cooldown.String()}, child...)...)

	startW8y(t, clockEnv(b, "5m"), args...).wait(t).mustExit(t, 0)
	idle := startW8y(t, clockEnv(b, "-5m"), append([]string{"-c"}, args...)...)
	b.pop(t, "starts") // the fast host's run
	end := redisTime(t, b.pop(t, "ends"))
	start := redisTime(t, b.pop(t, "starts"))
	idle.stop(t)
	if gap := start.Sub(end); gap < cooldown || gap > cooldown+time.Second {
		t.Errorf("the slow host started the item %s after the fast host's run ended, want %s (--cooldown) and less than a second more", gap, cooldown)
	}
	b.noLocks()
}

// redisTime reads what redis-cli's TIME printed on one line: seconds and
// microseconds.
func redisTime(t *testing.T, line string) time.Time {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 2 {
		t.Fatalf("not a TIME reply: %q", line)
	}
	s, err1 := strconv.ParseInt(f[0], 10, 64)
	us, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("not a TIME reply: %q", line)
	}
	return time.Unix(s, us*1000)
}
