package integration_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// TestClusterStatus checks w8y --status, as JSON and as a table, on a
// Cluster with and without a hash tag: a locked, a cooling and an idle item
// that ran, whose keys (without a hash tag) live on different nodes.
func TestClusterStatus(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, tt := range clusterPrefixes {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.prefix
			c.spreadOrNot(t, tt.oneSlot, recordKeys(p, "ran")...)
			if err := c.Client.RPush(ctx(t), p+"list", "ran", "held", "cool").Err(); err != nil {
				t.Fatal(err)
			}
			base := []string{"--redis-cluster", "-u", c.URL, "-k", p}
			r := runW8y(t, nil, append(append(base, "-q"), holderExit...)...)
			r.mustExit(t, 0)
			if r.Stdout == "" {
				t.Fatalf("the run printed no holder: %s", r)
			}
			holder := r.Stdout
			if err := c.Client.Set(ctx(t), p+"lock:held", "someone-else", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.Client.Set(ctx(t), p+"cooldown:cool", "x", 30*time.Second).Err(); err != nil {
				t.Fatal(err)
			}

			items := statusJSON(t, nil, base...)
			if len(items) != 3 {
				t.Fatalf("%d items: %v", len(items), items)
			}
			exact := func(i int, want map[string]any) {
				t.Helper()
				for k, v := range want {
					if fmt.Sprint(items[i][k]) != fmt.Sprint(v) {
						t.Errorf("item %d: %s = %v, want %v (item %v)", i, k, items[i][k], v, items[i])
					}
				}
			}
			// The run rotated "ran" to the tail.
			exact(0, map[string]any{"item": "held", "state": "locked", "holder": "someone-else", "cooldown_ms": nil,
				"backoff_ms": nil, "last_result": nil, "runs": 0})
			exact(1, map[string]any{"item": "cool", "state": "cooldown", "holder": nil, "lock_ttl_ms": nil,
				"backoff_ms": nil, "last_result": nil, "runs": 0})
			exact(2, map[string]any{"item": "ran", "state": "idle", "holder": nil, "lock_ttl_ms": nil, "cooldown_ms": nil,
				"backoff_ms": nil, "last_exit_code": 0, "last_holder": holder, "last_result": "success", "runs": 1,
				"failures": 0, "consecutive_failures": 0})
			for i, f := range map[int]string{0: "lock_ttl_ms", 1: "cooldown_ms"} {
				if v, ok := items[i][f].(float64); !ok || v <= 0 || v > 60_000 {
					t.Errorf("item %d: %s = %v", i, f, items[i][f])
				}
			}
			for _, f := range []string{"last_start", "last_end", "last_duration_ms"} {
				if _, ok := items[2][f].(float64); !ok {
					t.Errorf("ran: %s = %v, want a number", f, items[2][f])
				}
			}

			rows := parseTable(t, statusOutput(t, nil, base...))
			if got := rows["(order)"]["items"]; got != "held cool ran" {
				t.Errorf("items in order %q", got)
			}
			for item, want := range map[string]string{"held": "locked", "cool": "cooldown", "ran": "idle"} {
				if got, _, _ := strings.Cut(rows[item]["STATE"], " "); got != want {
					t.Errorf("%s: STATE %q, want %q", item, rows[item]["STATE"], want)
				}
			}
			if got := rows["ran"]["LAST"]; got != "success" {
				t.Errorf("ran: LAST %q, want success", got)
			}
		})
	}
}

// TestClusterHealthz serves metrics from a worker on a Cluster whose keys
// spread over the nodes: /healthz is healthy, turns unhealthy while the
// list's node is down, with the failed commands counted, and healthy again
// once it is back.
func TestClusterHealthz(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	const p = "hz:"
	c.spreadOrNot(t, false, recordKeys(p, "a")...)
	if err := c.Client.RPush(ctx(t), p+"list", "a").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Set(ctx(t), p+"lock:a", "someone-else", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	w := startW8y(t, nil, "--redis-cluster", "-u", c.URL, "-k", p, "-c", "--idle-wait", "100ms", "--metrics-addr", addr, "true")
	url := "http://" + addr
	if body := waitHealth(t, url+"/healthz", http.StatusOK); body != "ok\n" {
		t.Errorf("healthy body %q", body)
	}
	poll.WaitFor(t, "idle passes", func() bool { return scrape(t, url+"/metrics")["w8y_idle_passes_total"] >= 2 })
	if errs := scrape(t, url+"/metrics")["w8y_redis_errors_total"]; errs != 0 {
		t.Errorf("w8y_redis_errors_total = %v on a healthy Cluster", errs)
	}

	node, _ := c.nodeOf(t, p+"list")
	node.Stop()
	if body := waitHealth(t, url+"/healthz", http.StatusServiceUnavailable); !strings.HasPrefix(body, "unhealthy: redis: ") {
		t.Errorf("unhealthy body %q", body)
	}
	poll.WaitFor(t, "Redis errors counted", func() bool { return scrape(t, url+"/metrics")["w8y_redis_errors_total"] >= 1 })

	// The node comes back with its cluster configuration (nodes.conf),
	// though without the data that it never saved.
	node.Restart(t)
	waitHealth(t, url+"/healthz", http.StatusOK)
	w.stop(t)
}
