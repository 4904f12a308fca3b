package wake

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestWait: a token in the fleet's wake list ends one wait, not two; a
// wait that no token ends returns unwoken, short or long; Interrupt ends
// the worker's own wait, and only its own.
func TestWait(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "w:", Colocated: true}
	a := &Waiter{Client: rdb, Keys: keys, Holder: "a"}
	b := &Waiter{Client: rdb, Keys: keys, Holder: "b"}

	for _, d := range []time.Duration{0, 50 * time.Millisecond, 1500 * time.Millisecond, 2 * time.Second} {
		if woken, err := a.Wait(ctx, d); woken || err != nil {
			t.Errorf("a wait of %s with no token: woken %v, %v", d, woken, err)
		}
	}

	type end struct {
		who   string
		woken bool
		err   error
	}
	ends := make(chan end, 2)
	for _, w := range []*Waiter{a, b} {
		go func() {
			woken, err := w.Wait(context.WithoutCancel(ctx), 5*time.Second)
			ends <- end{w.Holder, woken, err}
		}()
	}
	poll.WaitFor(t, "both to wait", func() bool {
		return redistest.Info(t, rdb, "clients")["blocked_clients"] == "2"
	})
	rdb.RPush(ctx, keys.Wake(), "1")
	first := <-ends
	if !first.woken || first.err != nil {
		t.Fatalf("a token ended a wait as %+v, want woken", first)
	}
	other := map[string]*Waiter{"a": b, "b": a}[first.who]
	if err := other.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	if second := <-ends; second.who != other.Holder || !second.woken || second.err != nil {
		t.Errorf("Interrupt ended %+v, want %s's wait, woken", second, other.Holder)
	}
	if n := rdb.Exists(ctx, keys.Wake(), keys.WakeOf("a"), keys.WakeOf("b")).Val(); n != 0 {
		t.Errorf("%d wake lists left with tokens that no wait took", n)
	}
}

// TestWaitThen: a command given to Wait runs as the wait ends, not as it is
// sent (it reads what another client wrote during the wait), after a
// timeout and after a token, though the wait is longer than the client's
// read timeout; the wait and the commands behind it reach Redis in one
// read, where sent one after the other they take one each; and where Wait cannot send it
// with the wait, the command says so and the wait goes on alone.
func TestWaitThen(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	opt := rdb.Options()
	// One connection for commands and pipelines alike, as w8y's own
	// clients have (see redisconn), and replies read within 300ms.
	short := redis.NewClient(&redis.Options{Addr: opt.Addr, Username: opt.Username, Password: opt.Password,
		TLSConfig: opt.TLSConfig, ReadTimeout: 300 * time.Millisecond, PipelinePoolSize: -1})
	t.Cleanup(func() { _ = short.Close() })
	keys := schema.Keys{Prefix: "t:", Colocated: true}
	w := &Waiter{Client: short, Keys: keys, Holder: "a"}

	type end struct {
		woken bool
		err   error
	}
	// waitWriting waits d with a GET behind it, sets the key while the
	// wait blocks, then pushes the token if told, and returns the wait's
	// end and what the GET read.
	waitWriting := func(d time.Duration, value string, token bool) (end, *redis.Cmd) {
		t.Helper()
		get := redis.NewCmd(ctx, "get", "t:k")
		ends := make(chan end, 1)
		go func() {
			woken, err := w.Wait(ctx, d, get)
			ends <- end{woken, err}
		}()
		poll.WaitFor(t, "the wait to block", func() bool {
			return redistest.Info(t, rdb, "clients")["blocked_clients"] == "1"
		})
		rdb.Set(ctx, "t:k", value, 0)
		if token {
			rdb.RPush(ctx, keys.Wake(), "1")
		}
		return <-ends, get
	}
	if e, get := waitWriting(800*time.Millisecond, "during", false); e.woken || e.err != nil || get.Val() != "during" {
		t.Errorf("a wait of 800ms with a GET behind it ended %+v and the GET read %q (%v), want unwoken and %q",
			e, get.Val(), get.Err(), "during")
	}
	if e, get := waitWriting(5*time.Second, "token", true); !e.woken || e.err != nil || get.Val() != "token" {
		t.Errorf("a wait that a token ended, with a GET behind it: %+v and the GET read %q (%v), want woken and %q",
			e, get.Val(), get.Err(), "token")
	}

	// Reads of the server: the INFO that reads the count after is one.
	reads := func() int {
		n, err := strconv.Atoi(redistest.Info(t, rdb, "stats")["total_reads_processed"])
		if err != nil {
			t.Fatalf("INFO stats total_reads_processed: %v", err)
		}
		return n
	}
	before := reads()
	if _, err := w.Wait(ctx, 20*time.Millisecond, redis.NewCmd(ctx, "ping"), redis.NewCmd(ctx, "ping")); err != nil {
		t.Fatal(err)
	}
	together := reads() - before - 1
	before = reads()
	if _, err := w.Wait(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	short.Ping(ctx)
	apart := reads() - before - 1
	if together != 1 || apart != 2 {
		t.Errorf("Redis read a wait with two PINGs behind it in %d reads, and a wait and a PING sent apart in %d: want 1 and 2", together, apart)
	}

	// No wait to send it with, or no client that waits for it.
	ping := redis.NewCmd(ctx, "ping")
	if woken, err := w.Wait(ctx, 0, ping); woken || err != nil || !errors.Is(ping.Err(), ErrNotSent) {
		t.Errorf("a wait of 0 with a PING: woken %v, %v, and the PING's %v; want %v", woken, err, ping.Err(), ErrNotSent)
	}
	other := &Waiter{Client: wrapped{short}, Keys: keys, Holder: "a"}
	ping = redis.NewCmd(ctx, "ping")
	if woken, err := other.Wait(ctx, 20*time.Millisecond, ping); woken || err != nil || !errors.Is(ping.Err(), ErrNotSent) {
		t.Errorf("a wait through a client of another kind, with a PING: woken %v, %v, and the PING's %v; want %v",
			woken, err, ping.Err(), ErrNotSent)
	}
}

// wrapped is a Client that is not a *redis.Client, as a Cluster's is not.
type wrapped struct{ *redis.Client }
