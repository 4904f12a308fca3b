package proc

import (
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
)

// TestRelayHearsWhatW8yDidNotSend: a relay passes on each SIGINT and
// SIGQUIT that reaches its group from elsewhere (the terminal's keys), but
// not those that w8y sent the group itself, and before it has left,
// everything it heard has been passed on.
func TestRelayHearsWhatW8yDidNotSend(t *testing.T) {
	var mu sync.Mutex
	var heard []syscall.Signal
	got := func() []syscall.Signal {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(heard)
	}
	r, err := startRelay(nil, 0, func(sig syscall.Signal) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, sig)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The relay made a group of its own; a child would join it.
	c := &Child{pgid: r.pid, relay: r}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		if !poll.Poll(10*time.Second, cond) {
			t.Fatalf("%s never happened; heard %v", what, got())
		}
	}
	// w8y forwards a SIGINT: its echo is not heard.
	if err := c.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitUntil("the echo to come back", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.echoes[syscall.SIGINT] == 0
	})
	// The terminal's Ctrl-\ and Ctrl-C are.
	_ = syscall.Kill(-r.pid, syscall.SIGQUIT)
	waitUntil("SIGQUIT to be heard", func() bool { return len(got()) == 1 })
	_ = syscall.Kill(-r.pid, syscall.SIGINT)
	c.endRelay()
	if want := []syscall.Signal{syscall.SIGQUIT, syscall.SIGINT}; !slices.Equal(got(), want) {
		t.Errorf("heard %v, want %v", got(), want)
	}
	if err := syscall.Kill(r.pid, 0); err == nil {
		t.Errorf("the relay %d still runs after it was asked to leave", r.pid)
	}
}

// TestRelayHearsACtrlCRightBeforeItLeaves: a SIGINT that reached the
// relay's group just before w8y asked it to leave is passed on before the
// relay has left, however its threads happen to be scheduled. A relay that
// leaves on a marker of its own can let the marker overtake the SIGINT
// inside the process; as that shows only now and then, the test takes many
// relays through it.
func TestRelayHearsACtrlCRightBeforeItLeaves(t *testing.T) {
	for round := range 50 {
		// Written by the relay's reader, read once end has waited for it.
		var heard []syscall.Signal
		r, err := startRelay(nil, 0, func(sig syscall.Signal) { heard = append(heard, sig) })
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(-r.pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		r.end()
		if want := []syscall.Signal{syscall.SIGINT}; !slices.Equal(heard, want) {
			t.Fatalf("round %d: heard %v, want %v", round, heard, want)
		}
	}
}
