package status

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-runewidth"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestLagReadsTheDueIndex: lag counts the due entries whose time has come
// and whose item is neither locked nor paused, and the most overdue is the
// oldest of those with a known time (a run-now's 0 has none).
func TestLagReadsTheDueIndex(t *testing.T) {
	r, rdb, ctx := newReader(t, schema.Keys{Prefix: "lag:"})
	keys := r.Keys
	now := time.UnixMilli(1_800_000_000_000)
	ms := func(d time.Duration) float64 { return float64(now.Add(d).UnixMilli()) }

	lag, err := r.Lag(ctx, now)
	if err != nil || lag.Overdue != 0 || lag.MostOverdue != nil || lag.MostOverdueMs != 0 {
		t.Fatalf("no index: %+v, %v", lag, err)
	}
	// A live worker, which the items are late for (see
	// TestLagWithoutALiveWorker).
	rdb.ZAdd(ctx, keys.Workers(), z(ms(time.Minute), "h:2:y"))
	rdb.ZAdd(ctx, keys.Due(),
		z(ms(-90*time.Second), "late"), z(ms(-3*time.Minute), "running"), z(ms(-4*time.Minute), "paused"),
		z(ms(-time.Second), "just"), z(0, "run-now"), z(ms(time.Minute), "later"))
	rdb.Set(ctx, keys.Lock("running"), "h:1:x", time.Minute)
	rdb.HSet(ctx, keys.Pause("paused"), "by", "ops@h")
	lag, err = r.Lag(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if lag.Overdue != 3 || lag.MostOverdue == nil || *lag.MostOverdue != "late" || lag.MostOverdueMs != 90_000 {
		t.Errorf("lag %+v (most %v), want 3 overdue (late, just, run-now), late the most by 90s", lag, deref(lag.MostOverdue))
	}
}

// TestLagWithoutALiveWorker: with no worker live, only the items that
// came due by a schedule of their own (a cooldown, a backoff or a slot that
// ran out after their last run ended) are overdue, not those due since
// their run ended (no cooldown), never run, or whose run never ended (its
// worker died): nothing was to run them. A worker that starts makes them
// all late.
func TestLagWithoutALiveWorker(t *testing.T) {
	r, rdb, ctx := newReader(t, schema.Keys{Prefix: "idle:"})
	keys := r.Keys
	now := time.UnixMilli(1_800_000_000_000)
	ms := func(d time.Duration) float64 { return float64(now.Add(d).UnixMilli()) }
	ended := func(item string, start, end time.Duration) {
		rdb.HSet(ctx, keys.State(item), schema.FieldLastStart, int64(ms(start)), schema.FieldLastEnd, int64(ms(end)))
	}
	ended("just-ran", -3*time.Minute, -2*time.Minute)
	ended("cooled", -time.Hour, -time.Hour)
	ended("backed-off", -10*time.Minute, -10*time.Minute)
	ended("died", -time.Minute, -time.Hour)
	rdb.ZAdd(ctx, keys.Due(),
		z(ms(-2*time.Minute), "just-ran"), // due at its end: no cooldown
		z(ms(-5*time.Minute), "cooled"),   // an hour's run's cooldown of 55m ran out
		z(ms(-time.Minute), "backed-off"), // a backoff of 9m ran out
		z(ms(-30*time.Second), "died"),    // its lock ran out, its run never ended
		z(ms(-4*time.Minute), "never-ran"))
	lag, err := r.Lag(ctx, now)
	if err != nil || lag.Overdue != 2 || lag.MostOverdue == nil || *lag.MostOverdue != "cooled" || lag.MostOverdueMs != 300_000 {
		t.Errorf("no worker live: lag %+v (most %v), %v; want cooled and backed-off, cooled by 5m", lag, deref(lag.MostOverdue), err)
	}
	rdb.ZAdd(ctx, keys.Workers(), z(ms(time.Minute), "h:1:x"))
	lag, err = r.Lag(ctx, now)
	if err != nil || lag.Overdue != 5 || lag.MostOverdue == nil || *lag.MostOverdue != "cooled" {
		t.Errorf("a worker live: lag %+v (most %v), %v; want all 5, cooled the most", lag, deref(lag.MostOverdue), err)
	}
}

// TestLagCountsItemsNeverTried: where workers look (colocated keys), the
// lag counts as overdue the items that no worker has tried yet, from the
// fleet's marks and without reading the list: a list no worker has seen
// (no marks) whole, then the untried items at its head and those appended
// after the seen mark, besides the due index's overdue entries.
func TestLagCountsItemsNeverTried(t *testing.T) {
	r, rdb, ctx := newReader(t, schema.Keys{Prefix: "never:", Colocated: true})
	keys := r.Keys
	now := time.UnixMilli(1_800_000_000_000)
	check := func(name string, overdue, never int64) {
		t.Helper()
		lag, err := r.Lag(ctx, now)
		if err != nil || lag.Overdue != overdue || lag.NeverTried != never {
			t.Errorf("%s: lag %+v (%v), want %d overdue, %d of them never tried", name, lag, err, overdue, never)
		}
	}
	check("no list", 0, 0)
	rdb.RPush(ctx, keys.List(), "a", "b", "c", "d", "e")
	check("a list no worker has seen", 5, 5)
	rdb.Set(ctx, keys.Seen(), 5, 0)
	check("a list that a whole pass went round (seen alone)", 0, 0)
	rdb.Set(ctx, keys.Untried(), 2, 0)
	rdb.Set(ctx, keys.Seen(), 5, 0)
	check("two untried at the head", 2, 2)
	rdb.RPush(ctx, keys.List(), "f")
	check("and one appended", 3, 3)
	rdb.Set(ctx, keys.Untried(), 0, 0)
	rdb.Set(ctx, keys.Seen(), 6, 0)
	rdb.ZAdd(ctx, keys.Due(), z(float64(now.Add(-time.Minute).UnixMilli()), "a"))
	// A live worker, which the due entry is late for (see
	// TestLagWithoutALiveWorker); the items never tried count without one.
	rdb.ZAdd(ctx, keys.Workers(), z(float64(now.Add(time.Minute).UnixMilli()), "h:1:x"))
	check("all tried, one due", 1, 0)
	// Where the workers do not look, there are no marks to read.
	if lag, err := (&Reader{Client: rdb, Keys: schema.Keys{Prefix: "never:"}}).Lag(ctx, now); err != nil || lag.NeverTried != 0 || lag.Overdue != 1 {
		t.Errorf("not colocated: lag %+v (%v), want the due index's 1 alone", lag, err)
	}
}

// TestSummaryCountsTheWholeListAndFilterChoosesRows: the summary counts
// every item in chunks, whatever rows --state, --match and --limit choose;
// it counts the list's entries as LLEN does, and says how many are
// duplicates, while the states count each item once.
func TestSummaryCountsTheWholeListAndFilterChoosesRows(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "sum:"}
	items := redistest.Items(1200)
	rdb.RPush(ctx, keys.List(), redistest.Values(items)...)
	rdb.RPush(ctx, keys.List(), items[3], items[900])
	for _, i := range []int{5, 700, 1100} {
		rdb.HSet(ctx, keys.State(items[i]), schema.FieldConsecutiveFailures, "2")
	}
	rdb.Set(ctx, keys.Lock(items[700]), "h:1:x", time.Minute)
	rdb.Set(ctx, keys.Cooldown(items[1]), "1", time.Minute)
	rdb.HSet(ctx, keys.Pause(items[700]), "by", "ops@h")
	rdb.ZAdd(ctx, keys.Prefix+"workers", z(float64(time.Now().Add(time.Minute).UnixMilli()), "w1"), z(1, "gone"))
	r := &Reader{Client: rdb, Keys: keys, Batch: 100}

	failing, _ := ParseStates("failing")
	for _, tt := range []struct {
		name   string
		filter Filter
		rows   []string
	}{
		{"failing", Filter{States: failing, Limit: -1}, []string{items[5], items[700], items[1100]}},
		{"failing, limit 2", Filter{States: failing, Limit: 2}, []string{items[5], items[700]}},
		{"running and paused", Filter{States: []string{StateLocked, StatePaused}, Limit: -1}, []string{items[700]}},
		{"match", Filter{Match: ParseMatch("i11?"), Limit: 3}, []string{"i110", "i111", "i112"}},
	} {
		got, err := r.turn(ctx, tt.filter, true, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for _, st := range got.Items {
			rows = append(rows, st.Item)
		}
		if strings.Join(rows, " ") != strings.Join(tt.rows, " ") {
			t.Errorf("%s: rows %q, want %q", tt.name, rows, tt.rows)
		}
		want := Summary{Items: 1202, Duplicates: 2, Running: 1, Paused: 1, Cooling: 1, Idle: 1198, Failing: 3}
		if got.Summary == nil || *got.Summary != want {
			t.Errorf("%s: summary %+v, want %+v", tt.name, got.Summary, want)
		}
		var out bytes.Buffer
		writeSummary(&out, got, 0)
		if head, _, _ := strings.Cut(out.String(), "\n"); head != "sum:list: 1202 items, 2 of them duplicates (w8yctl check)" {
			t.Errorf("%s: the summary's first line is %q", tt.name, head)
		}
		if got.LiveWorkers != 1 {
			t.Errorf("%s: %d live workers, want 1", tt.name, got.LiveWorkers)
		}
	}
	// Without the summary, a turn stops once it has --limit's rows.
	got, err := r.turn(ctx, Filter{Limit: 10}, false, time.Now())
	if err != nil || got.Summary != nil || len(got.Items) != 10 {
		t.Errorf("a turn for 10 rows alone: %d rows, summary %v, %v", len(got.Items), got.Summary, err)
	}
}

// TestSummaryComesFirst: the table opens with the summary, and the JSON is
// one object whose items are one a line.
func TestSummaryComesFirst(t *testing.T) {
	now := time.Now()
	late := "late"
	tr := turn{List: "w:list", Summary: &Summary{Items: 2, Idle: 2, Failing: 1}, LiveWorkers: 3,
		Lag: Lag{Overdue: 4, MostOverdue: &late, MostOverdueMs: 125_000}, Items: sample(now, "a", "h:1:x")}
	var out bytes.Buffer
	tr.write(&out, All, now, 0)
	lines := strings.Split(out.String(), "\n")
	want := []string{"w:list: 2 items", "running 0  paused 0  cooling 0  backoff 0  idle 2  failing 1",
		"live workers 3  overdue 4, the most by 2m5s (late)", ""}
	if len(lines) < 5 || strings.Join(lines[:4], "\n") != strings.Join(want, "\n") || !strings.HasPrefix(lines[4], "ITEM ") {
		t.Errorf("the table:\n%s", out.String())
	}
	out.Reset()
	if err := writeJSON(&out, tr); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Summary Summary
		Lag     Lag
		Items   []Item
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Summary.Failing != 1 || doc.Lag.MostOverdueMs != 125_000 || len(doc.Items) != len(tr.Items) {
		t.Errorf("--json %v:\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "\n"); n != len(tr.Items)+2 {
		t.Errorf("--json has %d lines, want a line per item and two more:\n%s", n, out.String())
	}
}

// TestDocsStatusExample: docs/operating.md's --status example is what
// --status prints for the list it shows, in a pipe.
func TestDocsStatusExample(t *testing.T) {
	now := time.Now()
	ms := func(ago time.Duration) *int64 { return ptr(now.Add(-ago).UnixMilli()) }
	items := []Item{
		{Item: "busy", State: StateLocked, Holder: ptr("web-3:4178:1f2e3d4c5b6a"), LockTTL: ptr(int64(4200)), LastEnd: ms(41 * time.Minute),
			LastExitCode: ptr(int64(0)), LastDuration: ptr(int64(3100)), LastResult: ptr("success")},
		{Item: "cool", State: StateCooldown, Cooldown: ptr(int64(52_500)), LastEnd: ms(time.Minute), LastExitCode: ptr(int64(5)),
			LastDuration: ptr(int64(2000)), LastResult: ptr("failure"), ConsecutiveFailures: 1},
		{Item: "back", State: StateBackoff, Backoff: ptr(int64(29_800))},
		{Item: "new", State: StateIdle},
		{Item: "hashed", State: StateBlocked},
	}
	// A reply where the lock's value should be: a key of another type.
	items[4].classify(redis.Nil)
	var sum Summary
	for _, st := range items {
		sum.add(st)
	}
	tr := turn{List: "work:list", Summary: &sum, LiveWorkers: 3, Items: items,
		Lag: Lag{Overdue: 2, MostOverdue: ptr("new"), MostOverdueMs: 64_000}}
	var out bytes.Buffer
	tr.write(&out, All, now, 0)
	if want := doctest.Block(t, "docs/operating.md", "", "work:list: 5 items"); out.String() != want {
		t.Errorf("--status prints\n%s\ndocs/operating.md shows\n%s", out.String(), want)
	}
}

// TestWatchReadsTheWholeListNowAndThen: under --watch, a turn that --limit
// lets stop early reads only its rows' batch, and the whole list for the
// summary only on the first turn (then every summaryEvery).
func TestWatchReadsTheWholeListNowAndThen(t *testing.T) {
	srv := redistest.Start(t)
	keys := schema.Keys{Prefix: "watch:"}
	srv.Client.RPush(context.Background(), keys.List(), redistest.Values(redistest.Items(1200))...)
	// Loaded first, so that each call is one EVALSHA.
	if err := readScript.Load(context.Background(), srv.Client).Err(); err != nil {
		t.Fatal(err)
	}
	r := &Reader{Client: srv.Client, Keys: keys, Batch: 100}
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	w := &turnWriter{cancel: cancel, stopAt: 5}
	if err := Show(ctx, r, View{Watch: 20 * time.Millisecond, Filter: Filter{Limit: 1}}, w, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if w.turns != w.stopAt {
		t.Fatalf("%d turns, want %d (the watch timed out?)", w.turns, w.stopAt)
	}
	calls := redistest.CommandStats(t, srv.Client)
	// A batch is one LRANGE: 12 for the whole list, then 1 a turn.
	if got, want := calls["lrange"], 1200/100+w.stopAt-1; got != want {
		t.Errorf("%d turns read %d batches, want %d: the whole list once, then one batch a turn", w.turns, got, want)
	}
	if n := strings.Count(w.out.String(), "watch:list: 1200 items"); n != w.stopAt {
		t.Errorf("%d of %d turns show the summary:\n%s", n, w.stopAt, w.out.String())
	}
}

// turnWriter is --watch's stdout: it keeps what each turn writes, and ends
// the watch after stopAt turns.
type turnWriter struct {
	out           bytes.Buffer
	turns, stopAt int
	cancel        func()
}

func (w *turnWriter) Write(p []byte) (int, error) {
	w.turns++
	w.out.Write(p)
	if w.turns == w.stopAt {
		w.cancel()
	}
	return len(p), nil
}

// TestColumnsByDisplayWidth: CJK and emoji take two columns each, so rows
// with them line up; on a terminal they are clipped by display width, in
// a pipe every byte is kept without padding every line to the longest.
func TestColumnsByDisplayWidth(t *testing.T) {
	now := time.Now()
	var items []Item
	for _, name := range []string{"報告書-四二", "🚀-launch", "plain"} {
		items = append(items, Item{Item: name, State: StateIdle})
	}
	var out bytes.Buffer
	writeTable(&out, items, now, 0)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	at := -1
	for _, line := range lines {
		i := strings.Index(line, "idle")
		if i < 0 {
			i = strings.Index(line, "STATE")
		}
		col := runewidth.StringWidth(line[:i])
		if at >= 0 && col != at {
			t.Errorf("STATE at column %d, want %d:\n%s", col, at, out.String())
		}
		at = col
	}

	// A 5 KB item is cut in its row, even in a pipe, and in the note
	// under the table: --json gives it whole.
	long := strings.Repeat("x", 5000)
	out.Reset()
	writeTable(&out, append(items, Item{Item: long, State: StateBlocked, Problem: ptr("its lock key holds something other than a lock")}), now, 0)
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if runewidth.StringWidth(line) > 200 {
			t.Errorf("a %d-column line in a pipe: %.80q...", runewidth.StringWidth(line), line)
		}
	}
	cut := strings.Repeat("x", maxCell-1) + "…"
	if !strings.Contains(out.String(), "\n"+cut+"  blocked") || !strings.Contains(out.String(), "\n"+cut+" is blocked: its lock key") {
		t.Errorf("a pipe does not get the long item cut at %d columns:\n%s", maxCell, out.String())
	}

	out.Reset()
	writeTable(&out, append(items, Item{Item: strings.Repeat("報", 60), State: StateIdle}), now, 60)
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if w := runewidth.StringWidth(line); w > 60 {
			t.Errorf("a %d-column line on a 60-column terminal: %q", w, line)
		}
	}
}

func TestParseFilter(t *testing.T) {
	for _, tt := range []struct {
		states, match, limit string
		err                  string
	}{
		{"failing,running", "", "", ""},
		{"Cooling, backoff", "report-*", "10", ""},
		{"", "", "0", ""},
		{"broken", "", "", `--state "broken": "broken" is not a state: give one or more of running, paused`},
		{"", "", "-1", `--limit "-1": give a whole number`},
		{"", "", "ten", `--limit "ten": give a whole number`},
	} {
		_, err := ParseFilter(tt.states, tt.match, tt.limit)
		if (err == nil) != (tt.err == "") || err != nil && !strings.HasPrefix(err.Error(), tt.err) {
			t.Errorf("%q %q %q: %v, want %q", tt.states, tt.match, tt.limit, err, tt.err)
		}
	}
	m := ParseMatch("a/*.[x]?")
	for s, want := range map[string]bool{"a/b/c.[x]1": true, "a/.[x]": false, "ab.[x]1": false, "a/b.x1": false} {
		if m.MatchString(s) != want {
			t.Errorf("--match a/*.[x]? on %q: %v", s, !want)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func z(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// TestSummaryWithoutTheList: where the counts' indexes are kept, the
// summary alone (--limit 0) reads nothing of the list but its length, and
// counts what a whole read counts.
func TestSummaryWithoutTheList(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	keys := schema.Keys{Prefix: "idx:", Colocated: true}
	srv.Client.RPush(ctx, keys.List(), redistest.Values(redistest.Items(1200))...)
	srv.Client.RPush(ctx, keys.List(), "i7")
	var whole bytes.Buffer
	r := &Reader{Client: srv.Client, Keys: keys, Batch: 100}
	if err := Show(ctx, r, View{Filter: All}, &whole, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	srv.Client.ConfigResetStat(ctx)
	var alone bytes.Buffer
	if err := Show(ctx, r, View{Filter: Filter{Limit: 0}}, &alone, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	calls := redistest.CommandStats(t, srv.Client)
	// One HMGET: the last whole read's record (schema.Keys.Counted).
	for read, most := range map[string]int{"lrange": 0, "lindex": 0, "lpos": 0, "pttl": 0, "hmget": 1} {
		if calls[read] > most {
			t.Errorf("the summary alone called %s %d times: %v", read, calls[read], calls)
		}
	}
	summary := func(out bytes.Buffer) string {
		lines := strings.SplitN(out.String(), "\n", 3)
		return lines[0] + "\n" + lines[1]
	}
	if want := "idx:list: 1201 items, 1 of them a duplicate (w8yctl check)\nrunning 0  paused 0  cooling 0  backoff 0  idle 1200  failing 0"; summary(alone) != want || summary(whole) != want {
		t.Errorf("the summary alone says\n%s\na whole read\n%s\nwant\n%s", summary(alone), summary(whole), want)
	}
}
