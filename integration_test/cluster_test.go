package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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

// slotMove is a slot on its way from one node to another, as redis-cli
// --cluster reshard moves one: IMPORTING on the new node, MIGRATING on the
// old, its keys moved one batch at a time, then SETSLOT NODE everywhere.
type slotMove struct {
	c        *cluster
	slot     int64
	from, to *server
	toID     string
}

// beginMove starts moving the slot of key from the node that serves it to
// another: each of the slot's keys then lives on one node or the other, as
// half way through a reshard.
func (c *cluster) beginMove(t *testing.T, key string) *slotMove {
	t.Helper()
	slot, err := c.Nodes[0].Client.ClusterKeySlot(ctx(t), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	m := &slotMove{c: c, slot: slot}
	var fromID string
	m.from, fromID = c.nodeOf(t, key)
	m.to = c.Nodes[0]
	if m.to == m.from {
		m.to = c.Nodes[1]
	}
	m.toID = nodeID(t, m.to)
	must(t, m.to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	must(t, m.from, "CLUSTER", "SETSLOT", slot, "MIGRATING", m.toID)
	return m
}

// migrate moves keys of the slot to the new node.
func (m *slotMove) migrate(t *testing.T, keys ...string) {
	t.Helper()
	must(t, m.from, append([]any{"MIGRATE", "127.0.0.1", m.to.Port, "", 0, 5000, "KEYS"}, redistest.Values(keys)...)...)
}

// finish moves the slot's other keys, two at a time so that workers meet a
// slot half moved, and gives the slot to the new node on every node, the
// two that moved it first.
func (m *slotMove) finish(t *testing.T) {
	t.Helper()
	poll.Repeat(t, poll.Timeout, fmt.Sprintf("slot %d to hold no keys", m.slot), func() bool {
		keys, err := m.from.Client.ClusterGetKeysInSlot(ctx(t), int(m.slot), 2).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			return true
		}
		m.migrate(t, keys...)
		return false
	})
	must(t, m.to, "CLUSTER", "SETSLOT", m.slot, "NODE", m.toID)
	must(t, m.from, "CLUSTER", "SETSLOT", m.slot, "NODE", m.toID)
	for _, s := range m.c.Nodes {
		if s != m.to && s != m.from {
			must(t, s, "CLUSTER", "SETSLOT", m.slot, "NODE", m.toID)
		}
	}
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

// TestClusterSlotMigration moves the slot of a hash-tagged prefix, with its
// list and locks, to another node while continuous workers run its items:
// they ride it out and keep working on the new node, never running an item
// twice at once, and the list ends as it began.
func TestClusterSlotMigration(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	prefix := "{mig}:"
	items := []string{"a", "b", "c", "d", "e-slow", "f-slow"}
	if err := c.Client.RPush(ctx(t), prefix+"list", redistest.Values(items)...).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"DIR=" + dir, "SLOW=0.8"}
	var workers []*proc
	for range 3 {
		workers = append(workers, startW8y(t, env, "--redis-cluster", "-u", c.URL, "-k", prefix, "-c", "-x", "1",
			"--idle-wait", "20ms", "--log-level", "warn", "sh", "-c", overlapChild))
	}
	poll.WaitFor(t, "20 runs", func() bool { return len(lines(t, dir+"/runs")) >= 20 })
	// The slow items must be running, their locks held, while the slot moves.
	poll.WaitFor(t, "a slow item's lock", func() bool {
		n, err := c.Client.Exists(ctx(t), prefix+"lock:e-slow", prefix+"lock:f-slow").Result()
		return err == nil && n > 0
	})
	move := c.beginMove(t, prefix+"list")
	move.finish(t)
	from, to := move.from, move.to
	moved := len(lines(t, dir+"/runs"))
	if n := len(from.keys(t, "*")); n != 0 {
		t.Fatalf("the old node still holds %d keys", n)
	}
	poll.WaitFor(t, "20 runs after the move", func() bool { return len(lines(t, dir+"/runs")) >= moved+20 })
	drain(t, workers)
	noOverlaps(t, dir)
	got := to.list(t, prefix+"list")
	slices.Sort(got)
	if !slices.Equal(got, items) {
		t.Errorf("list on the new node: %q, want %q in some order", got, items)
	}
	if locks := to.keys(t, prefix+"lock:*"); len(locks) != 0 {
		t.Errorf("locks left behind: %q", locks)
	}
}

// TestClusterSlotHalfMoved stops a slot migration half way, the list on the
// new node and a held lock still on the old one, where the new node would
// answer a lookup of the lock alone with "no such key". A run must not take
// the item whose holder still runs it.
func TestClusterSlotHalfMoved(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	prefix := "{half}:"
	list, lock := prefix+"list", prefix+"lock:only"
	if err := c.Client.RPush(ctx(t), list, "only").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Set(ctx(t), lock, "holder-on-the-old-node", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	move := c.beginMove(t, list)
	move.migrate(t, list)
	from, to := move.from, move.to
	r := runW8y(t, nil, "--redis-cluster", "-u", c.URL, "-k", prefix, "printf", "ran %s", "{}")
	if strings.Contains(r.Stdout, "ran") {
		t.Fatalf("the item ran while its lock was held on the old node: %s", r)
	}
	if v, err := from.Client.Get(ctx(t), lock).Result(); err != nil || v != "holder-on-the-old-node" {
		t.Errorf("the held lock changed: %q, %v", v, err)
	}
	if n := len(to.keys(t, prefix+"lock:*")); n != 0 {
		t.Errorf("a lock was taken on the new node")
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
			poll.WaitFor(t, "the child to start", func() bool { _, err := os.Stat(dir + "/started"); return err == nil })

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

// checkPause fails the test unless key exists with an expiry in [min, max],
// as Redis reports it (PTTL, which a cluster client reads from the key's
// node).
func checkPause(t *testing.T, c redis.Cmdable, key string, min, max time.Duration) {
	t.Helper()
	left, err := c.PTTL(ctx(t), key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	// go-redis reports PTTL's -2 (no key) and -1 (no expiry) as these.
	if left < min || left > max {
		t.Errorf("%s expires in %v, want between %v and %v", key, left, min, max)
	}
}

// checkStreak fails the test unless the state hash of item under prefix
// counts want consecutive failures.
func checkStreak(t *testing.T, c redis.Cmdable, prefix, item, want string) {
	t.Helper()
	if got := c.HGet(ctx(t), prefix+"state:"+item, "consecutive_failures").Val(); got != want {
		t.Errorf("%s has %q consecutive failures, want %q", prefix+item, got, want)
	}
}

// TestClusterSchedule runs the fleet schedule on a Cluster, with a hash tag
// (internal/take's batch.lua checks the cooldown and backoff in the take,
// internal/finish's finish.lua sets them in the finish) and without (the keys
// in different slots: the pipelined EXISTS of take's per-candidate pass, and
// count.lua and pause.lua one key each). A success
// with --cooldown and a failure with --failure-backoff must leave their keys
// with the right expiry and the right count, another worker given neither
// flag must pass both items by, and deleting a key must let its item run at
// once.
func TestClusterSchedule(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, tt := range []struct {
		name, prefix string
		oneSlot      bool
	}{
		{"hash tag", "{sch}:", true},
		{"no hash tag", "sch:", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.prefix
			if err := c.Client.RPush(ctx(t), p+"list", "a", "b").Err(); err != nil {
				t.Fatal(err)
			}
			// Without a hash tag, the keys must really live apart, or the
			// test would prove nothing about the per-key path.
			c.spreadOrNot(t, tt.oneSlot, p+"list", p+"lock:a", p+"cooldown:a", p+"backoff:b", p+"state:a", p+"state:b")
			c.resetStats(t)
			base := []string{"--redis-cluster", "-u", c.URL, "-k", p}
			run := func(env []string, args ...string) result {
				return runW8y(t, env, append(slices.Clone(base), args...)...)
			}

			r := run(nil, "--cooldown", "1h", "printf", "%s", "{}")
			r.mustExit(t, 0)
			r.wantStdout(t, "a")
			checkPause(t, c.Client, p+"cooldown:a", 59*time.Minute, time.Hour)
			checkStreak(t, c.Client, p, "a", "0")

			// The delay after a first failure is MIN, less up to a quarter
			// of jitter.
			r = run([]string{"CODE=3"}, "--failure-backoff", "20m,1h", "sh", "-c", `printf %s "$W8Y_ITEM"; exit $CODE`)
			r.mustExit(t, 3)
			r.wantStdout(t, "b")
			checkPause(t, c.Client, p+"backoff:b", 15*time.Minute-time.Second, 20*time.Minute)
			checkStreak(t, c.Client, p, "b", "1")
			if n := c.Client.Exists(ctx(t), p+"lock:a").Val() + c.Client.Exists(ctx(t), p+"lock:b").Val(); n != 0 {
				t.Errorf("%d lock(s) left behind", n)
			}

			// Another worker, given neither flag, honours both keys: the
			// pass finds nothing to take.
			r = run(nil, "--no-work-exit-code", "4", "printf", "ran %s", "{}")
			r.wantExit(t, 4)
			r.wantStdout(t, "")

			// Deleting the cooldown and making the item due (as w8yctl
			// run-now does: with a hash tag, a key deleted by hand alone
			// waits for the fleet's sweep) runs its item at once; the
			// backoff too, and its success resets the count.
			runNow := func(item, key string) {
				t.Helper()
				if err := c.Client.Del(ctx(t), key).Err(); err != nil {
					t.Fatal(err)
				}
				if err := c.Client.ZAdd(ctx(t), p+"due", redis.Z{Score: 0, Member: item}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			runNow("a", p+"cooldown:a")
			r = run(nil, "printf", "%s", "{}")
			r.wantExit(t, 0)
			r.wantStdout(t, "a")
			runNow("b", p+"backoff:b")
			r = run(nil, "--cooldown", "1h", "printf", "%s", "{}")
			r.wantExit(t, 0)
			r.wantStdout(t, "b")
			checkStreak(t, c.Client, p, "b", "0")
			checkPause(t, c.Client, p+"cooldown:b", 59*time.Minute, time.Hour)

			// The path that ran: the scan takes with scripts alone, the
			// per-key path rotates with LMOVE.
			if lmoves := c.commandCalls(t, "lmove"); tt.oneSlot != (lmoves == 0) {
				t.Errorf("%d LMOVE calls: the wrong path ran", lmoves)
			}
			if got := c.Client.LRange(ctx(t), p+"list", 0, -1).Val(); len(got) != 2 {
				t.Errorf("list %q lost or gained items", got)
			}
		})
	}
}

// TestClusterParallel runs --parallel on a Cluster without a hash tag, where
// each child's lock, refresh and finish go to the node of its item's keys:
// one-shot, up to N distinct free items from one pass, all running at once
// under the worker's token; continuous, N children at a time, never an item
// twice at once.
func TestClusterParallel(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	const p = "cpar:"
	items := []string{"a", "b", "c", "d", "e", "f"}
	if err := c.Client.RPush(ctx(t), p+"list", redistest.Values(items)...).Err(); err != nil {
		t.Fatal(err)
	}
	var locks []string
	for _, item := range items {
		locks = append(locks, p+"lock:"+item)
	}
	c.spreadOrNot(t, false, locks...)
	if err := c.Client.Set(ctx(t), p+"lock:b", "someone-else", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Each child says it started, then waits for the test's go-ahead.
	w := startW8y(t, []string{"DIR=" + dir}, "--redis-cluster", "-u", c.URL, "-k", p, "-q", "--parallel", "4", "sh", "-c",
		`touch "$DIR/started.$W8Y_ITEM"; while [ ! -e "$DIR/go" ]; do sleep 0.02; done`)
	started := func() []string {
		names, _ := filepath.Glob(filepath.Join(dir, "started.*"))
		var got []string
		for _, name := range names {
			got = append(got, filepath.Ext(name)[1:])
		}
		slices.Sort(got)
		return got
	}
	poll.WaitFor(t, "four children", func() bool { return len(started()) >= 4 })
	if got := started(); !slices.Equal(got, []string{"a", "c", "d", "e"}) {
		t.Errorf("started %q, want a c d e: distinct, free, in list order", got)
	}
	holders := map[string]bool{}
	for _, item := range started() {
		holder := c.Client.Get(ctx(t), p+"lock:"+item).Val()
		if holder == "" {
			t.Errorf("%q runs without its lock", item)
		}
		holders[holder] = true
	}
	if len(holders) != 1 {
		t.Errorf("lock holders %v, want the one w8y's token", holders)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.wait(t).wantExit(t, 0)
	if got := started(); len(got) != 4 {
		t.Errorf("started %q: one-shot takes at most --parallel", got)
	}
	if got := c.Client.LRange(ctx(t), p+"list", 0, -1).Val(); !slices.Equal(got, []string{"f", "a", "b", "c", "d", "e"}) {
		t.Errorf("list %q, want the pass to stop after e", got)
	}
	for _, item := range items {
		if n := c.Client.Exists(ctx(t), p+"lock:"+item).Val(); (n == 1) != (item == "b") {
			t.Errorf("lock of %q: %d, want only b's, someone else's, left", item, n)
		}
	}

	// Continuous: three children at a time over eight free items, until
	// --max-items; the two slow ones run long enough for their locks to be
	// refreshed (-x 1: every third of a second).
	if err := c.Client.Del(ctx(t), p+"lock:b").Err(); err != nil {
		t.Fatal(err)
	}
	items = append(items, "x-slow", "y-slow")
	if err := c.Client.RPush(ctx(t), p+"list", "x-slow", "y-slow").Err(); err != nil {
		t.Fatal(err)
	}
	const maxItems = 30
	run := t.TempDir()
	r := runW8y(t, []string{"DIR=" + run, "SLOW=0.5"}, "--redis-cluster", "-u", c.URL, "-k", p, "-c", "-x", "1",
		"--parallel", "3", "--max-items", itoa(maxItems), "--idle-wait", "20ms", "--log-level", "warn", "sh", "-c", overlapChild)
	r.wantExit(t, 0)
	if n := len(lines(t, run+"/runs")); n != maxItems {
		t.Errorf("%d runs, want --max-items %d", n, maxItems)
	}
	noOverlaps(t, run)
	got := c.Client.LRange(ctx(t), p+"list", 0, -1).Val()
	slices.Sort(got)
	slices.Sort(items)
	if !slices.Equal(got, items) {
		t.Errorf("list %q lost or gained items", got)
	}
	for _, item := range items {
		if n := c.Client.Exists(ctx(t), p+"lock:"+item).Val(); n != 0 {
			t.Errorf("lock of %q left behind", item)
		}
	}
}
