package wake

import (
	"context"
	"testing"
	"time"

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
