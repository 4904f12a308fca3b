package redistest

import (
	"github.com/w8y/w8y/internal/poll"

	"context"
	"testing"
)

// TestStartSentinelGroup: the sentinels agree on the master, and the
// replica follows it.
func TestStartSentinelGroup(t *testing.T) {
	t.Parallel()
	g := StartSentinelGroup(t)
	if port := g.MasterPort(); port != g.Master.Port {
		t.Errorf("the sentinels name port %d as master, want %d", port, g.Master.Port)
	}
	ctx := context.Background()
	if err := g.Master.Client.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, "the replica to copy k", func() bool { return g.Replica.Client.Get(ctx, "k").Val() == "v" })
}

// TestSentinelFailover: after a failover the sentinels name the former
// replica, which takes writes, and the former master replicates it; a
// second failover goes back.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	g := StartSentinelGroup(t)
	first := g.Master.Port
	ctx := context.Background()
	for i, want := range []string{"after one", "after two"} {
		g.Failover(t)
		if port := g.MasterPort(); port != g.Master.Port || (i == 0) == (port == first) {
			t.Fatalf("failover %d: the sentinels name port %d as master; the group's master is %d, the first was %d", i+1, port, g.Master.Port, first)
		}
		if err := g.Master.Client.Set(ctx, "k", want, 0).Err(); err != nil {
			t.Fatalf("failover %d: the new master refused a write: %v", i+1, err)
		}
		poll.WaitFor(t, "the new replica to copy k", func() bool { return g.Replica.Client.Get(ctx, "k").Val() == want })
	}
}
