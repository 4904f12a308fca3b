package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/schema"
)

// TestEveryResultFromTheStart: each result shows at zero before it first
// happens, so that rate() and alerts on it work from the start.
func TestEveryResultFromTheStart(t *testing.T) {
	m := New("v1", "abc")
	for _, r := range schema.Results {
		if got := testutil.ToFloat64(m.finished.WithLabelValues(string(r))); got != 0 {
			t.Errorf("%s: %v at the start", r, got)
		}
	}
	if got := testutil.ToFloat64(m.running); got != 0 {
		t.Errorf("running %v at the start", got)
	}
}

func TestCounts(t *testing.T) {
	m := New("v1", "abc")
	m.ChildStarted()
	m.ChildStarted()
	m.ChildEnded()
	m.RunEnded(schema.ResultSuccess, true, 2*time.Second)
	m.RunEnded(schema.ResultLockLost, true, time.Second)
	m.RunEnded(schema.ResultTimeout, true, time.Second)
	m.RunEnded(schema.ResultInterrupted, false, 0)
	m.IdlePass()
	for name, tt := range map[string]struct {
		got, want float64
	}{
		"started":     {testutil.ToFloat64(m.started), 2},
		"running":     {testutil.ToFloat64(m.running), 1},
		"success":     {testutil.ToFloat64(m.finished.WithLabelValues("success")), 1},
		"interrupted": {testutil.ToFloat64(m.finished.WithLabelValues("interrupted")), 1},
		"locks lost":  {testutil.ToFloat64(m.locksLost), 1},
		"timeouts":    {testutil.ToFloat64(m.timeouts), 1},
		"idle passes": {testutil.ToFloat64(m.idlePasses), 1},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", name, tt.got, tt.want)
		}
	}
	// A run without a child has no duration to observe.
	if n := testutil.CollectAndCount(m.duration, "w8y_run_duration_seconds"); n != len(schema.Results) {
		t.Errorf("%d duration series, want one per result", n)
	}
	if strings.Contains(dump(t, m), `w8y_run_duration_seconds_count{result="interrupted"} 1`) {
		t.Error("a run without a child was observed in the duration histogram")
	}
}

// dump is the metrics' exposition text.
func dump(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	srvMux(m, probes{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func TestHookCountsOnlyFailures(t *testing.T) {
	m := New("v1", "abc")
	h := redisHook{m: m}
	for _, err := range []error{nil, redis.Nil, context.Canceled, redis.ErrNoScript} {
		h.count(err)
	}
	if got := testutil.ToFloat64(m.redisErrors); got != 0 {
		t.Errorf("answers counted as errors: %v", got)
	}
	h.count(errors.New("dial tcp: connection refused"))
	if got := testutil.ToFloat64(m.redisErrors); got != 1 {
		t.Errorf("redis errors %v, want 1", got)
	}
}

// TestProbes: /livez fails only when the loop is stuck, never because
// Redis is down; /readyz fails only when Redis is; /healthz when either is.
func TestProbes(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	var pingErr error
	p := probes{redis: &health.Probe{Now: clock, Ping: func(context.Context) error { return pingErr }}, loop: health.NewHeartbeat(clock)}
	mux := srvMux(New("v1", "abc"), p)
	get := func(path string) string {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return fmt.Sprintf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	check := func(what string, want map[string]string) {
		t.Helper()
		for path, w := range want {
			if got := get(path); !strings.HasPrefix(got, w) {
				t.Errorf("%s: %s answers %q, want %q", what, path, got, w)
			}
		}
		// The probe's answer is kept a second: move past it.
		now = now.Add(2 * time.Second)
	}
	check("healthy", map[string]string{"/livez": "200 ok", "/readyz": "200 ok", "/healthz": "200 ok"})
	pingErr = errors.New("connection refused")
	check("redis down", map[string]string{"/livez": "200 ok", "/readyz": "503 unhealthy: redis: connection refused", "/healthz": "503 unhealthy: redis: connection refused"})
	pingErr = nil
	now = now.Add(health.Grace + time.Minute)
	check("loop stuck", map[string]string{"/livez": "503 unhealthy: the worker loop has made no progress", "/readyz": "200 ok", "/healthz": "503 unhealthy: the worker loop"})
}
