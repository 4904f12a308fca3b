package status

import (
	"bytes"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/schema"
)

// TestRate: no rate recorded reads as none; under a rate, the starts in its
// window are counted on Redis' clock, the next start is when the N-th
// newest leaves the window, and reading writes nothing. The summary shows
// it on a line of its own.
func TestRate(t *testing.T) {
	r, rdb, ctx := newReader(t, schema.Keys{Prefix: "r:"})
	keys := r.Keys
	if got, err := r.Rate(ctx); err != nil || got != nil {
		t.Fatalf("without a rate: %+v, %v; want nil", got, err)
	}
	rdb.Set(ctx, keys.FleetRate(), "3/2000", 0)
	if got, err := r.Rate(ctx); err != nil || *got != (Rate{Rate: "3/2s", Limit: 3, PerMs: 2000}) {
		t.Fatalf("a rate, no start: %+v, %v", got, err)
	}
	now := rdb.Time(ctx).Val().UnixMilli()
	// Newest first: two starts inside the window, two outside.
	rdb.RPush(ctx, keys.Starts(), now-100, now-1500, now-2500, now-9000)
	got, err := r.Rate(ctx)
	if err != nil || got.Started != 2 || got.NextStartMs != 0 {
		t.Fatalf("two starts in the window of 3/2s: %+v, %v", got, err)
	}
	rdb.LPush(ctx, keys.Starts(), now-50)
	got, err = r.Rate(ctx)
	// The third newest, at now-1500, leaves the window 501ms from now, less
	// the time this read took.
	if err != nil || got.Started != 3 || got.NextStartMs <= 0 || got.NextStartMs > 501 {
		t.Fatalf("three starts in the window of 3/2s: %+v, %v", got, err)
	}
	if n := rdb.LLen(ctx, keys.Starts()).Val(); n != 5 {
		t.Errorf("reading changed the log: %d starts", n)
	}
	if line := got.Line(); !strings.HasPrefix(line, "rate: 3 of 3 in the last 2s, next start in ") || !strings.HasSuffix(line, "ms (--fleet-rate 3/2s)") {
		t.Errorf("the line: %q", line)
	}
	got.NextStartMs = 0
	if line := got.Line(); line != "rate: 3 of 3 in the last 2s (--fleet-rate 3/2s)" {
		t.Errorf("the line while a start is allowed: %q", line)
	}
	var out bytes.Buffer
	writeSummary(&out, turn{List: keys.List(), Summary: &Summary{}, FleetRate: &Rate{Rate: "100/1h", Limit: 100, PerMs: 3600000, Started: 7}}, 0)
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 4 || lines[3] != "rate: 7 of 100 in the last 1h (--fleet-rate 100/1h)" {
		t.Errorf("the summary under a rate:\n%s", out.String())
	}
	out.Reset()
	writeSummary(&out, turn{List: keys.List(), Summary: &Summary{}}, 0)
	if strings.Contains(out.String(), "rate") {
		t.Errorf("the summary without a rate:\n%s", out.String())
	}
	// A log longer than N (another worker's rate has a larger N): all its
	// starts in the window count. Each start is half a second from the
	// window's edge, which a loaded machine's read does not cross.
	rdb.Del(ctx, keys.Starts())
	rdb.Set(ctx, keys.FleetRate(), "3/20000", 0)
	now = rdb.Time(ctx).Val().UnixMilli()
	var starts []any
	for i := range 40 {
		starts = append(starts, now-500-int64(i)*1000)
	}
	rdb.RPush(ctx, keys.Starts(), starts...)
	if got, err := r.Rate(ctx); err != nil || got.Started != 20 {
		t.Errorf("40 starts a second apart, the window 20s: %+v, %v; want 20 in it", got, err)
	}
}
