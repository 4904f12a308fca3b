package integration_test

import (
	"context"
	"slices"
	"testing"

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

// migrateSlot moves the slot of key, with its keys, from the node that
// serves it to another, as redis-cli --cluster reshard does: IMPORTING and
// MIGRATING, MIGRATE the keys in batches, then SETSLOT NODE everywhere. It
// returns the node that serves the slot afterwards.
func (c *cluster) migrateSlot(t *testing.T, key string) *server {
	t.Helper()
	bg := context.Background()
	slot, err := c.Nodes[0].Client.ClusterKeySlot(bg, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	from, fromID := c.nodeOf(t, key)
	var to *server
	for _, s := range c.Nodes {
		if s != from {
			to = s
			break
		}
	}
	toID := nodeID(t, to)
	must := func(s *server, args ...any) {
		t.Helper()
		if err := s.Client.Do(bg, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	must(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	must(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	for {
		keys, err := from.Client.ClusterGetKeysInSlot(bg, int(slot), 2).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		// Two keys at a time, so that the workers meet a slot half moved.
		args := []any{"MIGRATE", "127.0.0.1", to.Port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(from, args...)
	}
	for _, s := range []*server{to, from} {
		must(s, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	}
	for _, s := range c.Nodes {
		if s != to && s != from {
			must(s, "CLUSTER", "SETSLOT", slot, "NODE", toID)
		}
	}
	return to
}

// overlapChild is a child that records each run of its item in $DIR/runs
// and, like the chaos test's, holds an exclusive flock(1) on a file named
// for its item while it runs: a run that overlaps another run of the same
// item cannot take it, and records the overlap in $DIR/overlaps instead.
// Items ending in "slow" run for $SLOW seconds, so that their locks must be
// refreshed; the others for 20ms.
const overlapChild = `case "$W8Y_ITEM" in *slow) d=$SLOW;; *) d=0.02;; esac; ` +
	`flock -n -E 99 "$DIR/lock.$W8Y_ITEM" sh -c 'echo "$W8Y_ITEM" >> "$DIR/runs"; sleep $0' "$d"; ` +
	`if [ $? = 99 ]; then echo "$W8Y_ITEM" >> "$DIR/overlaps"; fi`
