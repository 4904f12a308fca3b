package integration_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/runs"
)

// everyTwoSeconds is the schedule of these tests: a seconds field, so that
// several slots pass in a few seconds.
const (
	everyTwoSeconds = "*/2 * * * * *"
	slotLength      = 2 * time.Second
)

// stampTake is shell that records each start as "<item> <last_start>" in the
// list "takes": the take's time that the state hash holds while the run
// goes on, which is the start that --schedule counts, and no later
// moment of the child's own, which could fall into the next slot.
func stampTake(prefix string) string {
	return `redis-cli -p "$REDIS_PORT" rpush takes "$W8Y_ITEM $(redis-cli -p "$REDIS_PORT" hget "` + prefix +
		`:state:$W8Y_ITEM" last_start)" >/dev/null`
}

// popTake waits for the next start that stampTake records.
func (s *server) popTake(t *testing.T) (string, time.Time) {
	t.Helper()
	record := s.pop(t, "takes")
	item, at, _ := strings.Cut(record, " ")
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		t.Fatalf("bad take record %q", record)
	}
	return item, time.UnixMilli(ms)
}

// slotOf is the number of the slot of everyTwoSeconds that at falls in,
// for an item whose slots come offset after the schedule's.
func slotOf(at time.Time, offset time.Duration) int64 {
	return at.Add(-offset).UnixMilli() / slotLength.Milliseconds()
}

// takesUntil collects the starts that stampTake records until every item
// has n of them, each item's in order.
func (s *server) takesUntil(t *testing.T, items []string, n int) map[string][]time.Time {
	t.Helper()
	takes := map[string][]time.Time{}
	for slices.ContainsFunc(items, func(item string) bool { return len(takes[item]) < n }) {
		item, at := s.popTake(t)
		takes[item] = append(takes[item], at)
	}
	return takes
}

// TestScheduleRunsOncePerSlot: three workers on a seconds-field schedule
// run each item in every slot, never twice in one; after the fleet was
// down for slots, each item runs once, not once per missed slot.
func TestScheduleRunsOncePerSlot(t *testing.T) {
	t.Parallel()
	s := setup(t, "cron")
	items := []string{"a", "b", "c"}
	s.items(items...)
	workers := func(n int) []*proc {
		var ps []*proc
		for range n {
			ps = append(ps, s.start("-c", "-q", "--schedule", everyTwoSeconds, "--idle-wait", "50ms", "sh", "-c", stampTake("cron")))
		}
		return ps
	}

	fleet := workers(3)
	takes := s.takesUntil(t, items, 4)
	drain(t, fleet)
	last := map[string]int64{}
	for _, item := range items {
		slots := make([]int64, 0, len(takes[item]))
		for _, at := range takes[item] {
			slots = append(slots, slotOf(at, 0))
		}
		// The first run comes at once (the item never ran); then one in
		// each slot: a repeat would be a run twice in a slot, a gap a slot
		// missed while three workers were idle.
		for i := 1; i < len(slots); i++ {
			if slots[i] != slots[i-1]+1 {
				t.Errorf("%q started in slots %v (takes %v): want one start per slot", item, slots, takes[item])
				break
			}
		}
		last[item] = slots[len(slots)-1]
		// Its cooldown lasts until its next slot, no longer.
		if pttl := s.Client.PTTL(ctx(t), s.key("cooldown:"+item)).Val(); pttl > slotLength {
			t.Errorf("cooldown of %q expires in %s, after its next slot", item, pttl)
		}
	}
	s.noLocks()

	// Down for two whole slots after the last run of every item.
	resume := time.UnixMilli((slices.Max(slices.Collect(func(yield func(int64) bool) {
		for _, v := range last {
			yield(v)
		}
	}))+3)*slotLength.Milliseconds() + 100)
	redistest.WaitFor(t, "two slots pass with the fleet down", func() bool { return time.Now().After(resume) })
	if n := s.Client.LLen(ctx(t), "takes").Val(); n != 0 {
		t.Fatalf("%d runs recorded while no worker ran", n)
	}

	fleet = workers(2)
	takes = s.takesUntil(t, items, 2)
	drain(t, fleet)
	for _, item := range items {
		first, second := slotOf(takes[item][0], 0), slotOf(takes[item][1], 0)
		if first < last[item]+3 {
			t.Errorf("%q ran in slot %d, before the fleet came back (last run in slot %d)", item, first, last[item])
		}
		// The missed slots made one run: the next comes in the next slot.
		if second != first+1 {
			t.Errorf("after missed slots, %q started in slots %d and %d: want one run, then one in the next slot", item, first, second)
		}
	}
	s.wantList("a", "b", "c")
}

// TestScheduleJitterSpreadsStarts: with --jitter, each item starts at its
// own offset after each slot, the same offset as runs.Cron computes, and
// the items of one list spread over the jitter.
func TestScheduleJitterSpreadsStarts(t *testing.T) {
	t.Parallel()
	s := setup(t, "jit")
	items := []string{"a", "b", "c", "d", "e", "f"}
	s.items(items...)
	const jitter = 1500 * time.Millisecond
	cron, err := runs.ParseCron(everyTwoSeconds, "UTC", jitter)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []time.Duration
	for _, item := range items {
		offsets = append(offsets, cron.Offset(item))
	}
	// The spread below is the hash's: a precondition of the test, not what
	// it checks.
	if slices.Max(offsets)-slices.Min(offsets) < 500*time.Millisecond {
		t.Fatalf("the items' offsets %v do not spread: choose other items", offsets)
	}

	var fleet []*proc
	for range 2 {
		fleet = append(fleet, s.start("-c", "-q", "--schedule", everyTwoSeconds, "--jitter", "1500ms",
			"--idle-wait", "50ms", "sh", "-c", stampTake("jit")))
	}
	// The first start of each item comes at once; the next ones at its
	// slots.
	takes := s.takesUntil(t, items, 3)
	drain(t, fleet)
	for i, item := range items {
		for _, at := range takes[item][1:] {
			// How long after its own slot (the schedule's plus its offset)
			// the item started: a worker looks every 50ms.
			late := at.Sub(time.UnixMilli(slotOf(at, offsets[i]) * slotLength.Milliseconds()).Add(offsets[i]))
			if late < 0 || late > 500*time.Millisecond {
				t.Errorf("%q (offset %s) started at %s, %s after its slot: want within 500ms", item, offsets[i], at.Format("15:04:05.000"), late)
			}
		}
	}
}

// TestScheduleBadInput: a wrong cron expression, a wrong zone, --schedule
// with --cooldown, and --jitter without --schedule each get one line and
// exit 125, and leave the list as it was.
func TestScheduleBadInput(t *testing.T) {
	t.Parallel()
	s := setup(t, "cronbad")
	for _, tt := range []struct {
		args []string
		line string
	}{
		{[]string{"--schedule", "every day at two"}, `--schedule "every day at two" is not a cron expression`},
		{[]string{"--schedule", "0 2 * *"}, "give five fields"},
		{[]string{"--schedule", "61 * * * *"}, "is not a cron expression"},
		{[]string{"--schedule", "0 2 * * *", "--schedule-timezone", "Europe/Atlantis"}, `--schedule-timezone "Europe/Atlantis" is not a time zone`},
		{[]string{"--schedule", "0 2 * * *", "--cooldown", "1d"}, "--schedule and --cooldown are alternatives: give one"},
		{[]string{"--jitter", "5m"}, "--jitter goes with --schedule"},
		{[]string{"--schedule", "@daily", "--jitter", "soon"}, "--jitter"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			s.items("x", "y", "z")
			r := s.run(append(tt.args, "sh", "-c", `redis-cli -p "$REDIS_PORT" rpush ran "$W8Y_ITEM"`)...)
			r.wantExit(t, 125)
			lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.line) {
				t.Errorf("stderr %q, want one line with %q", r.Stderr, tt.line)
			}
			if goSpeak.MatchString(r.Stderr) {
				t.Errorf("stderr speaks Go: %q", r.Stderr)
			}
			s.wantList("x", "y", "z")
			if n := s.Client.LLen(ctx(t), "ran").Val(); n != 0 {
				t.Errorf("a child ran")
			}
			s.noLocks()
		})
	}
}
