package redistest

import (
	"github.com/w8y/w8y/internal/poll"

	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters only, on loopback ports.
type Cluster struct {
	Nodes []*Server
	// URL names every node: the first as the URL's host, the others as
	// ?addr= parameters, as w8y's --redis-cluster takes them.
	URL    string
	Client *redis.ClusterClient
}

// busOffset is how far above its port a Cluster node listens for the other
// nodes (the cluster bus), when not told otherwise.
const busOffset = 10000

// StartCluster starts n redis-servers as Cluster nodes, joins them with
// redis-cli --cluster create (which spreads the 16384 slots over them), and
// waits until every node reports cluster_state:ok and knows every slot and
// node, so that a test may send commands through any of them. args are more
// redis-server arguments for every node.
func StartCluster(tb testing.TB, n int, args ...string) *Cluster {
	tb.Helper()
	c := &Cluster{}
	var addrs, params []string
	for range n {
		// The node timeout is short: nodes on loopback that do not hear
		// from one for 2s have lost it.
		s := Start(tb, Args("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"), Args(args...))
		c.Nodes = append(c.Nodes, s)
		addr := fmt.Sprintf("127.0.0.1:%d", s.Port)
		addrs = append(addrs, addr)
		params = append(params, "addr="+addr)
	}
	c.URL = "redis://" + addrs[0] + "?" + strings.Join(params[1:], "&")
	cli := c.Nodes[0].kind.CLI
	create := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		tb.Fatalf("%s --cluster create: %v\n%s", cli, err, out)
	}
	poll.WaitFor(tb, "every node to see all slots, all nodes and cluster_state:ok", func() bool {
		for _, s := range c.Nodes {
			info, err := s.Client.ClusterInfo(context.Background()).Result()
			if err != nil {
				return false
			}
			fields := parseInfo(info)
			if fields["cluster_state"] != "ok" || fields["cluster_slots_ok"] != "16384" || fields["cluster_known_nodes"] != strconv.Itoa(n) {
				return false
			}
		}
		return true
	})
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	tb.Cleanup(func() { c.Client.Close() })
	return c
}

// clusterEnabled reports whether the arguments make a Cluster node.
func (c config) clusterEnabled() bool {
	return argValue(c.args, "--cluster-enabled") == "yes"
}

// clusterPort returns a port from next whose bus port is free too: a node
// binds both, and fails to start when either is taken.
func clusterPort(tb testing.TB, next func(testing.TB) int) int {
	tb.Helper()
	for range 100 {
		if port := next(tb); port+busOffset <= 65535 && portFree(port+busOffset) {
			return port
		}
	}
	tb.Fatal("found no free loopback port whose cluster bus port is free too")
	return 0
}

// portFree reports whether port can be listened on at 127.0.0.1 now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
