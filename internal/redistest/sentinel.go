package redistest

import (
	"github.com/w8y/w8y/internal/poll"

	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// SentinelGroup is a master, a replica and three sentinels watching them.
type SentinelGroup struct {
	Master, Replica *Server
	Sentinels       []*redis.SentinelClient
	// Name is the master's name, as w8y's --sentinel-master takes it.
	Name string
	// URL names the sentinels, as w8y's --sentinel-master takes them.
	URL string
}

// StartSentinelGroup starts a master, a replica of it and three sentinels
// (redis-server --sentinel) that monitor it as "w8ytest" with a quorum of
// 2, and waits until every sentinel knows the master, the replica and the
// other two sentinels, so that a failover can start at once.
func StartSentinelGroup(tb testing.TB) *SentinelGroup {
	tb.Helper()
	g := &SentinelGroup{Name: "w8ytest"}
	g.Master = Start(tb)
	g.Replica = Start(tb, Args("--replicaof", "127.0.0.1", strconv.Itoa(g.Master.Port)))
	poll.WaitFor(tb, "the replica to sync", func() bool {
		return Info(tb, g.Replica.Client, "replication")["master_link_status"] == "up"
	})
	var addrs []string
	for range 3 {
		dir := tb.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		// A sentinel that does not hear from the master for 2s holds it
		// down, so that a test's failover does not wait long.
		text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 2000\n"+
			"sentinel failover-timeout %s 10000\n",
			g.Name, g.Master.Port, g.Name, g.Name)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
		// Sentinel rewrites its configuration file, so each has its own.
		s := Start(tb, func(c *config) { c.dir, c.sentinel = dir, conf })
		client := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.Port), MaxRetries: -1})
		tb.Cleanup(func() { client.Close() })
		g.Sentinels = append(g.Sentinels, client)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", s.Port))
	}
	g.URL = "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
	poll.WaitFor(tb, "every sentinel to know the master, the replica and its peers", func() bool {
		bg := context.Background()
		for _, s := range g.Sentinels {
			master, err := s.GetMasterAddrByName(bg, g.Name).Result()
			if err != nil || master[1] != strconv.Itoa(g.Master.Port) {
				return false
			}
			replicas, err := s.Replicas(bg, g.Name).Result()
			if err != nil || len(replicas) != 1 || replicas[0]["flags"] != "slave" {
				return false
			}
			if peers, err := s.Sentinels(bg, g.Name).Result(); err != nil || len(peers) != 2 {
				return false
			}
		}
		return true
	})
	return g
}

// MasterPort is the port of the master that every sentinel names, or 0
// while they disagree.
func (g *SentinelGroup) MasterPort() int {
	port := ""
	for _, s := range g.Sentinels {
		addr, err := s.GetMasterAddrByName(context.Background(), g.Name).Result()
		if err != nil || (port != "" && addr[1] != port) {
			return 0
		}
		port = addr[1]
	}
	n, _ := strconv.Atoi(port)
	return n
}

// Failover makes the sentinels promote the replica (SENTINEL FAILOVER) and
// waits until the group is whole again the other way round: every
// sentinel names the replica as master, and the old master, which Sentinel
// reconfigures about ten seconds after the switch (it waits four of its 2s
// publish periods first), replicates the new one. Then Master and Replica
// trade places, so that the next Failover goes back. A failover that the
// sentinels refuse for now (one still under way, or a replica they have
// yet to see as good) is asked for again.
func (g *SentinelGroup) Failover(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	poll.WaitFor(tb, "a sentinel to accept SENTINEL FAILOVER", func() bool { return g.Sentinels[0].Failover(ctx, g.Name).Err() == nil })
	poll.WaitFor(tb, "every sentinel to name the replica as master", func() bool { return g.MasterPort() == g.Replica.Port })
	poll.WaitFor(tb, "the old master to replicate the new one", func() bool {
		// Sentinel closes the old master's clients as it reconfigures it,
		// this test's among them: a failed INFO is asked again.
		text, err := g.Master.Client.Info(ctx, "replication").Result()
		info := parseInfo(text)
		return err == nil && info["role"] == "slave" && info["master_port"] == strconv.Itoa(g.Replica.Port) && info["master_link_status"] == "up"
	})
	g.Master, g.Replica = g.Replica, g.Master
}
