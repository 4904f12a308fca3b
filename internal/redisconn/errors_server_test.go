package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// TestWrapSortsTheServersOwnReplies provokes each class that a test server
// can be made to answer, on the server that W8Y_TEST_SERVER chooses (make
// test runs it on Redis and on Valkey), so that Wrap is checked against
// the server's own words, not only against the ones TestWrapSortsByCode
// copied.
func TestWrapSortsTheServersOwnReplies(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	rdb := s.Client
	if err := rdb.Set(ctx, "str", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A user like the docs' worker, without one command that w8y's
	// scripts call.
	if err := rdb.Do(ctx, "ACL", "SETUSER", "worker", "on", ">pw", "~*", "+@all", "-zrangebyscore").Err(); err != nil {
		t.Fatal(err)
	}
	worker := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, Username: "worker", Password: "pw", MaxRetries: -1})
	t.Cleanup(func() { worker.Close() })
	wrongPass := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, Username: "worker", Password: "wrong", MaxRetries: -1})
	t.Cleanup(func() { wrongPass.Close() })
	locked := redistest.Start(t, redistest.Password("secret"))
	noAuth := redis.NewClient(&redis.Options{Addr: locked.Client.Options().Addr, MaxRetries: -1})
	t.Cleanup(func() { noAuth.Close() })
	// A replica of the first server refuses writes.
	replica := redistest.Start(t, redistest.Args("--replicaof", "127.0.0.1", strconv.Itoa(s.Port)))
	// A replica whose master is not there, told not to serve stale data.
	// (Told once it runs: the start's PING would get MASTERDOWN too.)
	orphan := redistest.Start(t)
	if err := orphan.Client.ConfigSet(ctx, "replica-serve-stale-data", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if err := orphan.Client.Do(ctx, "REPLICAOF", "127.0.0.1", redistest.FreePort(t)).Err(); err != nil {
		t.Fatal(err)
	}
	// A Cluster node that serves no slot yet.
	node := redistest.Start(t, redistest.Args("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"))

	// A database that the server does not have (it has 16), and a
	// Cluster's client for a server that is not one: mistakes of
	// --redis-url that no retry mends.
	noDB := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, DB: 99, MaxRetries: -1})
	t.Cleanup(func() { noDB.Close() })
	notCluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{rdb.Options().Addr}, MaxRetries: -1})
	t.Cleanup(func() { notCluster.Close() })

	// Nobody listens on this port: a dial that fails.
	nobody := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)), MaxRetries: -1})
	t.Cleanup(func() { nobody.Close() })

	const refused, unavailable = true, false
	// again: the command was not applied, and may be sent again (see
	// NotApplied).
	const again, notAgain = true, false
	tests := []struct {
		name    string
		err     error
		code    string
		refused bool
		again   bool
	}{
		{"WRONGTYPE", rdb.LPush(ctx, "str", "a").Err(), "WRONGTYPE", refused, notAgain},
		{"an unknown command", rdb.Do(ctx, "NOSUCHCOMMAND").Err(), "ERR", refused, notAgain},
		{"NOPERM", worker.Do(ctx, "ZRANGEBYSCORE", "z", 0, 1).Err(), "NOPERM", refused, notAgain},
		{"a script's ACL refusal", worker.Eval(ctx, "return redis.call('zrangebyscore', KEYS[1], 0, 1)", []string{"z"}).Err(), "", refused, notAgain},
		{"WRONGPASS", wrongPass.Ping(ctx).Err(), "WRONGPASS", refused, notAgain},
		{"NOAUTH", noAuth.Get(ctx, "k").Err(), "NOAUTH", refused, notAgain},
		{"NOSCRIPT", rdb.EvalSha(ctx, "0000000000000000000000000000000000000000", nil).Err(), "NOSCRIPT", unavailable, notAgain},
		{"READONLY", replica.Client.Set(ctx, "k", "v", 0).Err(), "READONLY", unavailable, again},
		{"MASTERDOWN", orphan.Client.Get(ctx, "k").Err(), "MASTERDOWN", unavailable, again},
		{"CLUSTERDOWN", node.Client.Get(ctx, "k").Err(), "CLUSTERDOWN", unavailable, again},
		{"a refused connection", nobody.Ping(ctx).Err(), "", unavailable, again},
		{"a database the server lacks", noDB.Ping(ctx).Err(), "", refused, notAgain},
		{"--redis-cluster on one server", notCluster.Get(ctx, "k").Err(), "", refused, notAgain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("the server did not refuse")
			}
			if tt.code != "" && Code(tt.err) != tt.code {
				t.Errorf("Code(%q) = %q, want %q", tt.err, Code(tt.err), tt.code)
			}
			err := Wrap("op", tt.err)
			if errors.Is(err, ErrRefused) != tt.refused || errors.Is(err, ErrUnavailable) == tt.refused {
				t.Errorf("Wrap(%q) = %v: refused %v, want %v", tt.err, err, errors.Is(err, ErrRefused), tt.refused)
			}
			if NotApplied(tt.err) != tt.again {
				t.Errorf("NotApplied(%q) = %v, want %v", tt.err, NotApplied(tt.err), tt.again)
			}
		})
	}

	t.Run("CROSSSLOT", func(t *testing.T) {
		if err := node.Client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
			t.Fatal(err)
		}
		poll.WaitFor(t, "the node to serve every slot", func() bool {
			return redistest.Info(t, node.Client, "cluster")["cluster_enabled"] == "1" && node.Client.Get(ctx, "a").Err() == redis.Nil
		})
		err := node.Client.MGet(ctx, "a", "b").Err()
		if Code(err) != "CROSSSLOT" || !errors.Is(Wrap("op", err), ErrRefused) {
			t.Errorf("MGET of two slots: %v, sorted as %v; want CROSSSLOT, refused", err, Wrap("op", err))
		}
	})

	t.Run("BUSY", func(t *testing.T) {
		// A script that runs until it is killed, past the server's
		// threshold (5s by default, 100ms here): meanwhile every other
		// command is refused with BUSY.
		busy := redistest.Start(t, redistest.Args("--busy-reply-threshold", "100"))
		done := make(chan error, 1)
		go func() { done <- busy.Client.Eval(ctx, "while true do end", nil).Err() }()
		p := pinger(t, busy)
		var err error
		poll.WaitFor(t, "the server to answer BUSY", func() bool {
			err = p.Ping(ctx).Err()
			return Code(err) == "BUSY"
		})
		if !errors.Is(Wrap("op", err), ErrUnavailable) || !NotApplied(err) {
			t.Errorf("%q sorted as %v, not applied %v; want unavailable, not applied", err, Wrap("op", err), NotApplied(err))
		}
		if err := p.Do(ctx, "SCRIPT", "KILL").Err(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err == nil {
			t.Error("the killed script returned no error")
		}
	})
}

// pinger is a client of s of its own, since s.Client waits on the script.
func pinger(t *testing.T, s *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.Port), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}
