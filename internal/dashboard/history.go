package dashboard

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
)

// Bounds of the reads of the events stream that an item's runs and the
// chart make. Each XREVRANGE reads historyPage entries, well under a
// millisecond of Redis' time.
const (
	// maxRuns is the most runs an item's view shows.
	maxRuns = 50
	// runsWithin is how many of the latest entries the look for an item's
	// runs reads at most: an item that has not run for long shows fewer.
	runsWithin = 20_000
	// chartSpan and chartBucket are the chart's window and bar width.
	chartSpan   = 6 * time.Hour
	chartBucket = 10 * time.Minute
	// chartEntries is the most entries a chart reads: past it, the chart
	// covers less than chartSpan and says from when.
	chartEntries = 100_000
	historyPage  = 1000
	// chartEvery is the least time between two reads of the chart, however
	// many browsers are open: at most chartEntries/historyPage short
	// XREVRANGEs, some tens of milliseconds of Redis' time, every 10
	// seconds.
	chartEvery = 10 * time.Second
)

// Run is one run of an item, as the events stream tells it.
type Run struct {
	Holder string `json:"holder"`
	Fence  string `json:"fence,omitempty"`
	// Start and End are Unix milliseconds; End is null while it runs.
	// A start older than the events read is worked out from the duration.
	Start      *int64  `json:"start"`
	End        *int64  `json:"end"`
	Result     *string `json:"result"`
	ExitCode   *int64  `json:"exit_code"`
	DurationMs *int64  `json:"duration_ms"`
	Reason     string  `json:"reason,omitempty"`
}

// runs is GET /api/runs?item=ITEM[&n=N]: the item's last runs, newest
// first, from its start and end events.
func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	item := r.URL.Query().Get("item")
	if item == "" {
		writeError(w, http.StatusBadRequest, errTheItem)
		return
	}
	n, err := number(r, "n", 20, 1, maxRuns)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	// A run is two events at most; the operators' changes are not read.
	events, _, err := s.Fleet.Events(r.Context(), control.EventFilter{Item: item, Last: 2 * n, Within: runsWithin, Runs: true})
	if err != nil && !isRefused(err) {
		s.fail(w, err)
		return
	}
	runs := runsOf(events)
	if runs == nil {
		// An item with no run in the stream: an empty list, not null,
		// which the page's view would fail on.
		runs = []Run{}
	}
	if int64(len(runs)) > n {
		runs = runs[:n]
	}
	writeJSON(w, http.StatusOK, map[string]any{"item": item, "runs": runs})
}

// runsOf pairs the start and end events of one item's runs by the holder's
// token, which is each run's own, and returns the runs newest first.
func runsOf(events []control.Event) []Run {
	var out []Run
	open := map[string]int{}
	for _, e := range events {
		at := e.Time().UnixMilli()
		holder := e.Get("holder")
		if e.Get("type") == schema.EventStart {
			out = append(out, Run{Holder: holder, Fence: e.Get("fence"), Start: &at})
			open[holder] = len(out) - 1
			continue
		}
		result := e.Get("result")
		if result == "" {
			continue
		}
		i, ok := open[holder]
		if !ok {
			out = append(out, Run{Holder: holder})
			i = len(out) - 1
		}
		delete(open, holder)
		run := &out[i]
		run.End, run.Result, run.Reason = &at, &result, e.Get("reason")
		run.ExitCode, run.DurationMs = e.Number("exit_code"), e.Number("duration_ms")
		if run.Start == nil && run.DurationMs != nil {
			start := at - *run.DurationMs
			run.Start = &start
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Chart is the list's runs and failures over the last hours, a bar per
// bucket, oldest first.
type Chart struct {
	// From is when the first bucket starts, in Unix milliseconds;
	// BucketMs each bucket's width.
	From     int64 `json:"from"`
	BucketMs int64 `json:"bucket_ms"`
	Runs     []int `json:"runs"`
	Failures []int `json:"failures"`
	// Since is from when the chart counts: From, unless the window holds
	// more than chartEntries entries, of which the oldest were not read.
	Since int64 `json:"since"`
}

// readChart counts the runs that ended in the last chartSpan, by reading
// the events stream back from its newest entry, historyPage entries at a
// time, chartEntries at most.
func (s *Server) readChart(ctx context.Context) (*Chart, error) {
	now := s.Now()
	buckets := int(chartSpan / chartBucket)
	// Buckets end on a whole bucket, so that a bar does not shift as time
	// goes on.
	end := now.Truncate(chartBucket).Add(chartBucket)
	from := end.Add(-chartSpan)
	c := &Chart{From: from.UnixMilli(), BucketMs: chartBucket.Milliseconds(), Runs: make([]int, buckets), Failures: make([]int, buckets), Since: from.UnixMilli()}
	stream := s.Fleet.Keys.Events()
	top, read := "+", 0
	for read < chartEntries {
		page, err := s.Fleet.Client.XRevRangeN(ctx, stream, top, strconv.FormatInt(from.UnixMilli(), 10), historyPage).Result()
		if err != nil {
			return nil, redisconn.Wrap("read "+strconv.Quote(stream), err)
		}
		for _, m := range page {
			e := control.Event{ID: m.ID}
			at := e.Time()
			result, _ := m.Values["result"].(string)
			if result != "" {
				b := int(at.Sub(from) / chartBucket)
				if b >= 0 && b < buckets {
					c.Runs[b]++
					if schema.Result(result).Failed() {
						c.Failures[b]++
					}
				}
			}
		}
		read += len(page)
		if len(page) < historyPage {
			// The stream holds nothing older in the window.
			return c, nil
		}
		top = "(" + page[len(page)-1].ID
	}
	c.Since = control.Event{ID: strings.TrimPrefix(top, "(")}.Time().UnixMilli()
	return c, nil
}

// chart is GET /api/chart: the list's runs and failures over the last
// hours, at most chartEvery old.
func (s *Server) chart(w http.ResponseWriter, r *http.Request) {
	c, err := s.charts.get(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}
