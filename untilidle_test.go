package main

import (
	"testing"

	"github.com/w8y/w8y/internal/status"
)

// TestStillToRun: what --until-idle waits for. A run, a failure's backoff
// and a pause that ends by itself are waited out; a cooldown, a pause until
// resumed and an item that can never run are not.
func TestStillToRun(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	tests := []struct {
		st   status.Item
		want bool
	}{
		{status.Item{Item: "a", State: status.StateIdle}, true},
		{status.Item{Item: "a", State: status.StateLocked, LockTTL: ms(500)}, true},
		{status.Item{Item: "a", State: status.StateBackoff, Backoff: ms(500)}, true},
		{status.Item{Item: "a", State: status.StateBackoff, Backoff: ms(-1)}, false},
		{status.Item{Item: "a", State: status.StatePaused, Pause: ms(500)}, true},
		{status.Item{Item: "a", State: status.StatePaused, Pause: ms(-1)}, false},
		{status.Item{Item: "a", State: status.StateCooldown, Cooldown: ms(500)}, false},
		{status.Item{Item: "toolong", State: status.StateIdle}, false},
		{status.Item{Item: "", State: status.StateInvalid}, false},
	}
	for _, tt := range tests {
		if got := stillToRun(tt.st, 6); got != tt.want {
			t.Errorf("%+v: still to run %v, want %v", tt.st, got, tt.want)
		}
	}
}
