package integration_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// scrape reads the metrics at url as "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// health gets /healthz and returns its status code and body.
func health(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestMetrics runs a known sequence through a continuous worker (a success,
// a lost lock, a timeout, then idle passes over an empty list) and checks
// the counters scraped over HTTP.
func TestMetrics(t *testing.T) {
	s := withList(t, "m", "a", "b", "c")
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	// Each child takes its item off the list, reports, and exits with the
	// code the test pushes to gate:<item>, or waits to be stopped.
	child := `redis-cli -p "$REDIS_PORT" lrem m:list 0 "$W8Y_ITEM" >/dev/null
` + started + `
code=$(redis-cli -p "$REDIS_PORT" blpop "gate:$W8Y_ITEM" 30 | tail -n 1)
exit "$code"`
	p := s.start("-c", "--idle-wait", "100ms", "--timeout", "3s", "-i", "0", "-i", "124",
		"--metrics-addr", addr, "sh", "-c", child)
	if got := s.popStarted(t); got != "a" {
		t.Fatalf("started %q, want a", got)
	}
	s.Client.RPush(ctx(t), "gate:a", "0")
	if got := s.popStarted(t); got != "b" {
		t.Fatalf("started %q, want b", got)
	}
	s.Client.Del(ctx(t), s.key("lock:b"))
	if got := s.popStarted(t); got != "c" {
		t.Fatalf("started %q, want c", got)
	}
	// c times out after 3s; then the list is empty and the worker idles.
	url := "http://" + addr + "/metrics"
	var m map[string]float64
	if !poll.Poll(poll.Timeout, func() bool { m = scrape(t, url); return m["w8y_idle_passes_total"] >= 2 }) {
		t.Fatalf("no idle passes: %v", m)
	}
	want := map[string]float64{
		"w8y_items_started_total":                          3,
		`w8y_items_finished_total{result="success"}`:       1,
		`w8y_items_finished_total{result="lock_lost"}`:     1,
		`w8y_items_finished_total{result="timeout"}`:       1,
		`w8y_items_finished_total{result="failure"}`:       0,
		`w8y_items_finished_total{result="interrupted"}`:   0,
		"w8y_locks_lost_total":                             1,
		"w8y_timeouts_total":                               1,
		"w8y_children_running":                             0,
		"w8y_redis_errors_total":                           0,
		`w8y_run_duration_seconds_count{result="success"}`: 1,
		`w8y_run_duration_seconds_count{result="timeout"}`: 1,
		`w8y_run_duration_seconds_count{result="failure"}`: 0,
	}
	for name, v := range want {
		if got, ok := m[name]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, v)
		}
	}
	// The timed-out child ran at least the 3s timeout, the 10s bucket
	// holds it and the 0.64s one does not.
	if sum := m[`w8y_run_duration_seconds_sum{result="timeout"}`]; sum < 3 {
		t.Errorf("timeout run took %vs in the histogram, want >= 3", sum)
	}
	if m[`w8y_run_duration_seconds_bucket{result="timeout",le="0.64"}`] != 0 || m[`w8y_run_duration_seconds_bucket{result="timeout",le="10.24"}`] != 1 {
		t.Errorf("timeout buckets: %v %v", m[`w8y_run_duration_seconds_bucket{result="timeout",le="0.64"}`], m[`w8y_run_duration_seconds_bucket{result="timeout",le="10.24"}`])
	}
	if len(m) == 0 || m[`w8y_build_info{commit="unknown",version="dev"}`] != 1 {
		t.Errorf("no build info: %v", m)
	}
	// How far behind the fleet is, read from the due index at the scrape.
	for _, name := range []string{`w8y_redis_up{list="m:list"}`, `w8y_overdue_items{list="m:list"}`, `w8y_lag_seconds{list="m:list"}`} {
		if _, ok := m[name]; !ok {
			t.Errorf("the scrape has no %s", name)
		}
	}
	if m[`w8y_redis_up{list="m:list"}`] != 1 {
		t.Errorf("w8y_redis_up = %v with Redis up, want 1", m[`w8y_redis_up{list="m:list"}`])
	}
	// Only w8y's own metrics: a private registry, without Go's defaults.
	for name := range m {
		if !strings.HasPrefix(name, "w8y_") {
			t.Errorf("foreign metric %q", name)
		}
	}
	p.stop(t)
	if _, err := http.Get(url); err == nil {
		t.Error("the metrics server outlived w8y")
	}
}

// waitHealth polls /healthz until it answers code.
func waitHealth(t *testing.T, url string, code int) string {
	t.Helper()
	var got int
	var body string
	if !poll.Poll(poll.Timeout, func() bool { got, body = health(url); return got == code }) {
		t.Fatalf("/healthz answers %d %q, want %d", got, body, code)
	}
	return body
}

// TestHealthz: /healthz and /readyz are healthy while Redis answers and
// the loop runs, unhealthy while Redis is gone, and healthy again when it
// returns; /livez, which the manifests give Kubernetes' liveness probe,
// stays healthy throughout, so that a Redis outage restarts no worker.
// Redis errors are counted meanwhile.
func TestHealthz(t *testing.T) {
	s := withList(t, "h", "a")
	s.Client.Set(ctx(t), s.key("lock:a"), "someone-else", time.Hour)
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	p := s.start("-c", "--idle-wait", "100ms", "--metrics-addr", addr, "true")
	url := "http://" + addr + "/healthz"
	for _, probe := range []string{"/healthz", "/readyz", "/livez"} {
		if body := waitHealth(t, "http://"+addr+probe, http.StatusOK); body != "ok\n" {
			t.Errorf("healthy %s body %q", probe, body)
		}
	}
	s.Stop()
	for _, probe := range []string{"/healthz", "/readyz"} {
		if body := waitHealth(t, "http://"+addr+probe, http.StatusServiceUnavailable); !strings.HasPrefix(body, "unhealthy: redis: ") {
			t.Errorf("unhealthy %s body %q", probe, body)
		}
	}
	if code, body := health("http://" + addr + "/livez"); code != http.StatusOK {
		t.Errorf("/livez answers %d %q while Redis is down", code, body)
	}
	if errs := scrape(t, "http://"+addr+"/metrics")["w8y_redis_errors_total"]; errs < 1 {
		t.Errorf("w8y_redis_errors_total = %v while Redis is down", errs)
	}
	s.Restart(t)
	waitHealth(t, url, http.StatusOK)
	p.stop(t)
}

// TestMetricsAddrInUse: an address that cannot be listened on is bad input:
// one line, exit 125, and the list untouched.
func TestMetricsAddrInUse(t *testing.T) {
	s := withList(t, "busy", "a", "b")
	addr := fmt.Sprintf("127.0.0.1:%d", s.Port) // redis-server listens there
	r := s.run("--metrics-addr", addr, "true")
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, "--metrics-addr")
	if got := s.list(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("list %q", got)
	}
	s.noLocks()
}

// TestSystemdUnit checks scripts/w8y@.service with systemd-analyze verify,
// with ExecStart pointed at the w8y under test (verify requires that the
// executable exists).
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze is not installed: run scripts/ensure-redis.sh (make test does)")
	}
	unit, err := os.ReadFile("../scripts/w8y@.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/w8y ") {
		t.Fatal("the unit does not start /usr/local/bin/w8y")
	}
	dir := t.TempDir()
	patched := strings.ReplaceAll(string(unit), "/usr/local/bin/w8y ", binary+" ")
	if err := os.WriteFile(filepath.Join(dir, "w8y@.service"), []byte(patched), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("systemd-analyze", "verify", "--man=no", "w8y@reports.service")
	cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
