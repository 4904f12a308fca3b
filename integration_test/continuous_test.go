package integration_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// TestContinuousRunsItemsInTurn: a continuous worker takes the items in
// list order, goes on after exit codes listed in -i, and stops with the
// first code that is not listed.
func TestContinuousRunsItemsInTurn(t *testing.T) {
	b := withList(t, "turn", "a", "b", "c", "d")
	// a and b succeed, c exits 3 (listed), d exits 4 (not listed).
	r := b.run("-c", "-i", "0", "-i", "3", "-q", "sh", "-c", started+`; case "$W8Y_ITEM" in c) exit 3;; d) exit 4;; esac`)
	r.wantExit(t, 4)
	if got := b.server.list(t, "started"); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("items run %q, want a b c d", got)
	}
	b.noLocks()
}

// commandsProcessed reads Redis' count of the commands it has served, each
// read one INFO more.
func (s *server) commandsProcessed(t *testing.T) int {
	t.Helper()
	return atoi(t, redistest.Info(t, s.Client, "stats")["total_commands_processed"])
}

// TestContinuousIdleIsQuiet: with every item locked by someone else, a
// continuous worker does not poll: it waits for a wake (BLPOP) until its
// fallback's look, every --idle-wait (1s ±25%), or the fleet's next sweep,
// which for a list this short is a step every take.SweepMin (5s), and
// after each wait sends one probe (a script call) and, when the sweep is
// due, one look; its registry beat is one script call every 5s.
func TestContinuousIdleIsQuiet(t *testing.T) {
	items := []string{"a", "b", "c"}
	s := withList(t, "idle", items...)
	for _, item := range items {
		s.Client.Set(ctx(t), s.key("lock:"+item), "someone-else", time.Hour)
	}
	p := s.start("-c", "true")

	// Wait until the first look has been made, then count waits, script
	// calls and commands over a window longer than the sweep's interval.
	poll.WaitFor(t, "the first look", func() bool { return s.looks(t) > 0 })
	const window = 6 * time.Second
	before, commands := redistest.CommandStats(t, s.Client), s.commandsProcessed(t)
	time.Sleep(window) // a measurement window, not a synchronisation
	after := redistest.CommandStats(t, s.Client)
	sent := s.commandsProcessed(t) - commands - 2 // less our own INFOs
	waits := after["blpop"] - before["blpop"]
	calls := after["evalsha"] - before["evalsha"]

	// A wait at least every 750ms (--idle-wait less its jitter), one more
	// at each of the sweep's steps (two in the window, at most), and one
	// short one after each look.
	steps := int(window/(5*time.Second)) + 1
	if most := int(window/(750*time.Millisecond)) + 2*steps + 1; waits < 1 || waits > most {
		t.Errorf("%d waits for a wake in %s while idle; want between 1 and %d", waits, window, most)
	}
	// A probe after each wait, a look for each step, and two beats.
	if most := waits + steps + 2; calls > most {
		t.Errorf("%d script calls for %d waits in %s while idle; want at most %d", calls, waits, window, most)
	}
	t.Logf("idle: %d waits, %d script calls and %d commands counting the scripts' own in %s (%.1f/s)", waits, calls, sent, window, float64(sent)/window.Seconds())

	p.stop(t)
	// SIGTERM may land mid-pass, so the list may be rotated, but it holds
	// the same items in the same circular order.
	if got := s.list(); !redistest.IsRotation(got, items) {
		t.Errorf("list holds %q, want a rotation of %q", got, items)
	}
	for _, item := range items {
		if v, _ := s.Client.Get(ctx(t), s.key("lock:"+item)).Result(); v != "someone-else" {
			t.Errorf("someone else's lock on %q is now %q", item, v)
		}
	}
}

// TestContinuousRidesOutRedisOutage: a continuous worker started while Redis
// is down keeps retrying, and processes items once Redis is up; a Redis
// restart while it idles does not end it either.
func TestContinuousRidesOutRedisOutage(t *testing.T) {
	t.Parallel()
	port := redistest.FreePort(t)
	url := fmt.Sprintf("redis://127.0.0.1:%d", port)
	env := []string{fmt.Sprintf("REDIS_PORT=%d", port)}
	// The child succeeds even when the test kills Redis before redis-cli has
	// read its reply, which would otherwise end the worker with code 1.
	p := startW8y(t, env, "-u", url, "-k", "out", "-c", "--idle-wait", "100ms", "sh", "-c", started+"; exit 0")

	// w8y logs each failed attempt and how long it waits; wait for two,
	// proving it retries.
	retrying := regexp.MustCompile(`ERR retrying in [0-9.]+m?s error=`)
	poll.WaitFor(t, "two retries logged", func() bool {
		return len(retrying.FindAllString(p.stderrSoFar(), -1)) >= 2
	})

	s := startRedis(t, redistest.OnPort(port))
	s.seed(t, "out:list", "a")
	if got := s.popStarted(t); got != "a" {
		t.Errorf("started %q, want a", got)
	}
	if !regexp.MustCompile(`INF Redis is reachable again, after [0-9.]+m?s`).MatchString(p.stderrSoFar()) {
		t.Errorf("Redis' return was not logged:\n%s", p.stderrSoFar())
	}

	// Restart Redis under the worker, then give it work again.
	s.Stop()
	s.Restart(t)
	s.seed(t, "out:list", "b")
	if got := s.popStarted(t); got != "b" {
		t.Errorf("after the restart, started %q, want b", got)
	}

	p.stop(t)
}

// TestContinuousStopsOnWrongKeyType: a wrong key type is not a hiccup, so
// even a continuous worker exits 125 at once, in the words every command
// gives a list key of another type.
func TestContinuousStopsOnWrongKeyType(t *testing.T) {
	t.Parallel()
	s := setup(t, "typed")
	s.Client.HSet(ctx(t), s.key("list"), "field", "value")
	r := s.run("-c", "-q", "true")
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, `"typed:list" holds a hash, not a list of items`)
}

// TestContinuousWarnsOfAMissingList: an idle worker whose list does not
// exist says so at its first idle pass, not at every one, and gets to work
// once items arrive.
func TestContinuousWarnsOfAMissingList(t *testing.T) {
	t.Parallel()
	s := setup(t, "typo")
	p := s.start("-c", "-t", "--idle-wait", "10ms", "sh", "-c", started)
	const warning = `WRN the list "typo:list" does not exist or is empty`
	poll.WaitFor(t, "the warning", func() bool { return strings.Contains(p.stderrSoFar(), warning) })
	// Many idle passes later (each a probe or a look, each with an LLEN),
	// it has said so once.
	poll.WaitFor(t, "20 idle passes", func() bool { return redistest.CommandStats(t, s.Client)["llen"] >= 20 })
	if n := strings.Count(p.stderrSoFar(), warning); n != 1 {
		t.Errorf("the warning came %d times:\n%s", n, p.stderrSoFar())
	}
	s.items("a")
	if got := s.popStarted(t); got != "a" {
		t.Errorf("started %q", got)
	}
	p.stop(t)
}
