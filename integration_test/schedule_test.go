package integration_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/poll"
)

// TestScheduleSurvivesSIGKILL: a worker killed with SIGKILL leaves every
// state in Redis (cooldown, backoff, the count, its lock until it expires),
// and the next worker honours them all.
func TestScheduleSurvivesSIGKILL(t *testing.T) {
	s := withList(t, "kill", "a", "b", "c")
	// a succeeds, b fails, c runs until killed the first time and succeeds
	// the second.
	child := report(":", `case "$W8Y_ITEM" in
		a) exit 0;;
		b) exit 1;;
		c) [ "$(redis-cli -p "$REDIS_PORT" incr c-runs)" = 1 ] && exec sleep 1000; exit 0;;
	esac`)
	// -x 3: with a lease of a second, a refresh that a loaded machine
	// delays by a second loses c's lock before the test reads it.
	args := append([]string{"-u", s.URL, "-k", "kill", "-c", "-q", "-x", "3", "--idle-wait", "20ms",
		"--cooldown", "1h", "--failure-backoff", "1h"}, child...)
	first := startW8y(t, s.env, args...)
	for _, want := range []string{"a", "b", "c"} {
		if got := s.popStarted(t); got != want {
			t.Fatalf("started %q, want %q", got, want)
		}
	}
	poll.WaitFor(t, "b's backoff is set", func() bool { return s.Client.Exists(ctx(t), s.key("backoff:b")).Val() == 1 })
	// c reports its start before it counts its runs.
	poll.WaitFor(t, "c has counted its first run", func() bool { return s.Client.Get(ctx(t), "c-runs").Val() == "1" })
	token := s.Client.Get(ctx(t), s.key("lock:c")).Val()
	if token == "" {
		t.Fatal("c's lock is not held while c runs")
	}
	first.kill()

	// Everything the killed worker wrote is still there.
	for key, owner := range map[string]string{"kill:cooldown:a": token, "kill:backoff:b": token} {
		if got := s.Client.Get(ctx(t), key).Val(); got != owner {
			t.Errorf("%s holds %q, want the killed worker's token %q", key, got, owner)
		}
		// 1h, less up to a quarter of jitter for the backoff.
		if pttl := s.Client.PTTL(ctx(t), key).Val(); pttl < 44*time.Minute || pttl > time.Hour {
			t.Errorf("%s expires in %s, want about 1h", key, pttl)
		}
	}
	if got := s.Client.HGet(ctx(t), s.key("state:b"), "consecutive_failures").Val(); got != "1" {
		t.Errorf("b's consecutive_failures %q, want 1", got)
	}

	// The next worker runs only c, once the dead worker's lock has expired.
	second := startW8y(t, s.env, args...)
	if got := s.popStarted(t); got != "c" {
		t.Errorf("the next worker started %q, want c", got)
	}
	poll.WaitFor(t, "c cools down", func() bool { return s.Client.Exists(ctx(t), s.key("cooldown:c")).Val() == 1 })
	second.stop(t)
	if n := s.Client.LLen(ctx(t), "started").Val(); n != 0 {
		t.Errorf("%d more runs: a or b ran while waiting", n)
	}

	// The count goes on where the killed worker left it. The keys are
	// deleted by hand, which only a sweep notices: make it due now.
	s.Client.Del(ctx(t), s.key("backoff:b"), s.key("cooldown:a"), s.key("cooldown:c"), s.key("sweep"))
	s.Client.Set(ctx(t), s.key("lock:a"), "held", time.Hour)
	s.Client.Set(ctx(t), s.key("lock:c"), "held", time.Hour)
	oneShot := slices.Delete(slices.Clone(args), 4, 5) // drop -c
	runW8y(t, s.env, oneShot...).wantExit(t, 1)
	if got := s.Client.HGet(ctx(t), s.key("state:b"), "consecutive_failures").Val(); got != "2" {
		t.Errorf("b's consecutive_failures %q, want 2", got)
	}
	if pttl := s.Client.PTTL(ctx(t), s.key("backoff:b")).Val(); pttl <= time.Hour*3/2 || pttl > 2*time.Hour {
		t.Errorf("b's second backoff expires in %s, want 2h less up to a quarter", pttl)
	}
}

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

// oneStartPerSlot reports whether takes, an item's starts in order, came
// one in each slot. An item never run waits for its first slot, as every
// later run waits for its next: no start comes at any other moment.
func oneStartPerSlot(takes []time.Time) bool {
	for i := 1; i < len(takes); i++ {
		if slotOf(takes[i], 0) != slotOf(takes[i-1], 0)+1 {
			return false
		}
	}
	return true
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
	items := []string{"a", "b", "c"}
	s := withList(t, "cron", items...)
	workers := func(n int) []*proc {
		var ps []*proc
		for range n {
			ps = append(ps, s.start("-c", "-q", "--schedule", everyTwoSeconds, "--idle-wait", "50ms", "sh", "-c", stampTake("cron")))
		}
		return ps
	}

	started := time.Now()
	fleet := workers(3)
	takes := s.takesUntil(t, items, 4)
	drain(t, fleet)
	last := map[string]int64{}
	for _, item := range items {
		slots := make([]int64, 0, len(takes[item]))
		for _, at := range takes[item] {
			slots = append(slots, slotOf(at, 0))
		}
		// The first run waits for the first slot after the workers
		// started (or the next, for a worker slow to start); then one in
		// each slot: a repeat would be a run twice in a slot, a gap a slot
		// missed while three workers were idle.
		if first := slots[0]; first <= slotOf(started, 0) || first > slotOf(started, 0)+2 {
			t.Errorf("%q first started in slot %d, the workers in slot %d: want the slot after theirs", item, first, slotOf(started, 0))
		}
		if !oneStartPerSlot(takes[item]) {
			t.Errorf("%q started in slots %v (takes %v): want one start per slot", item, slots, takes[item])
		}
		last[item] = slots[len(slots)-1]
		// Its cooldown lasts until its next slot, no longer.
		if pttl := s.Client.PTTL(ctx(t), s.key("cooldown:"+item)).Val(); pttl > slotLength {
			t.Errorf("cooldown of %q expires in %s, after its next slot", item, pttl)
		}
		// The due index, which idle workers and the lag read, holds that
		// slot: the lag of an item no worker takes counts from it. A run
		// that the drain interrupted sets no cooldown: its item is due from
		// its end.
		due := int64(s.Client.ZScore(ctx(t), s.key("due"), item).Val())
		switch result := s.Client.HGet(ctx(t), s.key("state:"+item), "last_result").Val(); result {
		case "success":
			if next := (last[item] + 1) * slotLength.Milliseconds(); due < next || due > next+100 {
				t.Errorf("the due index has %q at %d, want its next slot %d", item, due, next)
			}
		case "interrupted":
			if now := time.Now().UnixMilli(); due > now {
				t.Errorf("the due index has %q, whose run the drain interrupted, at %d, after now (%d)", item, due, now)
			}
		default:
			t.Errorf("the last run of %q ended %q, want success (or interrupted by the drain)", item, result)
		}
	}
	s.noLocks()

	// Down for two whole slots after the last run of every item.
	resume := time.UnixMilli((slices.Max(slices.Collect(func(yield func(int64) bool) {
		for _, v := range last {
			yield(v)
		}
	}))+3)*slotLength.Milliseconds() + 100)
	poll.WaitFor(t, "two slots pass with the fleet down", func() bool { return time.Now().After(resume) })
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
	// The drain may have stopped a run that had moved its item to the tail.
	s.wantItems("a", "b", "c")
}

// TestScheduleJitterSpreadsStarts: with --jitter, each item starts at its
// own offset after each slot, the same offset as finish.Cron computes, and
// the items of one list spread over the jitter.
func TestScheduleJitterSpreadsStarts(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e", "f"}
	s := withList(t, "jit", items...)
	// The items' offsets under a jitter of 1s: e 152ms, d 363ms, c 418ms,
	// b 629ms, f 785ms, a 996ms. None comes within 1s of the next slot of
	// the schedule, which a start without the offset would keep to.
	const jitter = time.Second
	cron, err := finish.ParseCron(everyTwoSeconds, "UTC", jitter)
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

	// Three workers: no more than three items come due within 300ms, so
	// that an item waits for a look, not for another item's child to end.
	var fleet []*proc
	for range 3 {
		fleet = append(fleet, s.start("-c", "-q", "--schedule", everyTwoSeconds, "--jitter", jitter.String(),
			"--idle-wait", "50ms", "sh", "-c", stampTake("jit")))
	}
	// Every start of each item comes at its slots, the first too: an item
	// never run waits for its first slot.
	takes := s.takesUntil(t, items, 3)
	drain(t, fleet)
	for i, item := range items {
		for _, at := range takes[item] {
			// How long after its own slot (the schedule's plus its offset)
			// the item started: each of three workers looks every 150ms.
			// A start at the schedule's slot, without the offset, would be
			// 2s less the offset late, over 1s.
			late := at.Sub(time.UnixMilli(slotOf(at, offsets[i]) * slotLength.Milliseconds()).Add(offsets[i]))
			if late < 0 || late > 900*time.Millisecond {
				t.Errorf("%q (offset %s) started at %s, %s after its slot: want within 900ms", item, offsets[i], at.Format("15:04:05.000"), late)
			}
		}
	}
}

// TestScheduleStatusShowsTheNextSlot: after a run under --schedule, w8y
// --status (--json and the table) and w8yctl status ITEM say when each item
// runs next: its first slot after its take, its jitter offset added, in
// UTC. Once run-now has deleted its cooldown, they say none.
func TestScheduleStatusShowsTheNextSlot(t *testing.T) {
	items := []string{"report-1", "report-2"}
	b := withList(t, "slot", items...)
	cron, err := finish.ParseCron("0 2 * * *", "UTC", 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	// --first-run-now: the new items run now, and their success sets the
	// slot (without it they would wait for their first slot, see
	// TestScheduleNewItemsWaitForTheirFirstSlot).
	b.run("-q", "-c", "--until-idle", "--schedule", "0 2 * * *", "--jitter", "30m", "--first-run-now", "true").mustExit(t, 0)

	// Each item's slot: the first after its take, which the state hash
	// keeps, at 02:00 UTC plus its offset, within a day.
	slots := map[string]time.Time{}
	for _, item := range items {
		start := atoi(t, b.Client.HGet(ctx(t), b.key("state:"+item), "last_start").Val())
		slot := cron.Next(item, time.UnixMilli(int64(start))).UTC()
		if slot.Sub(before) > 24*time.Hour || slot.Hour() != 2 || slot.Minute() >= 30 {
			t.Fatalf("%s's slot %s: not the next 02:00 UTC plus at most 30m", item, slot)
		}
		slots[item] = slot
	}

	for _, st := range statusJSON(t, nil, b.at()...) {
		item := st["item"].(string)
		slot, _ := st["next_slot"].(float64)
		if int64(slot) != slots[item].UnixMilli() {
			t.Errorf("--json has %s's next_slot %v, want %d (%s)", item, st["next_slot"], slots[item].UnixMilli(), slots[item])
		}
		// The cooldown ends at the slot.
		left, _ := st["cooldown_ms"].(float64)
		if end := time.Now().Add(time.Duration(left) * time.Millisecond); end.Sub(slots[item]).Abs() > 5*time.Second {
			t.Errorf("%s's cooldown ends at %s, its slot is %s", item, end, slots[item])
		}
	}
	table := statusOutput(t, nil, b.at()...)
	for _, item := range items {
		if want := "\n" + item + "  slot " + slots[item].Format("15:04:05") + "Z  "; !strings.Contains(table, want) {
			t.Errorf("--status lacks %q:\n%s", want, table)
		}
	}
	r := b.ctl("status", "report-1")
	r.mustExit(t, 0)
	if want := ", until its next slot " + slots["report-1"].Format("2006-01-02T15:04:05.000Z") + "\n"; !strings.Contains(r.Stdout, want) {
		t.Errorf("w8yctl status report-1 lacks %q:\n%s", want, r.Stdout)
	}

	b.ctl("run-now", "report-1").mustExit(t, 0)
	for _, st := range statusJSON(t, nil, b.at()...) {
		if st["item"] == "report-1" && (st["state"] != "idle" || st["next_slot"] != nil) {
			t.Errorf("after run-now, --json has report-1 %v, next_slot %v; want idle, null", st["state"], st["next_slot"])
		}
	}
	if table := statusOutput(t, nil, b.at()...); !strings.Contains(table, "\nreport-1  idle ") {
		t.Errorf("after run-now, --status shows:\n%s", table)
	}
}

// TestDocsScheduleStatus runs docs/scheduling.md's example of what status
// shows under --schedule as it is written, with w8y and w8yctl pointed at
// the test's Redis, and checks that it prints what the page shows: the
// new items wait for their first slot, whose clock times are the items'
// offsets, the same every day.
func TestDocsScheduleStatus(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	block := doctest.Block(t, "docs/scheduling.md", "sh", "--until-idle --schedule")
	dir, path := t.TempDir(), commandsPath(t)
	writeExecutable(t, filepath.Join(dir, "make-report.sh"), []byte("#!/bin/sh\n"))
	r := startCommand(t, []string{path, "W8Y_REDIS_URL=" + s.URL},
		"bash", "-c", "set -e\ncd "+dir+"\n"+block).wait(t)
	r.mustExit(t, 0)
	if r.Stderr != "" {
		t.Errorf("the example wrote on stderr: %s", r)
	}
	if got, want := r.Stdout, doctest.Block(t, "docs/scheduling.md", "", "slot 02:"); got != want {
		t.Errorf("the example printed:\n%s\nwant the page's:\n%s", r.Stdout, want)
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

// TestScheduleNewItemsWaitForTheirFirstSlot: workers started between two
// slots of a schedule every 10s start no item before the first slot, as
// cron and a Kubernetes CronJob would not: each new item's first take gives
// it back with a cooldown until that slot, which status shows and the due
// index holds (due then, not overdue), and it starts in that slot, once.
// With --first-run-now a new item runs at once instead, and w8yctl run-now
// runs a waiting one at once.
func TestScheduleNewItemsWaitForTheirFirstSlot(t *testing.T) {
	t.Parallel()
	const every, length = "*/10 * * * * *", 10 * time.Second
	s := setup(t, "first")
	items := []string{"a", "b", "c"}
	s.items(items...)
	// Between two slots: at least 2s before the next, so that the workers'
	// first takes come before it, however loaded the host.
	poll.WaitFor(t, "a moment between two slots", func() bool {
		into := time.Duration(time.Now().UnixMilli()%length.Milliseconds()) * time.Millisecond
		return into >= 500*time.Millisecond && into <= length-2*time.Second
	})
	started := time.Now()
	slot := time.UnixMilli((started.UnixMilli()/length.Milliseconds() + 1) * length.Milliseconds())
	var fleet []*proc
	for range 2 {
		fleet = append(fleet, s.start("-c", "-q", "--schedule", every, "--idle-wait", "50ms", "sh", "-c", stampTake("first")))
	}
	// Each item waits for the slot: its cooldown lasts until then, its
	// state hash holds it as next_slot, and the due index has it then.
	poll.WaitFor(t, "every item to wait for its first slot", func() bool {
		for _, item := range items {
			if s.Client.HGet(ctx(t), s.key("state:"+item), "next_slot").Val() == "" {
				return false
			}
		}
		return true
	})
	if time.Now().After(slot) {
		t.Fatalf("the items were given back after their first slot %s: the host is too slow for this test", slot.Format("15:04:05.000"))
	}
	for _, item := range items {
		if got := s.Client.HGet(ctx(t), s.key("state:"+item), "next_slot").Val(); got != strconv.FormatInt(slot.UnixMilli(), 10) {
			t.Errorf("%q waits for the slot %s, want %d", item, got, slot.UnixMilli())
		}
		if due := int64(s.Client.ZScore(ctx(t), s.key("due"), item).Val()); due < slot.UnixMilli() || due > slot.UnixMilli()+100 {
			t.Errorf("the due index has %q at %d, want its first slot %d", item, due, slot.UnixMilli())
		}
		if pttl := s.Client.PTTL(ctx(t), s.key("cooldown:"+item)).Val(); pttl <= 0 || time.Now().Add(pttl).After(slot.Add(100*time.Millisecond)) {
			t.Errorf("%q's cooldown expires in %s, want at its first slot %s", item, pttl, slot.Format("15:04:05.000"))
		}
	}
	for _, st := range statusJSON(t, nil, s.at()...) {
		if next, _ := st["next_slot"].(float64); int64(next) != slot.UnixMilli() || st["last_start"] != nil {
			t.Errorf("--status has %v with next_slot %v and last_start %v: want its first slot, and no run", st["item"], st["next_slot"], st["last_start"])
		}
	}
	if n := s.Client.XLen(ctx(t), s.key("events")).Val(); n != 0 {
		t.Errorf("%d events before the first slot: an item waiting for its slot records no run", n)
	}
	takes := s.takesUntil(t, items, 1)
	for _, item := range items {
		if at := takes[item][0]; at.Before(slot) || at.After(slot.Add(length)) {
			t.Errorf("%q first started at %s, want in its first slot, from %s", item, at.Format("15:04:05.000"), slot.Format("15:04:05.000"))
		}
	}

	// run-now runs a new item at once, while the others wait.
	s.ctl("add", "d").mustExit(t, 0)
	poll.WaitFor(t, "d to wait for its slot", func() bool { return s.Client.HGet(ctx(t), s.key("state:d"), "next_slot").Val() != "" })
	s.ctl("run-now", "d").mustExit(t, 0)
	if item, _ := s.popTake(t); item != "d" {
		t.Errorf("after run-now d, %q started, want d", item)
	}
	drain(t, fleet)

	// --first-run-now: a new item runs at once, then from its next slot on.
	n := setup(t, "now")
	n.items("e")
	before := time.Now()
	w := n.start("-c", "-q", "--schedule", every, "--first-run-now", "--idle-wait", "50ms", "sh", "-c", stampTake("now"))
	item, at := n.popTake(t)
	if at.Sub(before) > length/2 || item != "e" {
		t.Errorf("with --first-run-now, %q first started %s after the worker: want e at once", item, at.Sub(before))
	}
	drain(t, []*proc{w})
}
