package redisconn

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Server is what w8y needs to know of the Redis it writes to, read from
// INFO (memory, replication and stats), which managed services that hide
// CONFIG still answer: whether it may evict w8y's keys, and whether it is
// a replica, which refuses every write.
type Server struct {
	Addr        string // the node it was read from, on a Cluster
	MaxMemory   int64  // maxmemory, in bytes; 0 means no limit
	UsedMemory  int64  // used_memory, in bytes
	Policy      string // maxmemory_policy, "" when INFO does not say
	Role        string // "master" or "slave"
	Primary     string // a replica's primary, host:port
	EvictedKeys int64  // evicted_keys since the server started
}

// MayEvict reports whether the server may delete keys that nobody asked
// it to delete when it is full: w8y's locks (its promise of one run at a
// time), the list itself. Without a maxmemory it never evicts, whatever
// the policy says.
func (s Server) MayEvict() bool {
	return s.MaxMemory > 0 && s.Policy != "" && s.Policy != "noeviction"
}

// Replica reports whether the server is a replica, which refuses writes.
func (s Server) Replica() bool { return s.Role == "slave" }

// ReadServer reads what w8y needs to know of the server (of each primary
// on a Cluster, returning the first that may evict or is a replica, else
// the first). INFO refused (an ACL without +info) is an error that
// Unchecked reports.
func ReadServer(ctx context.Context, client Infoer) (Server, error) {
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		return readNode(ctx, client, "")
	}
	var found []Server
	var mu sync.Mutex
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		s, err := readNode(ctx, node, node.Options().Addr)
		if err != nil {
			return err
		}
		mu.Lock()
		found = append(found, s)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return Server{}, err
	}
	for _, s := range found {
		if s.MayEvict() || s.Replica() {
			return s, nil
		}
	}
	if len(found) == 0 {
		return Server{}, fmt.Errorf("no primary answered INFO")
	}
	return found[0], nil
}

// Infoer is a client that answers INFO.
type Infoer interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

func readNode(ctx context.Context, c Infoer, addr string) (Server, error) {
	text, err := c.Info(ctx, "memory", "replication", "stats").Result()
	if err != nil {
		return Server{}, err
	}
	s := ParseInfo(text)
	s.Addr = addr
	return s, nil
}

// ParseInfo reads a Server from the text of INFO.
func ParseInfo(text string) Server {
	var s Server
	for _, line := range strings.Split(text, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "maxmemory":
			s.MaxMemory, _ = strconv.ParseInt(value, 10, 64)
		case "used_memory":
			s.UsedMemory, _ = strconv.ParseInt(value, 10, 64)
		case "maxmemory_policy":
			s.Policy = value
		case "role":
			s.Role = value
		case "master_host":
			s.Primary = value + s.Primary
		case "master_port":
			s.Primary += ":" + value
		case "evicted_keys":
			s.EvictedKeys, _ = strconv.ParseInt(value, 10, 64)
		}
	}
	return s
}

// Unchecked reports whether err, from ReadServer, is the server refusing
// INFO (an ACL without +info, or a managed service that renames it): w8y
// cannot tell what the server may evict, and says so once, rather than an
// outage.
func Unchecked(err error) bool {
	switch Code(err) {
	case "NOPERM":
		return true
	case "ERR":
		return strings.HasPrefix(strings.ToLower(replyText(err)), "unknown command")
	}
	return false
}

// EvictionRefusal is the one line for a server that may evict w8y's keys.
func EvictionRefusal(s Server, option string) error {
	return Refusal(fmt.Sprintf("Redis%s may evict w8y's keys when it is full (maxmemory %s, maxmemory-policy %s): a lock evicted lets a second worker run the same item, and the list itself may go; set maxmemory-policy noeviction, or give w8y a Redis of its own, or pass %s to run anyway",
		at(s), Bytes(s.MaxMemory), s.Policy, option))
}

// ReplicaRefusal is the one line for a replica given as the server.
func ReplicaRefusal(s Server) error {
	primary := ""
	if s.Primary != "" {
		primary = " (its primary is " + s.Primary + ")"
	}
	return Refusal(fmt.Sprintf("the Redis%s in --redis-url is a replica%s, which refuses every write: give the primary's address, or Sentinel (--sentinel-master)", at(s), primary))
}

func at(s Server) string {
	if s.Addr == "" {
		return ""
	}
	return " at " + s.Addr
}

// Bytes writes n bytes as Redis' configuration does: 4mb, 1gb, or bytes.
func Bytes(n int64) string {
	for _, unit := range []struct {
		size int64
		name string
	}{{1 << 30, "gb"}, {1 << 20, "mb"}, {1 << 10, "kb"}} {
		if n >= unit.size && n%unit.size == 0 {
			return strconv.FormatInt(n/unit.size, 10) + unit.name
		}
	}
	if n >= 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "mb"
	}
	return strconv.FormatInt(n, 10) + "b"
}
