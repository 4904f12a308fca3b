package main

import (
	"testing"
	"time"
)

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
