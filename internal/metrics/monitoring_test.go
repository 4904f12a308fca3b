package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// monitoring is the folder of the alert rules and the Grafana dashboard
// that ship with w8y.
const monitoring = "../../examples/monitoring/"

// TestMonitoringNamesExportedMetrics: every w8y_ metric that the alert
// rules and the dashboard query is one that w8y-metrics exports (a
// histogram's by its _bucket, _sum or _count series), so that a renamed
// metric cannot leave an alert that never fires. promtool checks the rules
// themselves in make test.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	m := New("v", "c")
	nowhere := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	m.registry.MustRegister(newLagCollector(&status.Reader{Client: nowhere, Keys: schema.Keys{Prefix: "x:"}}, time.Now), mayEvict(nowhere))
	exported := map[string]bool{}
	ch := make(chan *prometheus.Desc, 100)
	go func() {
		m.registry.Describe(ch)
		close(ch)
	}()
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if got := name.FindStringSubmatch(d.String()); got != nil {
			exported[got[1]] = true
		}
	}
	used := regexp.MustCompile(`\bw8y_[a-z_]+`)
	for _, file := range []string{"w8y-alerts.yml", "w8y-alerts.test.yml", "w8y-grafana-dashboard.json"} {
		data, err := os.ReadFile(monitoring + file)
		if err != nil {
			t.Fatal(err)
		}
		for _, metric := range used.FindAllString(string(data), -1) {
			base := metric
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(metric, suffix); ok && exported[b] {
					base = b
				}
			}
			if !exported[base] {
				t.Errorf("%s queries %s, which w8y does not export", file, metric)
			}
		}
	}
	var dashboard struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	data, _ := os.ReadFile(monitoring + "w8y-grafana-dashboard.json")
	if err := json.Unmarshal(data, &dashboard); err != nil || len(dashboard.Panels) == 0 {
		t.Fatalf("the dashboard: %v", err)
	}
	for _, p := range dashboard.Panels {
		if len(p.Targets) == 0 || p.Targets[0].Expr == "" {
			t.Errorf("panel %q queries nothing", p.Title)
		}
	}
}
