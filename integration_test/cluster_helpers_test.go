package integration_test

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	for deadline := time.Now().Add(redistest.Timeout); ; {
		if time.Now().After(deadline) {
			t.Fatalf("slot %d still held keys after %s of moving them", m.slot, redistest.Timeout)
		}
		keys, err := m.from.Client.ClusterGetKeysInSlot(ctx(t), int(m.slot), 2).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		m.migrate(t, keys...)
	}
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
