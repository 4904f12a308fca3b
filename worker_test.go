package main

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/proc"
)

func TestJitterStaysWithinAQuarter(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, time.Second, 30 * time.Second} {
		for range 1000 {
			got := jitter(d)
			if got < d*3/4 || got > d*5/4 {
				t.Fatalf("jitter(%s) = %s, outside ±25%%", d, got)
			}
		}
	}
}

func TestKillGraceLeavesTimeBeforeTheLeaseEnds(t *testing.T) {
	tests := []struct {
		killAfter, ttl, want time.Duration
	}{
		{10 * time.Second, 5 * time.Second, 5 * time.Second / 3},
		{time.Second, 30 * time.Second, time.Second},
		{0, 5 * time.Second, 0},
		{time.Hour, 300 * time.Millisecond, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		grace := killGrace(tt.killAfter, tt.ttl)
		if grace != tt.want {
			t.Errorf("killGrace(%s, %s) = %s, want %s", tt.killAfter, tt.ttl, grace, tt.want)
		}
		// The lock is declared lost with grace+margin of the lease left, and
		// a refresh period must fit before that, or every run would lose it.
		if giveUp := grace + stopMargin(tt.ttl); giveUp >= tt.ttl-tt.ttl/3 {
			t.Errorf("ttl %s: giving up %s before the end leaves no room for a refresh", tt.ttl, giveUp)
		}
	}
}

func TestSignalRouter(t *testing.T) {
	r := newSignalRouter(zerolog.Nop())
	r.handle(syscall.SIGUSR1, nil)
	select {
	case <-r.Stopped():
		t.Fatal("SIGUSR1 stopped w8y")
	default:
	}
	r.handle(syscall.SIGTERM, nil)
	select {
	case <-r.Stopped():
	default:
		t.Fatal("SIGTERM did not stop w8y")
	}
	r.handle(syscall.SIGINT, nil)
	if got := r.StopSignal(); got != syscall.SIGTERM {
		t.Errorf("stop signal %s, want the first one, SIGTERM", got)
	}
	started := false
	_, err := r.startChild(func() (*proc.Child, error) {
		started = true
		return nil, nil
	}, nil)
	if !errors.Is(err, errStopped) || started {
		t.Errorf("a child was started after a stop signal (err %v)", err)
	}
}
