package integration_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// TestContinuousRunsItemsInTurn: a continuous worker takes the items in
// list order, goes on after exit codes listed in -i, and stops with the
// first code that is not listed.
func TestContinuousRunsItemsInTurn(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "turn:list", "a", "b", "c", "d")
	// a and b succeed, c exits 3 (listed), d exits 4 (not listed).
	r := runW8y(t, portEnv(s), "-u", s.URL, "-k", "turn", "-c", "-i", "0", "-i", "3", "-q", "sh", "-c",
		started+`; case "$W8Y_ITEM" in c) exit 3;; d) exit 4;; esac`)
	r.wantExit(t, 4)
	got, _ := s.Client.LRange(ctx(t), "started", 0, -1).Result()
	if !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("items run %q, want a b c d", got)
	}
	s.noLocks(t, "turn")
}

// commandsProcessed reads Redis' count of the commands it has served, each
// read one INFO more.
func (s *server) commandsProcessed(t *testing.T) int {
	t.Helper()
	return atoi(t, redistest.Info(t, s.Client, "stats")["total_commands_processed"])
}

// TestContinuousIdleIsQuiet: with every item locked by someone else, a
// continuous worker looks about once a second and sweeps at most once per
// --idle-wait, not a busy loop.
func TestContinuousIdleIsQuiet(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := []string{"a", "b", "c"}
	s.seed(t, "idle:list", items...)
	for _, item := range items {
		s.Client.Set(ctx(t), "idle:lock:"+item, "someone-else", time.Hour)
	}
	p := startW8y(t, nil, "-u", s.URL, "-k", "idle", "-c", "true")

	// Wait until the first pass has been made, then count commands over a
	// window of several idle waits.
	// One EVALSHA, which runs LLEN, LRANGE and EXISTS; a whole pass leaves
	// the list as it was, so nothing is written.
	perPass := 4
	base := s.commandsProcessed(t)
	redistest.WaitFor(t, "the first pass", func() bool { return s.commandsProcessed(t)-base >= perPass })
	const window = 3 * time.Second
	before := s.commandsProcessed(t)
	time.Sleep(window)                          // a measurement window, not a synchronisation
	sent := s.commandsProcessed(t) - before - 1 // less our own INFO

	// Once idle, the worker looks at what came due every 800ms ±25% (the
	// script, LLEN, ZRANGEBYSCORE and the sweep key's SET NX: as many
	// commands as a pass), so at most window/0.6s looks; and the look that
	// sets the sweep key, at most once per --idle-wait (1s), also passes
	// over the list. Each bound has one more that straddles the window's
	// start.
	maxPasses := int(window/(600*time.Millisecond)) + 1 + int(window/time.Second) + 1
	if sent > maxPasses*perPass || sent < perPass {
		t.Errorf("%d commands in %s while idle; want between %d and %d (%d per pass or look)", sent, window, perPass, maxPasses*perPass, perPass)
	}
	t.Logf("idle: %d commands in %s (%.1f/s)", sent, window, float64(sent)/window.Seconds())

	p.signal(t, syscall.SIGTERM)
	p.wait(t).wantExit(t, 0)
	// SIGTERM may land mid-pass, so the list may be rotated, but it holds
	// the same items.
	got := s.list(t, "idle:list")
	slices.Sort(got)
	if !slices.Equal(got, items) {
		t.Errorf("list holds %q, want %q", got, items)
	}
	for _, item := range items {
		if v, _ := s.Client.Get(ctx(t), "idle:lock:"+item).Result(); v != "someone-else" {
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
	redistest.WaitFor(t, "two retries logged", func() bool {
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

	p.signal(t, syscall.SIGTERM)
	p.wait(t).wantExit(t, 0)
}

// TestContinuousStopsOnWrongKeyType: a wrong key type is not a hiccup, so
// even a continuous worker exits 125 at once.
func TestContinuousStopsOnWrongKeyType(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.Client.HSet(ctx(t), "typed:list", "field", "value")
	r := runW8y(t, nil, "-u", s.URL, "-k", "typed", "-c", "-q", "true")
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, "WRONGTYPE")
}

// TestContinuousWarnsOfAMissingList: an idle worker whose list does not
// exist says so at its first idle pass, not at every one, and gets to work
// once items arrive.
func TestContinuousWarnsOfAMissingList(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	p := startW8y(t, portEnv(s), "-u", s.URL, "-k", "typo", "-c", "-t", "--idle-wait", "10ms", "sh", "-c", started)
	const warning = `WRN the list "typo:list" does not exist or is empty`
	redistest.WaitFor(t, "the warning", func() bool { return strings.Contains(p.stderrSoFar(), warning) })
	// Many idle passes later, it has said so once.
	redistest.WaitFor(t, "20 idle passes", func() bool { return redistest.CommandStats(t, s.Client)["evalsha"] >= 20 })
	if n := strings.Count(p.stderrSoFar(), warning); n != 1 {
		t.Errorf("the warning came %d times:\n%s", n, p.stderrSoFar())
	}
	s.seed(t, "typo:list", "a")
	if got := s.popStarted(t); got != "a" {
		t.Errorf("started %q", got)
	}
	p.signal(t, syscall.SIGTERM)
	p.wait(t).wantExit(t, 0)
}
