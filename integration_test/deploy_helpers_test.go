package integration_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file starts the groups of servers that real deployments run: a Redis
// Cluster, a Sentinel group, a server that speaks only TLS. Each waits on
// the group's own state (CLUSTER INFO, SENTINEL answers), never on a fixed
// sleep, and stops everything when the test ends.

// waitFor polls cond until it holds, and fails the test with what after
// testTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, testTimeout, what, cond)
}

// waitForWithin is waitFor with a bound of its own, for what takes longer
// by design.
func waitForWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cluster is a Redis Cluster of masters only, on loopback ports.
type cluster struct {
	Nodes []*server
	// URL names every node: the first as the URL's host, the others as
	// ?addr= parameters, as w8y's --redis-cluster takes them.
	URL    string
	Client *redis.ClusterClient
}

// startCluster starts n redis-servers in cluster mode, joins them with
// redis-cli --cluster create (which spreads the 16384 slots over them) and
// waits until every node reports cluster_state:ok. extra are more
// redis-server arguments for every node.
func startCluster(t *testing.T, n int, extra ...string) *cluster {
	t.Helper()
	c := &cluster{}
	var addrs, params []string
	for range n {
		s := startRedis(t, append([]string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			// Short node timeout: a group on loopback that does not hear from
			// a node for this long has lost it.
			"--cluster-node-timeout", "2000",
		}, extra...)...)
		c.Nodes = append(c.Nodes, s)
		addr := fmt.Sprintf("127.0.0.1:%d", s.Port)
		addrs = append(addrs, addr)
		params = append(params, "addr="+addr)
	}
	c.URL = "redis://" + addrs[0] + "?" + strings.Join(params[1:], "&")
	create := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, s := range c.Nodes {
		waitFor(t, "cluster_state:ok on every node", func() bool {
			info, err := s.Client.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
	}
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { c.Client.Close() })
	// Every node must know the whole map before the test sends commands
	// through any of them.
	waitFor(t, "every node to see all slots", func() bool {
		for _, s := range c.Nodes {
			info, err := s.Client.ClusterInfo(context.Background()).Result()
			if err != nil || !strings.Contains(info, "cluster_slots_ok:16384") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				return false
			}
		}
		return true
	})
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

// noSyncDelay makes a master send a full sync to a replica at once, instead
// of waiting 5 seconds for more replicas to share it.
var noSyncDelay = []string{"--repl-diskless-sync-delay", "0"}

// sentinelGroup is a master, a replica and three sentinels watching them.
type sentinelGroup struct {
	Master, Replica *server
	Sentinels       []*redis.SentinelClient
	Name            string
	// URL names the sentinels, as w8y's --sentinel-master takes them.
	URL string
}

// startSentinelGroup starts a master, a replica of it and three sentinels
// (redis-server --sentinel) that monitor it as "w8ytest" with a quorum of 2,
// and waits until every sentinel knows the master, the replica and the
// other two sentinels, so that a failover can start at once.
func startSentinelGroup(t *testing.T) *sentinelGroup {
	t.Helper()
	g := &sentinelGroup{Name: "w8ytest"}
	g.Master = startRedis(t, noSyncDelay...)
	g.Replica = startRedis(t, append([]string{"--replicaof", "127.0.0.1", itoa(g.Master.Port)}, noSyncDelay...)...)
	waitFor(t, "the replica to sync", func() bool {
		info, err := g.Replica.Client.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	var addrs []string
	for range 3 {
		port := freePort(t)
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		// Sentinel rewrites its configuration file, so each needs its own.
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 2000\n"+
			"sentinel failover-timeout %s 10000\n",
			port, dir, filepath.Join(dir, "sentinel.log"), g.Name, g.Master.Port, g.Name, g.Name)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("redis-server", conf, "--sentinel")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start sentinel: %v", err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				log, _ := os.ReadFile(filepath.Join(dir, "sentinel.log"))
				t.Logf("sentinel on port %d logged:\n%s", port, log)
			}
		})
		client := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
		t.Cleanup(func() { client.Close() })
		g.Sentinels = append(g.Sentinels, client)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	g.URL = "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
	for _, s := range g.Sentinels {
		waitFor(t, "every sentinel to know the master, the replica and its peers", func() bool {
			bg := context.Background()
			master, err := s.GetMasterAddrByName(bg, g.Name).Result()
			if err != nil || master[1] != itoa(g.Master.Port) {
				return false
			}
			replicas, err := s.Replicas(bg, g.Name).Result()
			if err != nil || len(replicas) != 1 || replicas[0]["flags"] != "slave" {
				return false
			}
			peers, err := s.Sentinels(bg, g.Name).Result()
			return err == nil && len(peers) == 2
		})
	}
	return g
}

// masterPort is the port of the master that every sentinel names, or 0
// while they disagree.
func (g *sentinelGroup) masterPort() int {
	port := ""
	for _, s := range g.Sentinels {
		addr, err := s.GetMasterAddrByName(context.Background(), g.Name).Result()
		if err != nil || (port != "" && addr[1] != port) {
			return 0
		}
		port = addr[1]
	}
	var n int
	fmt.Sscan(port, &n)
	return n
}

// pki is a throwaway certificate authority with certificates it issued,
// written as PEM files into a test's directory.
type pki struct {
	Dir                   string
	CACert                string // the CA's certificate
	ServerCert, ServerKey string // for 127.0.0.1 and localhost
	ClientCert, ClientKey string
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
}

// newPKI makes a CA and a server and a client certificate signed by it.
func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	p := &pki{Dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.CACert = p.write(t, "ca.pem", "CERTIFICATE", der)
	p.ServerCert, p.ServerKey = p.issue(t, "server", x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.ClientKey = p.issue(t, "client", x509.ExtKeyUsageClientAuth)
	return p
}

// issue makes a certificate for 127.0.0.1 and localhost with usage, and
// returns the paths of its certificate and key files.
func (p *pki) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "PRIVATE KEY", keyDER)
}

func (p *pki) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tlsServer is a redis-server that accepts only TLS connections.
type tlsServer struct {
	Port   int
	Client *redis.Client
}

// startTLSRedis starts a redis-server that listens only on a TLS port, with
// p's server certificate, and that asks clients for a certificate from p's
// CA when clientCerts is set.
func startTLSRedis(t *testing.T, p *pki, clientCerts bool) *tlsServer {
	t.Helper()
	port := freePort(t)
	dir := t.TempDir()
	auth := "no"
	if clientCerts {
		auth = "yes"
	}
	cmd := exec.Command("redis-server", "--port", "0", "--tls-port", itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", p.ServerCert, "--tls-key-file", p.ServerKey, "--tls-ca-cert-file", p.CACert,
		"--tls-auth-clients", auth, "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(p.CACert)
	pool.AppendCertsFromPEM(pem)
	config := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if clientCerts {
		cert, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	s := &tlsServer{Port: port, Client: redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), TLSConfig: config, MaxRetries: -1})}
	t.Cleanup(func() { s.Client.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for s.Client.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("TLS redis-server on port %d never answered:\n%s", port, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
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
