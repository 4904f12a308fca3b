package integration_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// scanItems is longer than w8y's scan batch (1000), so that one pass takes
// several script calls.
const scanItems = 2500

// TestScanLongList: a pass over a list longer than one script call rotates
// it exactly as one LMOVE per candidate would, skips items that cannot be
// passed without ending the pass, and takes the first free lock, here in
// the ninth call.
func TestScanLongList(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := make([]string, scanItems)
	for i := range items {
		items[i] = fmt.Sprintf("item:%d", i)
	}
	items[10] = ""
	items[1200] = "bad\x00item"
	const free = 2100
	s.seed(t, "long:list", items...)
	pipe := s.Client.Pipeline()
	for i, item := range items {
		if i != free && item != "" && !strings.Contains(item, "\x00") {
			pipe.Set(ctx(t), "long:lock:"+item, "someone-else", time.Hour)
		}
	}
	if _, err := pipe.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.ConfigResetStat(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}

	r := runW8y(t, nil, "-u", s.URL, "-k", "long", "echo", "{}")
	r.mustExit(t, 0)
	r.wantStdout(t, items[free]+"\n")
	if n := strings.Count(r.Stderr, "skipping item"); n != 2 {
		t.Errorf("%d warnings about skipped items, want 2:\n%s", n, r.Stderr)
	}
	// The scan ran on the server: no LMOVE came from w8y, and each batch
	// rotated the list once; the finish, which leaves the item due now,
	// pushed one token to the wake list.
	if stats, calls := redistest.CommandStats(t, s.Client), takeCalls(free+1); stats["lmove"] != 0 || stats["rpush"] != calls+1 {
		t.Errorf("commands run: %v; want no LMOVE, %d RPUSH from batch.lua and the finish's wake", stats, calls)
	}
	want := append(slices.Clone(items[free+1:]), items[:free+1]...)
	if got := s.list(t, "long:list"); !slices.Equal(got, want) {
		t.Errorf("list after the run starts %q, want %q", got[:3], want[:3])
	}
	if n := s.Client.Exists(ctx(t), "long:lock:"+items[free]).Val(); n != 0 {
		t.Errorf("the lock of %q is still there", items[free])
	}
}

// TestScanOnePass: with every lock taken, a run looks at each candidate
// once: the list ends as it began, and the script rotated no more than the
// list's length, in batches.
func TestScanOnePass(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := make([]string, scanItems)
	pipe := s.Client.Pipeline()
	for i := range items {
		items[i] = "i" + itoa(i)
		pipe.Set(ctx(t), "pass:lock:"+items[i], "someone-else", time.Hour)
	}
	if _, err := pipe.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
	s.seed(t, "pass:list", items...)
	if err := s.Client.ConfigResetStat(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}

	r := runW8y(t, nil, "-u", s.URL, "-k", "pass", "--no-work-exit-code", "3", "true")
	r.mustExit(t, 3) // no work
	// 2500 candidates: LRANGE reads 8, 16, ..., 512, then 1000 and the 484
	// left; a second pass would read more. One LLEN in the look that finds
	// the list untried and elects this run to sweep it, one starts the pass,
	// and one more checks that the list exists after it found nothing (see
	// warnIfListMissing). (Read before this test's own LRANGE.)
	if stats, calls := redistest.CommandStats(t, s.Client), takeCalls(scanItems); stats["lrange"] != calls || stats["llen"] != 3 {
		t.Errorf("commands run: %v; want 3 LLEN and %d LRANGE", stats, calls)
	}
	if got := s.list(t, "pass:list"); !slices.Equal(got, items) {
		t.Errorf("list after one pass starts %q, want it as before", got[:3])
	}
}

// TestScanSurvivesScriptFlush: a flushed script cache (SCRIPT FLUSH, a
// restarted or failed-over server) costs one EVAL, not an error.
func TestScanSurvivesScriptFlush(t *testing.T) {
	s := withList(t, "flush", "a", "b", "c")
	for _, want := range []string{"a", "b", "c"} {
		if err := s.Client.ScriptFlush(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
		r := s.run("echo", "{}")
		r.wantExit(t, 0)
		r.wantStdout(t, want+"\n")
	}
	// Each run sent EVALSHA, got NOSCRIPT and sent EVAL, for the look, the
	// pass over the list's untried head that it leads to, and the release.
	if stats := redistest.CommandStats(t, s.Client); stats["eval"] != 9 {
		t.Errorf("commands run: %v; want 9 EVAL", stats)
	}
	s.noLocks()
}

// takeCalls is how many calls of batch.lua look at the first n candidates of
// a pass: the first looks at 8, and each next one at twice as many as the
// last, up to 1000.
func takeCalls(n int) int {
	calls := 0
	for batch := 8; n > 0; batch = min(2*batch, 1000) {
		n -= batch
		calls++
	}
	return calls
}
