package dashboard

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// getJSON GETs url and decodes its 200 reply into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body, _ := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

// TestSummaryCountsEachItemOnce: the summary counts the whole list, each
// item as one kind, a paused item that still runs as paused (and again
// in paused_running), never as running; it counts the list's entries as
// w8y --status does, and the duplicates among them.
//
// Its keys are set by hand, which the counts' indexes do not see: the
// list is one that an earlier fleet ran (its schema 1), which the
// dashboard counts by reading it whole. TestSummaryFromTheIndexes counts
// the same list from the indexes, as w8y's writers keep them.
func TestSummaryCountsEachItemOnce(t *testing.T) {
	items := []string{"run", "paused-run", "paused", "cool", "back", "idle", "fails", "idle"}
	srv, rdb, keys := start(t, "", items...)
	ctx := context.Background()
	rdb.Set(ctx, keys.Schema(), schema.Unindexed, 0)
	setKinds(ctx, rdb, keys)

	var sum Summary
	getJSON(t, srv.URL+"/api/summary", &sum)
	want := Counts{Running: 1, Paused: 2, PausedRunning: 1, Backoff: 1, Cooling: 1, Idle: 2, Failing: 2}
	if sum.Items != 8 || sum.Duplicates != 1 || sum.Counts != want {
		t.Errorf("summary = %d items, %d duplicates, %+v; want 8, 1, %+v", sum.Items, sum.Duplicates, sum.Counts, want)
	}
	c := sum.Counts
	if total := c.Running + c.Paused + c.Backoff + c.Cooling + c.Idle + c.Blocked + c.Invalid; total != sum.Items-sum.Duplicates {
		t.Errorf("the kinds add up to %d, not the %d items", total, sum.Items)
	}
}

// TestSummaryFromTheIndexes: where the counts' indexes are kept, the
// dashboard counts from them (without reading the list) what a whole read
// counts, kind by kind, and a search still reads the list.
func TestSummaryFromTheIndexes(t *testing.T) {
	items := []string{"run", "paused-run", "paused", "cool", "back", "idle", "fails", "idle"}
	s, srv, rdb, keys := startServer(t, "", items...)
	ctx := context.Background()
	setKinds(ctx, rdb, keys)
	// What w8y's writers add beside the keys: the runs' locks, the
	// pauses, the backoff (a failure on record), the due entries of what
	// is held, the failing.
	later := float64(time.Now().Add(time.Minute).UnixMilli())
	rdb.ZAdd(ctx, keys.Locks(), redis.Z{Score: later, Member: "run"}, redis.Z{Score: later, Member: "paused-run"})
	rdb.ZAdd(ctx, keys.Pauses(), redis.Z{Score: math.Inf(1), Member: "paused-run"}, redis.Z{Score: math.Inf(1), Member: "paused"})
	rdb.ZAdd(ctx, keys.Backoffs(), redis.Z{Score: later, Member: "back"})
	rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: later, Member: "run"}, redis.Z{Score: later, Member: "paused-run"},
		redis.Z{Score: later, Member: "cool"}, redis.Z{Score: later, Member: "back"})
	rdb.ZAdd(ctx, keys.Failing(), redis.Z{Score: math.Inf(1), Member: "fails"})

	whole, err := s.readListing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.ConfigResetStat(ctx)
	var sum Summary
	getJSON(t, srv.URL+"/api/summary", &sum)
	if calls := redistest.CommandStats(t, rdb); calls["lrange"]+calls["lpos"] > 0 {
		t.Errorf("the summary read the list: %v", calls)
	}
	// The backoff has no failure on record: "failing" counts it all the
	// same, as a whole read does.
	want := Counts{Running: 1, Paused: 2, PausedRunning: 1, Backoff: 1, Cooling: 1, Idle: 2, Failing: 2}
	if sum.Counts != want || whole.Counts != want || sum.Items != 8 || sum.Duplicates != whole.Duplicates {
		t.Errorf("from the indexes %d items, %d duplicates, %+v; a whole read %d, %d, %+v; want %+v",
			sum.Items, sum.Duplicates, sum.Counts, whole.Items, whole.Duplicates, whole.Counts, want)
	}
	var found searchReply
	getJSON(t, srv.URL+"/api/search?q=cool", &found)
	if found.Matches != 1 || len(found.Items) != 1 || found.Items[0].Item != "cool" {
		t.Errorf("search for cool: %+v", found)
	}
}

// setKinds sets, by hand, the keys that make the items of
// TestSummaryCountsEachItemOnce each of its kinds.
func setKinds(ctx context.Context, rdb *redis.Client, keys schema.Keys) {
	rdb.Set(ctx, keys.Lock("run"), "h:1:a", time.Minute)
	rdb.Set(ctx, keys.Lock("paused-run"), "h:1:b", time.Minute)
	rdb.HSet(ctx, keys.Pause("paused-run"), schema.PauseFieldReason, "vendor maintenance")
	rdb.HSet(ctx, keys.Pause("paused"), schema.PauseFieldReason, "disk full")
	rdb.Set(ctx, keys.Cooldown("cool"), "1", time.Minute)
	rdb.Set(ctx, keys.Backoff("back"), "1", time.Minute)
	rdb.HSet(ctx, keys.State("fails"), schema.FieldConsecutiveFailures, "2")
}

// TestSummarySaysWhatRedisNeeds: the summary says whether the server may
// evict w8y's keys or is a replica.
func TestSummarySaysWhatRedisNeeds(t *testing.T) {
	srv, rdb, _ := start(t, "", "a")
	ctx := context.Background()
	var sum Summary
	getJSON(t, srv.URL+"/api/summary", &sum)
	if sum.Redis == nil || sum.Redis.MayEvict || sum.Redis.Replica {
		t.Errorf("summary's redis = %+v, want a server that neither evicts nor is a replica", sum.Redis)
	}
	rdb.ConfigSet(ctx, "maxmemory", "64mb")
	rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru")
	defer rdb.ConfigSet(ctx, "maxmemory", "0")
	fresh := readNeeds(ctx, rdb)
	if fresh == nil || !fresh.MayEvict || fresh.Policy != "allkeys-lru" || fresh.MaxMemory != 64<<20 {
		t.Errorf("readNeeds on an evicting server = %+v, want may_evict with its policy", fresh)
	}
}

// TestSummaryShowsThePlaces: /api/summary has no places without a cap, and
// under --fleet-max-running those whose lock exists and the cap.
func TestSummaryShowsThePlaces(t *testing.T) {
	for _, capped := range []bool{false, true} {
		srv, rdb, keys := start(t, "", "a", "b")
		ctx := context.Background()
		if capped {
			rdb.Set(ctx, keys.FleetMax(), 2, 0)
			rdb.Set(ctx, keys.Lock("a"), "h:1:a", time.Minute)
			rdb.SAdd(ctx, keys.Running(), keys.Lock("a"), keys.Lock("b"))
		}
		var sum Summary
		getJSON(t, srv.URL+"/api/summary", &sum)
		switch {
		case !capped && sum.FleetMax != nil:
			t.Errorf("without a cap: %+v, want none", sum.FleetMax)
		case capped && (sum.FleetMax == nil || *sum.FleetMax != status.Places{InUse: 1, Limit: 2}):
			t.Errorf("with a cap of 2 and one lock: %+v", sum.FleetMax)
		}
	}
}

// TestSummaryReadOnceForManyBrowsers: however many requests come at once,
// one reads the list, and the others get what it read; a later request
// within summaryEvery reads nothing.
func TestSummaryReadOnceForManyBrowsers(t *testing.T) {
	s, srv, _, _ := startServer(t, "", redistest.Items(2000)...)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			var sum Summary
			getJSON(t, srv.URL+"/api/summary", &sum)
			if sum.Items != 2000 {
				t.Errorf("summary of %d items, want 2000", sum.Items)
			}
		})
	}
	wg.Wait()
	var hits searchReply
	getJSON(t, srv.URL+"/api/search?q=i1999", &hits)
	if reads := s.summaries.count(); reads != 1 {
		t.Errorf("the list was read %d times for 21 requests, want once", reads)
	}
}

// TestCachedReadsAgainWhenOld: a value older than every is read again,
// and one that took long is kept longer, in proportion.
func TestCachedReadsAgainWhenOld(t *testing.T) {
	now := time.Unix(1000, 0)
	took := time.Duration(0)
	reads := 0
	c := newCached(5*time.Second, func() time.Time { return now }, func(context.Context) (int, error) {
		reads++
		now = now.Add(took)
		return reads, nil
	})
	ctx := context.Background()
	steps := []struct {
		advance, took time.Duration
		want          int
	}{
		{0, 0, 1},
		{4 * time.Second, 0, 1},
		{time.Second, 0, 2},
		// This read takes 3s: the next comes 12s after it, not 5s.
		{5 * time.Second, 3 * time.Second, 3},
		{11 * time.Second, 0, 3},
		{time.Second, 0, 4},
	}
	for i, step := range steps {
		now = now.Add(step.advance)
		took = step.took
		if got, err := c.get(ctx); err != nil || got != step.want {
			t.Fatalf("step %d: got %d (%v), want %d", i, got, err, step.want)
		}
	}
}

// TestSearchCoversTheWholeList: a search finds items anywhere in the
// list, whatever page the browser shows, in any case, by state too, and
// reads the first hits' rows anew.
func TestSearchCoversTheWholeList(t *testing.T) {
	items := redistest.Items(1200)
	srv, rdb, keys := start(t, "", items...)
	rdb.Set(context.Background(), keys.Backoff("i1107"), "1", time.Minute)
	var r searchReply
	getJSON(t, srv.URL+"/api/search?q=I110&limit=3", &r)
	var names []string
	for _, st := range r.Items {
		names = append(names, st.Item)
	}
	// i110 and i1100 to i1109: 11 items.
	if r.Matches != 11 || strings.Join(names, ",") != "i110,i1100,i1101" {
		t.Errorf("search I110 = %d matches %q, want 11 and i110,i1100,i1101", r.Matches, names)
	}
	getJSON(t, srv.URL+"/api/search?state=failing", &r)
	if r.Matches != 1 || len(r.Items) != 1 || r.Items[0].Item != "i1107" || r.Items[0].State != status.StateBackoff {
		t.Errorf("failing = %+v", r)
	}
	for _, query := range []string{"state=sad", "limit=0", "limit=x"} {
		if code, body, _ := get(t, srv.URL+"/api/search?"+query); code != http.StatusBadRequest {
			t.Errorf("?%s: %d %s, want 400", query, code, body)
		}
	}
}

// TestSearchIgnoresCase: a search matches names whatever the case of
// either, as Unicode folds case: upper-case names found by a lower-case
// query and the reverse, and the Greek final sigma, which lower-casing
// alone does not match.
func TestSearchIgnoresCase(t *testing.T) {
	srv, _, _ := start(t, "", "Backup-DB", "backup-files", "ΣΊΣΥΦΟΣ", "Reports")
	for query, want := range map[string]string{
		"backup":    "Backup-DB,backup-files",
		"BACKUP-db": "Backup-DB",
		"-DB":       "Backup-DB",
		"σίσυφος":   "ΣΊΣΥΦΟΣ",
		"ΣΊΣΥΦΟΣ":   "ΣΊΣΥΦΟΣ",
		"reports":   "Reports",
		"restore":   "",
	} {
		var r searchReply
		getJSON(t, srv.URL+"/api/search?q="+url.QueryEscape(query), &r)
		var names []string
		for _, st := range r.Items {
			names = append(names, st.Item)
		}
		if got := strings.Join(names, ","); got != want || r.Matches != int64(len(names)) {
			t.Errorf("search %q = %d matches %q, want %q", query, r.Matches, got, want)
		}
	}
}

// TestLagFromTheDueIndex: the lag counts the entries due by now, and
// ages the oldest that has a time; one made due "now" (score 0) counts
// without an age, and those due later, or held by their keys, do not
// count; the items that no worker has tried yet count, without an age.
func TestLagFromTheDueIndex(t *testing.T) {
	rdb := redistest.Start(t).Client
	keys := schema.Keys{Prefix: "lag:", Colocated: true}
	ctx := context.Background()
	now := time.UnixMilli(1_800_000_000_000)
	at := func(d time.Duration) float64 { return float64(now.Add(d).UnixMilli()) }
	check := func(name string, keys schema.Keys, want Lag) {
		t.Helper()
		got, err := readLag(ctx, rdb, keys, now)
		if err != nil {
			t.Fatal(err)
		}
		if got.Known != want.Known || got.Due != want.Due || got.NeverTried != want.NeverTried || (got.OldestMs == nil) != (want.OldestMs == nil) || got.OldestMs != nil && *got.OldestMs != *want.OldestMs {
			t.Errorf("%s: lag = %+v (oldest %v), want %+v (oldest %v)", name, got, deref(got.OldestMs), want, deref(want.OldestMs))
		}
	}
	check("no index", keys, Lag{Known: true})
	// A live worker, which the items are late for.
	rdb.ZAdd(ctx, keys.Workers(), redis.Z{Member: "h:1:x", Score: at(time.Minute)})
	rdb.ZAdd(ctx, keys.Due(), redis.Z{Member: "now", Score: 0}, redis.Z{Member: "later", Score: at(time.Minute)})
	check("due now only", keys, Lag{Known: true, Due: 1})
	rdb.ZAdd(ctx, keys.Due(), redis.Z{Member: "late", Score: at(-90 * time.Second)}, redis.Z{Member: "just", Score: at(-time.Second)})
	oldest := int64(90_000)
	check("late items", keys, Lag{Known: true, Due: 3, OldestMs: &oldest})
	// Entries older still, of items that a run, a pause, a cooldown or a
	// backoff holds (a run that outlived its first lock expiry): not late.
	for _, blocker := range []string{keys.Lock("long"), keys.Pause("paused"), keys.Cooldown("cool"), keys.Backoff("back")} {
		rdb.Set(ctx, blocker, "1", time.Minute)
	}
	for _, item := range []string{"long", "paused", "cool", "back"} {
		rdb.ZAdd(ctx, keys.Due(), redis.Z{Member: item, Score: at(-time.Hour)})
	}
	check("held items", keys, Lag{Known: true, Due: 3, OldestMs: &oldest})
	// Two items that no worker has tried yet (no marks) are behind too.
	rdb.RPush(ctx, keys.List(), "x", "y")
	check("items never tried", keys, Lag{Known: true, Due: 5, NeverTried: 2, OldestMs: &oldest})
	check("not colocated", schema.Keys{Prefix: "lag:"}, Lag{})
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestRunsOfAnItem: an item's runs pair its start and end events by the
// holder's token, newest first, with a run under way open, and a run
// whose start is older than the events read dated from its duration. An
// operator's changes in the stream (pause, run-now) are no runs.
func TestRunsOfAnItem(t *testing.T) {
	srv, rdb, keys := start(t, "", "a", "b")
	ctx := context.Background()
	add := func(ms int64, fields ...string) {
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Events(), ID: formatID(ms), Values: fields})
	}
	add(1000, "type", "finish", "item", "a", "holder", "h:1:old", "result", "success", "exit_code", "0", "duration_ms", "400")
	add(2000, "type", "start", "item", "a", "holder", "h:1:x", "fence", "7")
	add(2100, "type", "start", "item", "b", "holder", "h:2:y", "fence", "8")
	add(2200, "type", schema.EventPause, "item", "a", "by", "alice@host", "reason", "disk full")
	add(2500, "type", "finish", "item", "a", "holder", "h:1:x", "result", "failure", "exit_code", "3", "duration_ms", "500")
	add(2600, "type", schema.EventRunNow, "item", "a", "by", "alice@host")
	add(3000, "type", "start", "item", "a", "holder", "h:1:z", "fence", "9")
	var got struct {
		Runs []Run `json:"runs"`
	}
	getJSON(t, srv.URL+"/api/runs?item=a", &got)
	type brief struct {
		holder     string
		start, end any
		result     any
		code, took any
	}
	var briefs []brief
	for _, r := range got.Runs {
		briefs = append(briefs, brief{r.Holder, deref(r.Start), deref(r.End), derefS(r.Result), deref(r.ExitCode), deref(r.DurationMs)})
	}
	want := []brief{
		{"h:1:z", int64(3000), nil, nil, nil, nil},
		{"h:1:x", int64(2000), int64(2500), "failure", int64(3), int64(500)},
		{"h:1:old", int64(600), int64(1000), "success", int64(0), int64(400)},
	}
	if len(briefs) != len(want) {
		t.Fatalf("runs = %+v, want %+v", briefs, want)
	}
	for i := range want {
		if briefs[i] != want[i] {
			t.Errorf("run %d = %+v, want %+v", i, briefs[i], want[i])
		}
	}
	if code, _, _ := get(t, srv.URL+"/api/runs"); code != http.StatusBadRequest {
		t.Errorf("GET /api/runs without an item: %d, want 400", code)
	}

	// An item that operators change often still shows its last n runs:
	// the changes between them do not take the runs' places.
	for i := range int64(10) {
		add(4000+i*10, "type", schema.EventPause, "item", "a", "by", "alice@host")
	}
	getJSON(t, srv.URL+"/api/runs?item=a&n=2", &got)
	if len(got.Runs) != 2 || got.Runs[1].Holder != "h:1:x" {
		t.Errorf("after ten changes, /api/runs?n=2 gave %d runs (%+v), want the last two, h:1:z and h:1:x", len(got.Runs), got.Runs)
	}
}

func derefS(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func formatID(ms int64) string { return strconv.FormatInt(ms, 10) + "-0" }

// TestChartCountsRunsAndFailures: the chart counts the runs that ended in
// its window, and the failed ones again, in the bucket of their end; starts,
// an operator's changes and older runs are not counted.
func TestChartCountsRunsAndFailures(t *testing.T) {
	s, srv, rdb, keys := startServer(t, "", "a")
	now := time.UnixMilli(1_800_000_123_456)
	s.Now = func() time.Time { return now }
	ctx := context.Background()
	add := func(ago time.Duration, fields ...string) {
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Events(), ID: formatID(now.Add(-ago).UnixMilli()), Values: fields})
	}
	add(7*time.Hour, "type", "finish", "item", "a", "holder", "h", "result", "failure")
	add(2*time.Hour, "type", "timeout", "item", "a", "holder", "h", "result", "timeout")
	add(2*time.Hour-time.Millisecond, "type", "start", "item", "a", "holder", "h")
	add(5*time.Minute, "type", "finish", "item", "a", "holder", "h", "result", "success")
	add(5*time.Minute-time.Millisecond, "type", "finish", "item", "a", "holder", "h", "result", "failure")
	add(5*time.Minute-2*time.Millisecond, "type", schema.EventPause, "item", "a", "by", "alice@host", "reason", "disk full")
	add(5*time.Minute-3*time.Millisecond, "type", schema.EventRemove, "item", "a", "by", "alice@host")
	add(time.Millisecond, "type", "cancelled", "item", "a", "holder", "h", "result", "cancelled")
	var c Chart
	getJSON(t, srv.URL+"/api/chart", &c)
	bucket := func(ago time.Duration) int { return int(now.Add(-ago).Sub(time.UnixMilli(c.From)) / chartBucket) }
	sum := func(v []int) (n int) {
		for _, x := range v {
			n += x
		}
		return n
	}
	if len(c.Runs) != 36 || c.BucketMs != chartBucket.Milliseconds() || c.Since != c.From {
		t.Fatalf("chart = %+v", c)
	}
	if sum(c.Runs) != 4 || sum(c.Failures) != 2 || c.Runs[bucket(2*time.Hour)] != 1 || c.Failures[bucket(2*time.Hour)] != 1 ||
		c.Runs[bucket(5*time.Minute)] < 2 || c.Failures[bucket(5*time.Minute)] != 1 {
		t.Errorf("chart = runs %v, failures %v", c.Runs, c.Failures)
	}
}

// BenchmarkSummary is one read of the whole list's summary, what one
// browser or a hundred cost Redis every summaryEvery at most, on 100,000
// items. It reports the Redis CPU that a read costs, from INFO cpu. (How
// long each command holds Redis is status.Reader's, measured for --status:
// see docs/benchmarks.md.)
func BenchmarkSummary(b *testing.B) {
	const n = 100_000
	rdb := redistest.Start(b).Client
	keys := schema.Keys{Prefix: "bench:", Colocated: true}
	ctx := context.Background()
	redistest.Seed(b, rdb, keys.List(), redistest.Items(n)...)
	s := &Server{Fleet: &control.Fleet{Client: rdb, Keys: keys}, Status: &status.Reader{Client: rdb, Keys: keys}, Log: zerolog.Nop(), Now: time.Now}
	cpu := func() float64 {
		info := redistest.Info(b, rdb, "cpu")
		sys, _ := strconv.ParseFloat(info["used_cpu_sys"], 64)
		user, _ := strconv.ParseFloat(info["used_cpu_user"], 64)
		return sys + user
	}
	before := cpu()
	reads := 0
	for b.Loop() {
		sum, err := s.readSummary(ctx)
		if err != nil || sum.Items != n {
			b.Fatalf("summary: %v, %+v", err, sum)
		}
		reads++
	}
	b.ReportMetric((cpu()-before)*1000/float64(reads), "redis-cpu-ms/op")
}
