package schema

import "testing"

// TestKeyNames pins the names that other programs read and write: changing
// one breaks them.
func TestKeyNames(t *testing.T) {
	k := Keys{Prefix: "work:"}
	for got, want := range map[string]string{
		k.List():          "work:list",
		k.Lock("a:1"):     "work:lock:a:1",
		k.Cooldown("a:1"): "work:cooldown:a:1",
		k.Backoff("a:1"):  "work:backoff:a:1",
		k.Pause("a:1"):    "work:pause:a:1",
		k.State("a:1"):    "work:state:a:1",
		k.Events():        "work:events",
		k.Due():           "work:due",
		k.Sweep():         "work:sweep",
		k.Swept():         "work:swept",
		k.Seen():          "work:seen",
		k.Untried():       "work:untried",
		k.Fence():         "work:fence",
		k.Cancel("a:1"):   "work:cancel:a:1",
		k.Worker("h:1:a"): "work:worker:h:1:a",
		k.Workers():       "work:workers",
		k.Looking():       "work:looking",
		k.Running():       "work:running",
		k.FleetMax():      "work:fleet-max-running",
		k.Schema():        "work:schema",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if got := (Keys{}).Lock("x"); got != "lock:x" {
		t.Errorf("no prefix: %q", got)
	}
}

func TestNormalizePrefix(t *testing.T) {
	for in, want := range map[string]string{"": "", "work": "work:", "work:": "work:", "{w}": "{w}:", "a::": "a::"} {
		if got := NormalizePrefix(in); got != want {
			t.Errorf("NormalizePrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResults(t *testing.T) {
	tests := []struct {
		r      Result
		failed bool
		event  string
	}{
		{ResultSuccess, false, "finish"},
		{ResultFailure, true, "finish"},
		{ResultTimeout, true, "timeout"},
		{ResultLockLost, true, "lock_lost"},
		{ResultInterrupted, false, "finish"},
		{ResultCancelled, false, "cancelled"},
	}
	if len(tests) != len(Results) {
		t.Fatalf("%d results listed, %d tested", len(Results), len(tests))
	}
	for i, tt := range tests {
		if Results[i] != tt.r || tt.r.Failed() != tt.failed || tt.r.Event() != tt.event {
			t.Errorf("%s: failed %v event %q, want %v %q", tt.r, tt.r.Failed(), tt.r.Event(), tt.failed, tt.event)
		}
	}
}
