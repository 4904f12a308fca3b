package integration_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestCtlStatusItems: status ITEM shows, for items that a real worker ran
// and runs, how often the list holds each, the lock's holder, the backoff
// and the pause with its reason, the last run with its fence, the counts,
// the latest events and the kept output, bounded and escaped; and an item
// that the list does not hold, as such.
func TestCtlStatusItems(t *testing.T) {
	t.Parallel()
	s := setup(t, "st")
	c := s.Client
	s.items("a", "b")
	s.run("-q", "--failure-backoff", "1h", "sh", "-c", `exit 3`).wantExit(t, 3)
	w := s.start(append([]string{"-q"}, gated...)...)
	if got := s.popStarted(t); got != "b" {
		t.Fatalf("the worker took %q, want b", got)
	}
	holder := c.Get(ctx(t), "st:lock:b").Val()
	s.ctl("pause", "a", "--reason", "disk full").mustExit(t, 0)
	// What --keep-output would keep: longer than status shows, and with
	// bytes that a terminal would act on.
	stdout := strings.Repeat("x", 2991) + "\nthe end\n"
	c.HSet(ctx(t), "st:state:a", "last_stdout", stdout, "last_stderr", "\x1b[31mred\x1b[0m\n")
	fence := c.HGet(ctx(t), "st:state:a", "last_fence").Val()

	r := s.ctl("status", "a", "b", "zz")
	r.mustExit(t, 0)
	for _, want := range []string{
		`(?m)^"a": in the list "st:list" once, paused$`,
		`(?m)^  lock: free$`,
		`(?m)^  backoff: \d+m[\d.]+s left$`,
		`(?m)^  pause: no expiry, by .+@\S+ at \d{4}-\d\d-\d\dT[\d:.]+Z: disk full$`,
		`(?m)^  last run: result=failure exit_code=3 start=\S+ end=\S+ duration_ms=\d+ holder=\S+ fence=` + fence + `$`,
		`(?m)^  runs=1 failures=1 consecutive_failures=1$`,
		`(?m)^  latest events:\n    \S+ start "a" holder=\S+ fence=` + fence + `\n    \S+ finish "a" .*result=failure`,
		`(?m)^  last stdout \(3000 bytes, the last 2048 shown\):\n    \| x+\n    \| the end\n`,
		`(?m)^  last stderr \(13 bytes\):\n    \| \\x1b\[31mred\\x1b\[0m\n`,
		`(?m)^"b": in the list "st:list" once, locked\n  lock: holder=` + regexp.QuoteMeta(holder) + `, \d.*s left$`,
		`(?m)^"zz": not in the list "st:list", idle\n  lock: free\n  cooldown: none\n  backoff: none\n  pause: none\n  last run: never\n  runs=0 failures=0 consecutive_failures=0\n\z`,
	} {
		if !regexp.MustCompile(want).MatchString(r.Stdout) {
			t.Errorf("status a b zz does not match %s:\n%s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "\x1b") {
		t.Errorf("status printed an escape byte as it is")
	}

	r = s.ctl("status", "--json", "a")
	r.mustExit(t, 0)
	var details []map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &details); err != nil || len(details) != 1 {
		t.Fatalf("status --json a: %v\n%s", err, r)
	}
	d := details[0]
	events, _ := d["recent_events"].([]any)
	if d["item"] != "a" || d["occurrences"] != 1.0 || d["state"] != "paused" || d["pause_reason"] != "disk full" ||
		d["last_fence"] == nil || d["last_stdout"] != stdout || d["last_stderr"] != "\x1b[31mred\x1b[0m\n" || len(events) != 2 {
		t.Errorf("status --json a: %s", r.Stdout)
	}
	if first, _ := events[0].(map[string]any); first["type"] != "start" || first["item"] != "a" || first["id"] == nil {
		t.Errorf("status --json a's first event: %v", events[0])
	}

	c.RPush(ctx(t), "gate:b", "0")
	w.wait(t).wantExit(t, 0)
}
