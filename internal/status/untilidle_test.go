package status

import "testing"

// TestStillToRun: what --until-idle waits for. A run, a failure's backoff
// and a pause that ends by itself are waited out; a cooldown, a pause until
// resumed and an item that can never run are not.
func TestStillToRun(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	tests := []struct {
		st   Item
		want bool
	}{
		{Item{Item: "a", State: StateIdle}, true},
		{Item{Item: "a", State: StateLocked, LockTTL: ms(500)}, true},
		{Item{Item: "a", State: StateBackoff, Backoff: ms(500)}, true},
		{Item{Item: "a", State: StateBackoff, Backoff: ms(-1)}, false},
		{Item{Item: "a", State: StatePaused, Pause: ms(500)}, true},
		{Item{Item: "a", State: StatePaused, Pause: ms(-1)}, false},
		{Item{Item: "a", State: StateCooldown, Cooldown: ms(500)}, false},
		{Item{Item: "toolong", State: StateIdle}, false},
		{Item{Item: "", State: StateInvalid}, false},
	}
	for _, tt := range tests {
		if got := stillToRun(tt.st, 6); got != tt.want {
			t.Errorf("%+v: still to run %v, want %v", tt.st, got, tt.want)
		}
	}
}
