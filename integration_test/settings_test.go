package integration_test

import (
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
)

// settingsChild records each start in the list "started" ("<item>
// <holder's pid>"), and runs c for 2s, the others at once.
const settingsChild = `redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null
case "$W8Y_ITEM" in c) sleep 2;; esac`

// TestItemSettings: an item's own settings, which w8yctl set stores in
// Redis, stand in for every worker's options when it takes the item, from
// its next run: b with a cooldown of 1h runs once while a worker without
// a cooldown runs the others on and on; c with a timeout of 1s ends each
// run in a timeout recorded as such, with every worker; a worker started
// later applies them as well; unset gives the item back to the workers'
// options; a value written by hand that does not read is told of once,
// and the worker's option stands in its place.
func TestItemSettings(t *testing.T) {
	s := withList(t, "own", "a", "b", "c")
	s.ctl("set", "b", "--cooldown", "1h").wantStdout(t, `set "b" --cooldown 1h0m0s`+"\n")
	s.ctl("set", "c", "--timeout", "1s").wantStdout(t, `set "c" --timeout 1s`+"\n")
	if r := s.ctl("status", "b"); !strings.Contains(r.Stdout, "\n  settings: --cooldown 1h0m0s\n") {
		t.Errorf("w8yctl status b does not show its settings:\n%s", r.Stdout)
	}
	if out := statusOutput(t, nil, s.at()...); !strings.Contains(out, "\nb has settings of its own: --cooldown 1h0m0s\n") {
		t.Errorf("--status does not show b's settings:\n%s", out)
	}
	worker := func() *proc {
		return s.start("-c", "--log-level", "warn", "--idle-wait", "50ms", "--failure-backoff", "50ms", "sh", "-c", settingsChild)
	}
	starts := map[string]int{}
	startsUntil := func(what string, done func() bool) {
		t.Helper()
		poll.Repeat(t, poll.Timeout, what, func() bool {
			starts[s.popStarted(t)]++
			return done()
		})
	}
	w1 := worker()
	startsUntil("a to run five times", func() bool { return starts["a"] >= 5 && starts["c"] >= 1 })
	if starts["b"] != 1 {
		t.Errorf("b, with a cooldown of its own of 1h, started %d times while a started %d times, want once", starts["b"], starts["a"])
	}
	if pttl := s.Client.PTTL(ctx(t), s.key("cooldown:b")).Val(); pttl < 59*time.Minute {
		t.Errorf("b's cooldown expires in %s, want its own 1h", pttl)
	}
	poll.WaitFor(t, "c's run to time out", func() bool {
		return s.Client.HGet(ctx(t), s.key("state:c"), "last_result").Val() == "timeout"
	})
	if r := s.ctl("events", "--item", "c"); !strings.Contains(r.Stdout, ` timeout "c" `) {
		t.Errorf("no timeout event of c:\n%s", r.Stdout)
	}

	// A worker started later applies them too, and so does one started
	// after both stopped: they live in Redis, not in a worker. The first
	// stops first, so that the second is the one to run c (two would race
	// for it, and the first, busy with a, could win every time).
	drain(t, []*proc{w1})
	w2 := worker()
	pid := itoa(w2.cmd.Process.Pid)
	poll.WaitFor(t, "the second worker's run of c to time out", func() bool {
		for _, m := range s.Client.XRange(ctx(t), s.key("events"), "-", "+").Val() {
			if m.Values["type"] == "timeout" && m.Values["item"] == "c" && strings.Contains(m.Values["holder"].(string), ":"+pid+":") {
				return true
			}
		}
		return false
	})
	drain(t, []*proc{w2})
	s.ctl("run-now", "b").mustExit(t, 0)
	s.Client.Del(ctx(t), "started")
	w3 := worker()
	starts = map[string]int{}
	startsUntil("b to run again after run-now", func() bool { return starts["b"] == 1 })
	poll.WaitFor(t, "b's second run to end", func() bool {
		return s.Client.HGet(ctx(t), s.key("state:b"), "runs").Val() == "2"
	})
	if pttl := s.Client.PTTL(ctx(t), s.key("cooldown:b")).Val(); pttl < 59*time.Minute {
		t.Errorf("after a restart, b's cooldown expires in %s, want its own 1h", pttl)
	}

	// unset: the workers' options stand again, from the item's next run.
	s.ctl("unset", "c", "--timeout").wantStdout(t, `unset "c" --timeout: the workers' own options stand`+"\n")
	poll.WaitFor(t, "c's run to succeed in its 2s", func() bool {
		return s.Client.HGet(ctx(t), s.key("state:c"), "last_result").Val() == "success"
	})
	s.ctl("unset", "b").mustExit(t, 0)
	s.ctl("run-now", "b").mustExit(t, 0)
	starts = map[string]int{}
	startsUntil("b to run on without a cooldown", func() bool { return starts["b"] >= 3 })

	// A value written by hand that does not read: told of once, however
	// often a is taken, and a runs under the worker's options.
	s.Client.HSet(ctx(t), s.key("settings:a"), "timeout", "ten minutes")
	starts = map[string]int{}
	startsUntil("a to run five times", func() bool { return starts["a"] >= 5 })
	if n := strings.Count(w3.stderrSoFar(), "does not read"); n != 1 {
		t.Errorf("the worker told %d times of a's timeout that does not read, want once:\n%s", n, w3.stderrSoFar())
	}
	drain(t, []*proc{w3})
	s.noLocks()
}

// TestDocsItemSettings runs docs/operating.md's session of an item's own
// settings as it is written, with w8y and w8yctl pointed at the test's
// Redis by W8Y_REDIS_URL, and checks that it prints what the page shows,
// but for the times, holders, durations and who.
func TestDocsItemSettings(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	pageSession(t, s.URL, "docs/operating.md", "w8yctl -k work add --create big-customer", `added 2 items to "work:list"`, `\(23h59m[\d.]+s left`, `: 23h59m[\d.]+s left`)
	if got := s.Client.HGetAll(ctx(t), "work:settings:big-customer").Val(); got["timeout"] != "2h0m0s" || got["schedule"] != "0 * * * *" || len(got) != 2 {
		t.Errorf("big-customer's settings are %v", got)
	}
}

// TestItemOwnBackoff: an item's own failure backoff stands in for the
// worker's in what a failure does to the loop too: a worker without
// --failure-backoff goes on after a failure of an item that backs off by
// itself, and one with it stops after a failure of an item whose own
// backoff is none, as a worker without one stops, rather than retry it in
// a tight loop.
func TestItemOwnBackoff(t *testing.T) {
	t.Parallel()
	const child = `redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null; case "$W8Y_ITEM" in f*) exit 3;; esac`
	s := setup(t, "ownb")
	s.items("f", "g")
	s.ctl("set", "f", "--failure-backoff", "1h").mustExit(t, 0)
	w := s.start("-c", "-q", "--idle-wait", "50ms", "sh", "-c", child)
	starts := map[string]int{}
	poll.Repeat(t, poll.Timeout, "g to run five times", func() bool {
		starts[s.popStarted(t)]++
		return starts["g"] >= 5
	})
	if starts["f"] != 1 {
		t.Errorf("f, failing with a backoff of its own of 1h, started %d times, want once", starts["f"])
	}
	if pttl := s.Client.PTTL(ctx(t), s.key("backoff:f")).Val(); pttl < 40*time.Minute {
		t.Errorf("f's backoff expires in %s, want most of its own 1h", pttl)
	}
	drain(t, []*proc{w})

	n := setup(t, "ownn")
	n.items("f0")
	n.ctl("set", "f0", "--failure-backoff", "0").mustExit(t, 0)
	r := n.run("-c", "-q", "--idle-wait", "50ms", "--failure-backoff", "1s", "sh", "-c", child)
	r.wantExit(t, 3)
	if got := n.Client.LLen(ctx(t), "started").Val(); got != 1 {
		t.Errorf("f0, failing without a backoff of its own, started %d times, want once, then the worker stops", got)
	}
}
