package redisconn

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// TestDialsAgainAtOnceAfterAnOutage: however many dials failed while Redis
// was down, the first command after its return reaches it: apply gives
// every client, for one server, Sentinel or a Cluster, a dialer that goes
// through failOnUse. Left to
// itself, go-redis' pool dials no more after as many failed dials as it
// holds connections, until a dial of its own, tried once a second, gets
// through: a lock's refresh then failed for up to a second after Redis was
// back, and its lease ran out (issue 24). The same for pipelines, which
// go-redis sends over a pool of their own (ten connections by default):
// the take, the finish and the registry's beat use them.
func TestDialsAgainAtOnceAfterAnOutage(t *testing.T) {
	port := redistest.FreePort(t)
	client, err := New(&Options{URL: fmt.Sprintf("redis://127.0.0.1:%d", port)}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	pipelined := func() error {
		_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Ping(ctx)
			p.Ping(ctx)
			return nil
		})
		return err
	}
	// Ten failed commands are twenty failed dials, ten times the pool; ten
	// failed pipelines twice the pipelines' pool.
	for range 10 {
		// The error names what was dialed, as a failed dial always did.
		want := fmt.Sprintf("dial tcp 127.0.0.1:%d: connect: connection refused", port)
		if err := client.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("PING with nothing on port %d: %v, want %q", port, err, want)
		}
		if err := pipelined(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a pipeline with nothing on port %d: %v, want %q", port, err, want)
		}
	}
	redistest.Start(t, redistest.OnPort(port))
	if err := pipelined(); err != nil {
		t.Fatalf("the first pipeline after Redis came back failed: %v", err)
	}
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("the first PING after Redis came back failed: %v", err)
	}
}
