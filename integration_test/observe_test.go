package integration_test

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// holderChild is a child that records its lock token in the list "holders"
// and exits with the code in $CODE.
var holderChild = []string{"sh", "-c", `redis-cli -p "$REDIS_PORT" rpush holders "$W8Y_HOLDER" >/dev/null; exit ${CODE:-0}`}

// popHolder returns the token that the last holderChild recorded.
func (s *server) popHolder(t *testing.T) string {
	t.Helper()
	return s.pop(t, "holders")
}

// stateOf returns the state hash of item under prefix.
func (s *server) stateOf(t *testing.T, prefix, item string) map[string]string {
	t.Helper()
	state, err := s.Client.HGetAll(ctx(t), prefix+":state:"+item).Result()
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// checkState compares the fields of state named in want, and checks that
// the times lie between before and after, in order, and the run's duration
// within them.
func checkState(t *testing.T, what string, state, want map[string]string, before, after time.Time) {
	t.Helper()
	for field, value := range want {
		if state[field] != value {
			t.Errorf("%s: %s = %q, want %q (state %v)", what, field, state[field], value, state)
		}
	}
	start, err1 := strconv.ParseInt(state["last_start"], 10, 64)
	end, err2 := strconv.ParseInt(state["last_end"], 10, 64)
	if err1 != nil || err2 != nil || start < before.UnixMilli() || start > end || end > after.UnixMilli() {
		t.Errorf("%s: last_start %q, last_end %q, not in order within [%d, %d]", what, state["last_start"], state["last_end"], before.UnixMilli(), after.UnixMilli())
	}
	if d, err := strconv.Atoi(state["last_duration_ms"]); err != nil || d < 0 || int64(d) > after.Sub(before).Milliseconds() {
		t.Errorf("%s: last_duration_ms %q", what, state["last_duration_ms"])
	}
}

// TestStateAndEvents runs an item through a success, two failures, a
// success and a lost lock, checking its state hash after each run, then the
// events stream's entries in order.
func TestStateAndEvents(t *testing.T) {
	s := withList(t, "st", "a")
	args := []string{"-u", s.URL, "-k", "st", "-q", "--state-ttl", "90s"}
	type run struct {
		code   int
		result string
		exit   string
		want   map[string]string
	}
	runs := []run{
		{0, "success", "0", map[string]string{"runs": "1", "consecutive_failures": "0"}},
		{3, "failure", "3", map[string]string{"runs": "2", "failures": "1", "consecutive_failures": "1"}},
		{4, "failure", "4", map[string]string{"runs": "3", "failures": "2", "consecutive_failures": "2"}},
		{0, "success", "0", map[string]string{"runs": "4", "failures": "2", "consecutive_failures": "0"}},
	}
	var holders []string
	for i, r := range runs {
		before := time.Now()
		got := runW8y(t, append(s.env, "CODE="+itoa(r.code)), append(args, holderChild...)...)
		after := time.Now()
		got.mustExit(t, r.code)
		holder := s.popHolder(t)
		holders = append(holders, holder)
		r.want["last_result"], r.want["last_exit_code"], r.want["last_holder"] = r.result, r.exit, holder
		state := s.stateOf(t, "st", "a")
		checkState(t, fmt.Sprintf("run %d", i), state, r.want, before, after)
		if ttl := s.Client.PTTL(ctx(t), s.key("state:a")).Val(); ttl <= 80*time.Second || ttl > 90*time.Second {
			t.Errorf("run %d: state TTL %s, want about 90s", i, ttl)
		}
	}

	// A lost lock: the child deletes its own lock and waits to be stopped.
	before := time.Now()
	got := runW8y(t, s.env, append(args, "-x", "600ms", "sh", "-c",
		`redis-cli -p "$REDIS_PORT" rpush holders "$W8Y_HOLDER" >/dev/null; redis-cli -p "$REDIS_PORT" del "$W8Y_LOCK_KEY" >/dev/null; sleep 30`)...)
	after := time.Now()
	got.mustExit(t, 122)
	holder := s.popHolder(t)
	holders = append(holders, holder)
	checkState(t, "lock-lost run", s.stateOf(t, "st", "a"), map[string]string{
		"runs": "5", "failures": "3", "consecutive_failures": "1", "last_result": "lock_lost",
		"last_exit_code": "143", "last_holder": holder,
	}, before, after)

	entries, err := s.Client.XRange(ctx(t), s.key("events"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Each take increments the fencing token: the n-th run's is n.
	var want []map[string]any
	for i, r := range runs {
		want = append(want,
			map[string]any{"type": "start", "item": "a", "holder": holders[i], "fence": itoa(i + 1)},
			map[string]any{"type": "finish", "item": "a", "holder": holders[i], "result": r.result, "exit_code": r.exit})
	}
	want = append(want,
		map[string]any{"type": "start", "item": "a", "holder": holder, "fence": itoa(len(runs) + 1)},
		map[string]any{"type": "lock_lost", "item": "a", "holder": holder, "result": "lock_lost", "exit_code": "143"})
	if len(entries) != len(want) {
		t.Fatalf("%d events, want %d: %v", len(entries), len(want), entries)
	}
	for i, e := range entries {
		if _, ok := e.Values["duration_ms"]; ok == (want[i]["type"] == "start") {
			t.Errorf("event %d: duration_ms present %v: %v", i, ok, e.Values)
		}
		delete(e.Values, "duration_ms")
		if fmt.Sprint(e.Values) != fmt.Sprint(want[i]) {
			t.Errorf("event %d: %v, want %v", i, e.Values, want[i])
		}
	}
	if ttl := s.Client.PTTL(ctx(t), s.key("events")).Val(); ttl <= 80*time.Second || ttl > 90*time.Second {
		t.Errorf("events TTL %s, want about 90s", ttl)
	}

	// --no-events leaves the stream alone, and still records the state.
	runW8y(t, s.env, append(args, append([]string{"--no-events"}, holderChild...)...)...).mustExit(t, 0)
	s.popHolder(t)
	if n := s.Client.XLen(ctx(t), s.key("events")).Val(); n != int64(len(want)) {
		t.Errorf("--no-events added events: %d, want %d", n, len(want))
	}
	if runs := s.stateOf(t, "st", "a")["runs"]; runs != "6" {
		t.Errorf("--no-events run: runs %q, want 6", runs)
	}
}

// TestInterruptedRun: a continuous worker stopped by SIGTERM records its
// child's run as interrupted, which neither counts as a failure nor ends a
// streak of them.
func TestInterruptedRun(t *testing.T) {
	s := withList(t, "int", "a")
	s.Client.HSet(ctx(t), s.key("state:a"), "runs", 7, "failures", 2, "consecutive_failures", 2)
	p := s.start(append([]string{"-c"}, report(":", "sleep 30")...)...)
	s.popStarted(t)
	p.signal(t, syscall.SIGTERM)
	p.wait(t).mustExit(t, 0)
	state := s.stateOf(t, "int", "a")
	for field, want := range map[string]string{"runs": "8", "failures": "2", "consecutive_failures": "2", "last_result": "interrupted", "last_exit_code": "143"} {
		if state[field] != want {
			t.Errorf("%s = %q, want %q", field, state[field], want)
		}
	}
	entries := s.Client.XRange(ctx(t), s.key("events"), "-", "+").Val()
	if len(entries) != 2 || entries[1].Values["type"] != "finish" || entries[1].Values["result"] != "interrupted" {
		t.Errorf("events %v", entries)
	}
}

// statusRow is a row of the --status table, by column.
type statusRow map[string]string

// parseTable splits --status' table into rows by its header's columns,
// which are at least two spaces apart, as are the cells.
func parseTable(t *testing.T, out string) map[string]statusRow {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	// The summary's lines come before the table.
	for len(lines) > 0 && !strings.HasPrefix(lines[0], "ITEM ") {
		lines = lines[1:]
	}
	if len(lines) == 0 {
		t.Fatalf("no table in %q", out)
	}
	gap := regexp.MustCompile(`\s{2,}`)
	header := gap.Split(lines[0], -1)
	rows := map[string]statusRow{}
	var order []string
	for _, line := range lines[1:] {
		cells := gap.Split(line, -1)
		if len(cells) == 1 {
			// The lines under the table: notes, and what a filter left out.
			break
		}
		if len(cells) != len(header) {
			t.Fatalf("row %q has %d cells, the header %d", line, len(cells), len(header))
		}
		row := statusRow{}
		for i, h := range header {
			row[h] = cells[i]
		}
		rows[cells[0]] = row
		order = append(order, cells[0])
	}
	rows["(order)"] = statusRow{"items": strings.Join(order, " ")}
	return rows
}

// TestStatus shows a locked item (its child runs), one cooling down, one
// backing off and an idle one, in list order, as a table and as JSON.
func TestStatus(t *testing.T) {
	s := withList(t, "ss", "busy", "cool", "back", "new")
	// A run each for busy and cool first, then one of busy that stays.
	for _, code := range []string{"0", "5"} {
		runW8y(t, append(s.env, "CODE="+code), append([]string{"-u", s.URL, "-k", "ss", "-q"}, holderChild...)...).mustExit(t, atoi(t, code))
		s.popHolder(t)
	}
	// The list is back to busy first; the child reports, then waits.
	s.seed(t, s.key("list"), "busy", "cool", "back", "new")
	p := s.start(append([]string{"-x", "20s"}, report(":", `redis-cli -p "$REDIS_PORT" blpop gate 30 >/dev/null`)...)...)
	s.popStarted(t)
	s.seed(t, s.key("list"), "busy", "cool", "back", "new")
	holder := s.Client.Get(ctx(t), s.key("lock:busy")).Val()
	s.Client.Set(ctx(t), s.key("cooldown:cool"), "x", time.Minute)
	s.Client.Set(ctx(t), s.key("backoff:back"), "x", 30*time.Second)
	busy := s.stateOf(t, "ss", "busy")
	// A one-shot run is announced in the registry once it has run for a
	// second.
	poll.WaitFor(t, "the one-shot run to be announced", func() bool { return s.Client.ZCard(ctx(t), s.key("workers")).Val() == 1 })

	out := statusOutput(t, nil, s.at()...)
	rows := parseTable(t, out)
	if got := rows["(order)"]["items"]; got != "busy cool back new" {
		t.Errorf("items in order %q", got)
	}
	// The worker that runs busy is the one live worker.
	if !strings.Contains(out, "live workers 1  ") {
		t.Errorf("the summary does not count one live worker:\n%s", out)
	}
	check := func(item string, want statusRow) {
		t.Helper()
		for col, v := range want {
			if got := rows[item][col]; got != v {
				t.Errorf("%s: %s = %q, want %q (row %v)", item, col, got, v, rows[item])
			}
		}
	}
	// The holder shows as host:pid, the process that holds the lock.
	hostPID := holder[:strings.LastIndexByte(holder, ':')]
	check("busy", statusRow{"HOLDER": hostPID, "LAST": "success", "STREAK": "0"})
	check("cool", statusRow{"HOLDER": "-", "LAST": "failure 5", "STREAK": "1"})
	check("back", statusRow{"HOLDER": "-", "LAST": "-", "ENDED": "-", "TOOK": "-", "STREAK": "0"})
	check("new", statusRow{"STATE": "idle", "HOLDER": "-", "LAST": "-", "ENDED": "-", "STREAK": "0"})
	// The state, with the time left of what it waits for, as far as it
	// can be pinned down.
	for item, want := range map[string]string{"busy": "locked", "cool": "cooldown", "back": "backoff"} {
		state, left, _ := strings.Cut(rows[item]["STATE"], " ")
		d, err := time.ParseDuration(left)
		limit := map[string]time.Duration{"busy": 20 * time.Second, "cool": time.Minute, "back": 30 * time.Second}[item]
		if state != want || err != nil || d <= 0 || d > limit {
			t.Errorf("%s: STATE = %q, want %s and a duration up to %s", item, rows[item]["STATE"], want, limit)
		}
	}
	if !strings.HasSuffix(rows["busy"]["ENDED"], " ago") || !strings.HasSuffix(rows["cool"]["ENDED"], " ago") {
		t.Errorf("ages: busy ended %q, cool ended %q", rows["busy"]["ENDED"], rows["cool"]["ENDED"])
	}
	// The table fits an 80-column terminal.
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 80 {
			t.Errorf("a %d-column line: %q", len(line), line)
		}
	}

	items := statusJSON(t, nil, "-u", s.URL, "-k", "ss")
	if len(items) != 4 {
		t.Fatalf("%d items: %v", len(items), items)
	}
	fields := []string{"item", "state", "problem", "holder", "lock_ttl_ms", "cooldown_ms", "backoff_ms", "pause_ms", "pause_reason", "paused_by", "last_start", "last_end",
		"last_exit_code", "last_duration_ms", "last_holder", "last_result", "runs", "failures", "consecutive_failures", "next_slot", "settings"}
	for _, item := range items {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range item {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(keys, slices.Sorted(slices.Values(fields))) {
			t.Errorf("fields %q, want %q", keys, fields)
		}
	}
	num := func(v string) float64 { f, _ := strconv.ParseFloat(v, 64); return f }
	exact := func(i int, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if fmt.Sprint(items[i][k]) != fmt.Sprint(v) {
				t.Errorf("item %d: %s = %v, want %v", i, k, items[i][k], v)
			}
		}
	}
	exact(0, map[string]any{"item": "busy", "state": "locked", "holder": holder, "cooldown_ms": nil, "backoff_ms": nil,
		"last_start": num(busy["last_start"]), "last_end": num(busy["last_end"]), "last_exit_code": 0, "last_holder": holder,
		"last_result": "success", "runs": 1, "failures": 0, "consecutive_failures": 0})
	exact(1, map[string]any{"item": "cool", "state": "cooldown", "holder": nil, "lock_ttl_ms": nil, "backoff_ms": nil,
		"last_exit_code": 5, "last_result": "failure", "runs": 1, "failures": 1, "consecutive_failures": 1})
	exact(2, map[string]any{"item": "back", "state": "backoff", "holder": nil, "lock_ttl_ms": nil, "cooldown_ms": nil,
		"last_start": nil, "last_end": nil, "last_exit_code": nil, "last_duration_ms": nil, "last_holder": nil, "last_result": nil, "runs": 0})
	exact(3, map[string]any{"item": "new", "state": "idle", "holder": nil, "lock_ttl_ms": nil, "cooldown_ms": nil, "backoff_ms": nil, "runs": 0})
	for i, f := range map[int]string{0: "lock_ttl_ms", 1: "cooldown_ms", 2: "backoff_ms"} {
		if v, ok := items[i][f].(float64); !ok || v <= 0 || v > 60_000 {
			t.Errorf("item %d: %s = %v", i, f, items[i][f])
		}
	}

	s.Client.RPush(ctx(t), "gate", "go")
	p.wait(t).wantExit(t, 0)
	// Bad input: one line, exit 125.
	s.Client.Set(ctx(t), "wrong:list", "x", 0)
	// The same words as w8yctl's, not Redis' WRONGTYPE.
	r := runW8y(t, nil, "--status", "-u", s.URL, "-k", "wrong")
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, `"wrong:list" holds a string, not a list of items`)
	r = runCtl(t, nil, "-u", s.URL, "-k", "wrong", "status")
	r.wantExit(t, 125)
	oneLineOf(t, "w8yctl", r.Stderr, `"wrong:list" holds a string, not a list of items`)
}

// TestStatusOfWhatCannotRun: --status shows what it can see is wrong as
// such: a missing list (a mistyped prefix, say), a lock key that holds
// another type (blocked, not locked forever), and items that can never run
// (invalid, not idle), each with why.
func TestStatusOfWhatCannotRun(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	const missing = `the list "wrok:list" does not exist or is empty: is --key-prefix (W8Y_KEY_PREFIX) right?`
	for _, args := range [][]string{{"--status"}, {"--status", "--json"}} {
		r := runW8y(t, nil, append(args, "-t", "-u", s.URL, "-k", "wrok")...)
		r.wantExit(t, 120)
		oneLine(t, r.Stderr, missing)
		if r.Stdout != "" {
			t.Errorf("%q of a missing list printed on stdout: %s", args, r)
		}
	}
	// A watch says so, and waits for the list.
	watch := startW8y(t, nil, "--status", "--watch=100ms", "-u", s.URL, "-k", "wrok")
	poll.WaitFor(t, "the watch to say the list is missing", func() bool { return strings.Contains(watch.stdoutSoFar(), missing) })
	watch.stop(t)

	s.seed(t, "odd:list", "hashed", "", "fine")
	s.Client.HSet(ctx(t), "odd:lock:hashed", "field", "value")
	r := runW8y(t, nil, "--status", "-u", s.URL, "-k", "odd")
	r.wantExit(t, 0)
	rows := parseTable(t, r.Stdout)
	for item, state := range map[string]string{"hashed": "blocked", `""`: "invalid", "fine": "idle"} {
		if got := rows[item]["STATE"]; got != state {
			t.Errorf("%s: STATE %q, want %q\n%s", item, got, state, r.Stdout)
		}
	}
	for _, note := range []string{
		"hashed is blocked: its lock key holds something other than a lock: an operator must delete it",
		`"" is invalid: it is empty, and w8y skips it`,
	} {
		if !strings.Contains(r.Stdout, note) {
			t.Errorf("the table does not say %q:\n%s", note, r.Stdout)
		}
	}
	items := statusJSON(t, nil, "-u", s.URL, "-k", "odd")
	if items[0]["state"] != "blocked" || items[1]["state"] != "invalid" || items[2]["problem"] != nil {
		t.Errorf("--json: %v", items)
	}
}

// TestStatusOnA80ColumnTerminal: on an 80-column terminal, rows with long
// items and holders are clipped to fit, instead of wrapping.
func TestStatusOnA80ColumnTerminal(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	long := "customer:" + strings.Repeat("7", 60)
	s.seed(t, "wide:list", long, "short")
	s.Client.Set(ctx(t), "wide:lock:"+long, "report-workers-5d8f9c7b6-x2x4q:1:1f2e3d4c5b6a", time.Minute)
	command := fmt.Sprintf("stty cols 80; %s --status -u %s -k wide", binary, s.URL)
	out, err := exec.Command("script", "-qec", command, "/dev/null").Output()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	screen := strings.ReplaceAll(string(out), "\r", "")
	for _, line := range strings.Split(strings.TrimSpace(screen), "\n") {
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("a %d-column line: %q", n, line)
		}
	}
	if !strings.Contains(screen, "customer:777") || !strings.Contains(screen, "…") || !strings.Contains(screen, "short") {
		t.Errorf("the screen:\n%s", screen)
	}
}

// TestStatusWatchTable: piped to a file, each turn of --watch's table is
// apart from the last and says when it was read.
func TestStatusWatchTable(t *testing.T) {
	s := withList(t, "swt", "a")
	p := startW8y(t, nil, "--status", "--watch=100ms", "-u", s.URL, "-k", "swt")
	turn := regexp.MustCompile(`(?m)^swt:list at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \(every 100ms\)\nswt:list: 1 items\n`)
	poll.WaitFor(t, "three turns", func() bool { return len(turn.FindAllString(p.stdoutSoFar(), -1)) >= 3 })
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	r.wantExit(t, 0)
	if !strings.Contains(r.Stdout, "\n\nswt:list at ") {
		t.Errorf("turns are not apart:\n%s", r.Stdout)
	}
}

// TestStatusWatch refreshes until SIGINT, then exits 0.
func TestStatusWatch(t *testing.T) {
	s := withList(t, "sw", "a")
	p := startW8y(t, nil, "--status", "--json", "--watch=100ms", "-u", s.URL, "-k", "sw")
	// Each refresh is one document; wait for a change to show up.
	poll.WaitFor(t, "the status", func() bool { return strings.Contains(p.stdoutSoFar(), `"item":"a"`) })
	s.Client.RPush(ctx(t), s.key("list"), "later")
	poll.WaitFor(t, "the watch to refresh", func() bool { return strings.Contains(p.stdoutSoFar(), `"item":"later"`) })
	p.signal(t, syscall.SIGINT)
	r := p.wait(t)
	r.wantExit(t, 0)
	if r.Stderr != "" {
		t.Errorf("--watch wrote on stderr: %s", r)
	}
}

// TestStatusOfAHundredThousandItems: on 100,000 items, --status opens with
// the summary of the whole list, and --state failing shows only the
// failing rows.
func TestStatusOfAHundredThousandItems(t *testing.T) {
	t.Parallel()
	s := setup(t, "big")
	items := redistest.Items(100_000)
	for i := 0; i < len(items); i += 10_000 {
		s.Client.RPush(ctx(t), s.key("list"), redistest.Values(items[i:i+10_000])...)
	}
	for _, i := range []int{7, 50_000, 99_999} {
		s.Client.HSet(ctx(t), s.key("state:"+items[i]), "consecutive_failures", "3")
	}
	r := runW8y(t, nil, "--status", "--state", "failing", "-u", s.URL, "-k", "big")
	r.wantExit(t, 0)
	lines := strings.Split(r.Stdout, "\n")
	if lines[0] != "big:list: 100000 items" || !strings.HasSuffix(lines[1], "failing 3") {
		t.Errorf("the summary does not come first:\n%s", strings.Join(lines[:min(6, len(lines))], "\n"))
	}
	rows := parseTable(t, r.Stdout)
	if got := rows["(order)"]["items"]; got != "i7 i50000 i99999" {
		t.Errorf("--state failing shows %q", got)
	}
}
