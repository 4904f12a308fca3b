package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// clusterPrefixes are the two ways w8y runs on a Cluster: with a hash tag
// (one slot: take.lua and finish.lua write the record in the take's and
// the release's scripts) and without (the lock, state and events keys in
// different slots: the record goes as plain commands, one key each).
var clusterPrefixes = []struct {
	name, prefix string
	oneSlot      bool
}{
	{"hash tag", "{obs}:", true},
	{"no hash tag", "obs:", false},
}

// recordKeys are the keys that a run of item under prefix writes: the
// list, its lock, its state and the events.
func recordKeys(prefix, item string) []string {
	return []string{prefix + "list", prefix + "lock:" + item, prefix + "state:" + item, prefix + "events"}
}

// holderExit is a child that prints its lock token and exits with $CODE.
var holderExit = []string{"sh", "-c", `printf %s "$W8Y_HOLDER"; exit "${CODE:-0}"`}

// TestClusterStateAndEvents runs an item to success and then to failure on
// a Cluster, with and without a hash tag, and checks its state hash, the
// events stream and their expiry: both record paths against real nodes.
func TestClusterStateAndEvents(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, tt := range clusterPrefixes {
		t.Run(tt.name, func(t *testing.T) {
			c.spreadOrNot(t, tt.oneSlot, recordKeys(tt.prefix, "a")...)
			if err := c.Client.RPush(ctx(t), tt.prefix+"list", "a").Err(); err != nil {
				t.Fatal(err)
			}
			c.resetStats(t)
			args := append([]string{"--redis-cluster", "-u", c.URL, "-k", tt.prefix, "-q", "--state-ttl", "90s"}, holderExit...)
			runs := []struct {
				code                int
				result              string
				runs, fails, streak string
			}{
				{0, "success", "1", "", "0"}, // failures is written by the first failure
				{3, "failure", "2", "1", "1"},
			}
			var holders []string
			for i, run := range runs {
				before := time.Now()
				r := runW8y(t, []string{"CODE=" + itoa(run.code)}, args...)
				after := time.Now()
				r.mustExit(t, run.code)
				if r.Stdout == "" {
					t.Fatalf("run %d printed no holder: %s", i, r)
				}
				holders = append(holders, r.Stdout)
				state, err := c.Client.HGetAll(ctx(t), tt.prefix+"state:a").Result()
				if err != nil {
					t.Fatal(err)
				}
				checkState(t, fmt.Sprintf("run %d", i), state, map[string]string{
					"runs": run.runs, "failures": run.fails, "consecutive_failures": run.streak,
					"last_result": run.result, "last_exit_code": itoa(run.code), "last_holder": r.Stdout,
				}, before, after)
				if d, err := strconv.Atoi(state["last_duration_ms"]); err != nil || d < 0 || int64(d) > after.Sub(before).Milliseconds() {
					t.Errorf("run %d: last_duration_ms %q", i, state["last_duration_ms"])
				}
			}
			for _, key := range []string{tt.prefix + "state:a", tt.prefix + "events"} {
				if ttl := c.Client.PTTL(ctx(t), key).Val(); ttl <= 80*time.Second || ttl > 90*time.Second {
					t.Errorf("%s: TTL %s, want about 90s", key, ttl)
				}
			}
			entries, err := c.Client.XRange(ctx(t), tt.prefix+"events", "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for i, run := range runs {
				want = append(want,
					fmt.Sprint(map[string]any{"type": "start", "item": "a", "holder": holders[i], "fence": itoa(i + 1)}),
					fmt.Sprint(map[string]any{"type": "finish", "item": "a", "holder": holders[i], "result": run.result, "exit_code": itoa(run.code)}))
			}
			var got []string
			for _, e := range entries {
				if _, ok := e.Values["duration_ms"]; ok == (e.Values["type"] == "start") {
					t.Errorf("event %v: duration_ms present %v", e.Values, ok)
				}
				delete(e.Values, "duration_ms")
				got = append(got, fmt.Sprint(e.Values))
			}
			if !slices.Equal(got, want) {
				t.Errorf("events\n%q\nwant\n%q", got, want)
			}
			if locks, _ := c.clusterKeys(t, tt.prefix+"lock:*"); len(locks) != 0 {
				t.Errorf("locks left behind: %q", locks)
			}
			// Which path ran: the per-candidate one rotates with LMOVE.
			if lmoves := c.commandCalls(t, "lmove"); (lmoves == 0) != tt.oneSlot {
				t.Errorf("%d LMOVEs: the record was not written by the path that a prefix %q takes", lmoves, tt.prefix)
			}
		})
	}
}

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

			r = runW8y(t, nil, append(base, "--status")...)
			r.mustExit(t, 0)
			if r.Stderr != "" {
				t.Fatalf("--status wrote on stderr: %s", r)
			}
			rows := parseTable(t, r.Stdout)
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
	redistest.WaitFor(t, "idle passes", func() bool { return scrape(t, url+"/metrics")["w8y_idle_passes_total"] >= 2 })
	if errs := scrape(t, url+"/metrics")["w8y_redis_errors_total"]; errs != 0 {
		t.Errorf("w8y_redis_errors_total = %v on a healthy Cluster", errs)
	}

	node, _ := c.nodeOf(t, p+"list")
	node.Stop()
	if body := waitHealth(t, url+"/healthz", http.StatusServiceUnavailable); !strings.HasPrefix(body, "unhealthy: redis: ") {
		t.Errorf("unhealthy body %q", body)
	}
	redistest.WaitFor(t, "Redis errors counted", func() bool { return scrape(t, url+"/metrics")["w8y_redis_errors_total"] >= 1 })

	// The node comes back with its cluster configuration (nodes.conf),
	// though without the data that it never saved.
	node.Restart(t)
	waitHealth(t, url+"/healthz", http.StatusOK)
	w.signal(t, syscall.SIGTERM)
	w.wait(t).wantExit(t, 0)
}

// TestClusterReleaseWhileSlotMoves ends a run while its slot is half moved
// to another node: the state hash has arrived there, the lock and the
// events stream have not. The finish script names them all, and the
// cooldown and backoff keys, and is refused (TRYAGAIN); w8y must then
// finish key by key, which follows the move, rather than leave the lock to
// expire and the run's end unwritten: the record, and the cooldown after a
// success or the backoff and the count after a failure.
func TestClusterReleaseWhileSlotMoves(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, tt := range []struct {
		name, prefix string
		code         int
		flags        []string
		result       string
		streak       string
		pause        string // the key that must be set, under prefix
		min, max     time.Duration
	}{
		{"success with --cooldown", "{mv}:", 0, []string{"--cooldown", "1h"}, "success", "0", "cooldown:a", 59 * time.Minute, time.Hour},
		{"failure with --failure-backoff", "{mvf}:", 3, []string{"--failure-backoff", "20m,1h"}, "failure", "1", "backoff:a", 15*time.Minute - time.Second, 20 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.prefix
			list, lock, state, events := p+"list", p+"lock:a", p+"state:a", p+"events"
			if err := c.Client.RPush(ctx(t), list, "a").Err(); err != nil {
				t.Fatal(err)
			}
			// The state hash must exist before the run for MIGRATE to move it.
			if err := c.Client.HSet(ctx(t), state, "runs", 4).Err(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			args := append([]string{"--redis-cluster", "-u", c.URL, "-k", p, "-x", "10"}, tt.flags...)
			w := startW8y(t, []string{"DIR=" + dir, "CODE=" + itoa(tt.code)}, append(args, "sh", "-c",
				`touch "$DIR/started"; while [ ! -e "$DIR/go" ]; do sleep 0.02; done; exit $CODE`)...)
			redistest.WaitFor(t, "the child to start", func() bool { _, err := os.Stat(dir + "/started"); return err == nil })

			bg := context.Background()
			move := c.beginMove(t, list)
			move.migrate(t, state)
			from, to := move.from, move.to
			if n := from.Client.Exists(bg, lock, events).Val(); n != 2 {
				t.Fatalf("the lock and the events should still be on the old node: %d of 2", n)
			}

			if err := os.WriteFile(dir+"/go", nil, 0o600); err != nil {
				t.Fatal(err)
			}
			r := w.wait(t)
			r.wantExit(t, tt.code)
			if strings.Contains(r.Stderr, "could not") || strings.Contains(r.Stderr, "cannot") {
				t.Errorf("w8y could not finish: %s", r)
			}
			if n := from.Client.Exists(bg, lock).Val(); n != 0 {
				t.Errorf("the lock was left on the old node to expire")
			}

			// Finish the move, and read the record where it now lives.
			move.finish(t)
			st := to.Client.HGetAll(bg, state).Val()
			if st["runs"] != "5" || st["last_result"] != tt.result || st["last_exit_code"] != itoa(tt.code) || st["consecutive_failures"] != tt.streak {
				t.Errorf("state after the move: %v, want the run recorded as %s with %s consecutive failures", st, tt.result, tt.streak)
			}
			checkPause(t, to.Client, p+tt.pause, tt.min, tt.max)
			var types []string
			for _, e := range to.Client.XRange(bg, events, "-", "+").Val() {
				types = append(types, fmt.Sprint(e.Values["type"]))
			}
			if !slices.Equal(types, []string{"start", "finish"}) {
				t.Errorf("events %q, want start and finish", types)
			}
		})
	}
}
