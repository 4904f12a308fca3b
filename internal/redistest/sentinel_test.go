package redistest

import (
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
	WaitFor(t, "the replica to copy k", func() bool { return g.Replica.Client.Get(ctx, "k").Val() == "v" })
}
