package redistest

import (
	"context"
	"fmt"
	"testing"
)

// TestClusterPortSkipsATakenBus: a port whose bus port (port+10000) is
// taken is passed over, as a node on it could not start.
func TestClusterPortSkipsATakenBus(t *testing.T) {
	t.Parallel()
	busy := takePort(t) - busOffset
	var offered []int
	port := clusterPort(t, firstThenFree(busy, &offered))
	if port == busy || len(offered) < 2 {
		t.Errorf("clusterPort returned %d after offers %v, with the bus port of %d taken", port, offered, busy)
	}
	if portFree(busy + busOffset) {
		t.Error("portFree calls a port that is listened on free")
	}
}

// TestStartCluster: every node has its bus port, knows every slot, and the
// cluster client reaches keys on every node.
func TestStartCluster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3)
	ctx := context.Background()
	for _, s := range c.Nodes {
		if portFree(s.Port + busOffset) {
			t.Errorf("node on port %d does not listen on its bus port", s.Port)
		}
		if info := parseInfo(s.Client.ClusterInfo(ctx).Val()); info["cluster_state"] != "ok" || info["cluster_known_nodes"] != "3" {
			t.Errorf("node on port %d: %v", s.Port, info)
		}
	}
	// Keys in enough slots to reach every node.
	for i := range 30 {
		key := fmt.Sprint("key", i)
		if err := c.Client.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s through the cluster client: %v", key, err)
		}
	}
	for _, s := range c.Nodes {
		if n := s.Client.DBSize(ctx).Val(); n == 0 {
			t.Errorf("node on port %d holds none of 30 keys", s.Port)
		}
	}
}
