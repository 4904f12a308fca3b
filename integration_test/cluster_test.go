package integration_test

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// This file holds what the tests of Redis Cluster share: the nodes of a
// Cluster as this package's servers, and the moves of a slot between them.

// cluster is a redistest.Cluster whose nodes have this package's helpers.
// Each node is wrapped once, so that a node is the same *server wherever a
// test finds it.
type cluster struct {
	Nodes []*server
	// URL names every node, as w8y's --redis-cluster takes them.
	URL    string
	Client *redis.ClusterClient
}

// startCluster starts a Cluster of n masters (see redistest.StartCluster);
// args are more redis-server arguments for every node.
func startCluster(t *testing.T, n int, args ...string) *cluster {
	t.Helper()
	rc := redistest.StartCluster(t, n, args...)
	c := &cluster{URL: rc.URL, Client: rc.Client}
	for _, node := range rc.Nodes {
		c.Nodes = append(c.Nodes, &server{node})
	}
	return c
}

// commandCalls sums how often the cluster's nodes ran command.
func (c *cluster) commandCalls(t *testing.T, command string) int {
	t.Helper()
	total := 0
	for _, s := range c.Nodes {
		total += redistest.CommandStats(t, s.Client)[command]
	}
	return total
}

// scripted reports whether the takes on the list under prefix were the
// scripted ones (a prefix with a hash tag): their scripts keep the fleet's
// marks beside the list (<prefix>seen), which the per-candidate path (a
// prefix without one, whose takes rotate with LMOVE) never writes. The
// count of LMOVE no longer tells them apart: a scripted take moves a due
// item at the head with LMOVE too.
func (c *cluster) scripted(t *testing.T, prefix string) bool {
	t.Helper()
	return c.Client.Exists(ctx(t), prefix+"seen").Val() == 1
}

// resetStats clears every node's command statistics.
func (c *cluster) resetStats(t *testing.T) {
	t.Helper()
	for _, s := range c.Nodes {
		if err := s.Client.ConfigResetStat(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// clusterKeys lists the keys matching pattern on every node, and how many
// nodes hold some.
func (c *cluster) clusterKeys(t *testing.T, pattern string) (keys []string, nodes int) {
	t.Helper()
	for _, s := range c.Nodes {
		k := s.keys(t, pattern)
		if len(k) > 0 {
			nodes++
		}
		keys = append(keys, k...)
	}
	slices.Sort(keys)
	return keys, nodes
}

// spreadOrNot fails the test unless keys live on one node when oneSlot, and
// on at least two nodes when not: a test of keys in several slots that
// found them all on one node would prove nothing about them.
func (c *cluster) spreadOrNot(t *testing.T, oneSlot bool, keys ...string) {
	t.Helper()
	nodes := map[*server]bool{}
	for _, key := range keys {
		s, _ := c.nodeOf(t, key)
		nodes[s] = true
	}
	switch {
	case oneSlot && len(nodes) != 1:
		t.Fatalf("keys %q live on %d nodes, want one", keys, len(nodes))
	case !oneSlot && len(nodes) < 2:
		t.Fatalf("keys %q live on one node, want several", keys)
	}
}

// nodeOf returns the node that serves key's slot and its cluster node ID.
func (c *cluster) nodeOf(t *testing.T, key string) (*server, string) {
	t.Helper()
	slot, err := c.Nodes[0].Client.ClusterKeySlot(ctx(t), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Nodes {
		id := nodeID(t, s)
		shards, err := s.Client.ClusterShards(ctx(t)).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, shard := range shards {
			for _, r := range shard.Slots {
				if r.Start <= slot && slot <= r.End && slices.ContainsFunc(shard.Nodes, func(n redis.Node) bool { return n.ID == id }) {
					return s, id
				}
			}
		}
	}
	t.Fatalf("no node serves the slot of %q", key)
	return nil, ""
}

// nodeID is s's cluster node ID.
func nodeID(t *testing.T, s *server) string {
	t.Helper()
	id, err := s.Client.Do(ctx(t), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// must sends a command to s and fails the test if it fails.
func must(t *testing.T, s *server, args ...any) {
	t.Helper()
	if err := s.Client.Do(ctx(t), args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}

// TestCluster runs w8y on a 3-master Redis Cluster, with a hash-tagged
// prefix (the list and its locks in one slot: the server-side scan) and
// without (locks spread over the nodes: a round trip per candidate), one
// item at a time and with concurrent continuous workers, which must never
// run an item twice at once.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, tt := range []struct {
		name, prefix string
		scan         bool // whether the server-side scan must be used
	}{
		{"hash tag", "{jobs}:", true},
		{"no hash tag", "jobs:", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			list := tt.prefix + "list"
			items := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
			if err := c.Client.RPush(ctx(t), list, redistest.Values(items)...).Err(); err != nil {
				t.Fatal(err)
			}
			c.resetStats(t)
			base := []string{"--redis-cluster", "-u", c.URL, "-k", tt.prefix}

			// One-shot: the head is taken and rotated to the tail; a lock
			// held elsewhere makes the next run pass its item by.
			r := runW8y(t, nil, append(base, "printf", "%s", "{}")...)
			r.mustExit(t, 0)
			r.wantStdout(t, "a")
			if err := c.Client.Set(ctx(t), tt.prefix+"lock:b", "someone-else", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			r = runW8y(t, nil, append(base, "printf", "%s", "{}")...)
			r.mustExit(t, 0)
			r.wantStdout(t, "c") // b is locked
			want := []string{"d", "e", "f", "g", "h", "a", "b", "c"}
			if got, _ := c.Client.LRange(ctx(t), list, 0, -1).Result(); !slices.Equal(got, want) {
				t.Fatalf("list after two runs: %q, want %q", got, want)
			}
			if err := c.Client.Del(ctx(t), tt.prefix+"lock:b").Err(); err != nil {
				t.Fatal(err)
			}
			lmoves := c.commandCalls(t, "lmove")
			if tt.scan && lmoves != 0 {
				t.Errorf("with a hash tag, the nodes ran %d LMOVEs: the server-side scan was not used", lmoves)
			}
			if !tt.scan && lmoves == 0 {
				t.Errorf("without a hash tag, no node ran LMOVE: the per-candidate path was not used")
			}

			// Continuous workers over the same list: items ending in slow
			// outlive several refreshes of their locks.
			if err := c.Client.RPush(ctx(t), list, "x-slow", "y-slow").Err(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			env := []string{"DIR=" + dir, "SLOW=0.6"}
			var workers []*proc
			for range 4 {
				workers = append(workers, startW8y(t, env, append(base, "-c", "-x", "1", "--idle-wait", "20ms", "--log-level", "warn", "sh", "-c", overlapChild)...))
			}
			// The locks must really live on several nodes without a hash tag
			// (or the test would prove nothing about keys in other slots),
			// and on the list's node with one.
			var keys []string
			for _, item := range append(slices.Clone(items), "x-slow", "y-slow") {
				keys = append(keys, tt.prefix+"lock:"+item)
			}
			if tt.scan {
				keys = append(keys, list)
			}
			c.spreadOrNot(t, tt.scan, keys...)
			poll.WaitFor(t, "60 runs", func() bool { return len(lines(t, dir+"/runs")) >= 60 })
			drain(t, workers)
			noOverlaps(t, dir)
			runs := lines(t, dir+"/runs")
			for _, item := range []string{"a", "h", "x-slow", "y-slow"} {
				if !slices.Contains(runs, item) {
					t.Errorf("item %s never ran in %d runs", item, len(runs))
				}
			}
			got, _ := c.Client.LRange(ctx(t), list, 0, -1).Result()
			slices.Sort(got)
			if wantAll := append(slices.Clone(items), "x-slow", "y-slow"); !slices.Equal(got, wantAll) {
				t.Errorf("list after the workers: %q, want %q in some order", got, wantAll)
			}
			if locks, _ := c.clusterKeys(t, tt.prefix+"lock:*"); len(locks) != 0 {
				t.Errorf("locks left behind: %q", locks)
			}

			// --fleet-max-running and --fleet-rate: enforced in the take's
			// one script with a hash tag; refused without one, before
			// anything is taken.
			before, _ := c.Client.LRange(ctx(t), list, 0, -1).Result()
			r = runW8y(t, nil, append(base, "--fleet-max-running", "2", "printf", "%s", "{}")...)
			if tt.scan {
				r.mustExit(t, 0)
				if limit := c.Client.Get(ctx(t), tt.prefix+"fleet-max-running").Val(); limit != "2" || c.Client.SCard(ctx(t), tt.prefix+"running").Val() != 0 {
					t.Errorf("after a capped run: the cap's record %q, places %d; want 2 and none", limit, c.Client.SCard(ctx(t), tt.prefix+"running").Val())
				}
			}
			rated := runW8y(t, nil, append(base, "--fleet-rate", "1/1h", "printf", "%s", "{}")...)
			after, _ := c.Client.LRange(ctx(t), list, 0, -1).Result()
			if tt.scan {
				rated.mustExit(t, 0)
				if rate, starts := c.Client.Get(ctx(t), tt.prefix+"fleet-rate").Val(), c.Client.LLen(ctx(t), tt.prefix+"starts").Val(); rate != "1/3600000" || starts != 1 {
					t.Errorf("after a run under a rate: the rate's record %q, starts %d; want 1/3600000 and one", rate, starts)
				}
				// The window is full: the next run takes nothing.
				again := runW8y(t, nil, append(base, "--fleet-rate", "1/1h", "--no-work-exit-code", "3", "printf", "%s", "{}")...)
				again.wantExit(t, 3)
				return
			}
			r.wantExit(t, 125)
			oneLine(t, r.Stderr, "--fleet-max-running needs every key of the list on one server: on Redis Cluster, put a hash tag in --key-prefix")
			rated.wantExit(t, 125)
			oneLine(t, rated.Stderr, "w8y: --fleet-rate needs every key of the list on one server: on Redis Cluster, put a hash tag in --key-prefix, such as {work}")
			if !slices.Equal(after, before) {
				t.Errorf("a refused --fleet-max-running or --fleet-rate changed the list: %q, was %q", after, before)
			}
		})
	}
}

// TestClusterWithoutLMOVE: on servers without LMOVE (Redis before 6.2; here
// LMOVE is renamed away), the per-candidate path says so once and rotates
// with RPOPLPUSH, the other way round, without losing an item.
func TestClusterWithoutLMOVE(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, "--rename-command", "LMOVE", "")
	list := "old:list"
	if err := c.Client.RPush(ctx(t), list, "a", "b", "c").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Set(ctx(t), "old:lock:c", "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	r := runW8y(t, nil, "--redis-cluster", "-u", c.URL, "-k", "old", "printf", "%s", "{}")
	r.mustExit(t, 0)
	r.wantStdout(t, "b") // the tail, c, is locked
	if got, _ := c.Client.LRange(ctx(t), list, 0, -1).Result(); !slices.Equal(got, []string{"b", "c", "a"}) {
		t.Errorf("list %q, want [b c a]: RPOPLPUSH moves the tail to the head", got)
	}
	if n := strings.Count(r.Stderr, "has no LMOVE"); n != 1 {
		t.Errorf("the missing LMOVE was reported %d times, want once:\n%s", n, r.Stderr)
	}
	// Continuous: detected once for the whole run.
	if err := c.Client.Del(ctx(t), "old:lock:c").Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := startW8y(t, []string{"DIR=" + dir, "SLOW=0"}, "--redis-cluster", "-u", c.URL, "-k", "old", "-c", "--idle-wait", "20ms", "sh", "-c", overlapChild)
	poll.WaitFor(t, "10 runs", func() bool { return len(lines(t, dir+"/runs")) >= 10 })
	p.signal(t, syscall.SIGTERM)
	r = p.wait(t)
	r.wantExit(t, 0)
	if strings.Count(r.Stderr, "has no LMOVE") != 1 {
		t.Errorf("continuous run: want one line about LMOVE, got %s", r)
	}
	got, _ := c.Client.LRange(ctx(t), list, 0, -1).Result()
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("list %q lost or gained items", got)
	}
}

// clusterPrefixes are the two ways w8y runs on a Cluster: with a hash tag
// (one slot: batch.lua and finish.lua write the record in the take's and
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
				end := map[string]any{"type": "finish", "item": "a", "holder": holders[i], "result": run.result, "exit_code": itoa(run.code)}
				if run.result != "success" {
					// A failed run's end carries its last words: the
					// child printed its holder.
					end["stdout"] = holders[i]
				}
				want = append(want,
					fmt.Sprint(map[string]any{"type": "start", "item": "a", "holder": holders[i], "fence": itoa(i + 1)}),
					fmt.Sprint(end))
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
			// Which path ran: the scripted one keeps the fleet's marks; the
			// per-candidate one keeps none, and rotates with LMOVE.
			if scripted, lmoves := c.scripted(t, tt.prefix), c.commandCalls(t, "lmove"); scripted != tt.oneSlot || !scripted && lmoves == 0 {
				t.Errorf("scripted takes %v, %d LMOVEs: the record was not written by the path that a prefix %q takes", scripted, lmoves, tt.prefix)
			}
		})
	}
}
