package integration_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/poll"
)

// countingChild counts itself in "running" while it runs and records the
// count it saw in "seen", reports its start as $1 in "started", then waits
// for a push to "go" if $2 is "block", and exits with $3 (0 by default).
const countingChild = `redis-cli -p "$REDIS_PORT" rpush seen "$(redis-cli -p "$REDIS_PORT" incr running)" >/dev/null; ` +
	`redis-cli -p "$REDIS_PORT" rpush started "$1 $W8Y_ITEM $W8Y_FENCE" >/dev/null; ` +
	`[ "$2" = block ] && redis-cli -p "$REDIS_PORT" blpop go 0 >/dev/null; ` +
	`redis-cli -p "$REDIS_PORT" decr running >/dev/null; exit "${3:-0}"`

// TestItemRuns: --item runs the command for an item that is not in the
// list, under its lock and with a fencing token, stops it at --timeout,
// records the run as a run of the list would be (state, events, cooldown
// or backoff), exits with the command's code, and leaves the list as it
// was. A cooldown does not hold it back.
func TestItemRuns(t *testing.T) {
	s := withList(t, "item", "a", "b")
	s.run("--item", "x", "--cooldown", "1h", "sh", "-c", countingChild, "sh", "item").wantExit(t, 0)
	if got := s.popStarted(t); got != "item x 1" {
		t.Errorf("the child started as %q, want \"item x 1\" (item x, fence 1)", got)
	}
	if got := s.Client.HGet(ctx(t), s.key("state:x"), "last_result").Val(); got != "success" {
		t.Errorf("the run is recorded as %q, want success", got)
	}
	if s.Client.Exists(ctx(t), s.key("cooldown:x")).Val() != 1 {
		t.Error("the run's cooldown was not written")
	}
	// Its cooldown does not hold a named item back; the command's code is
	// w8y's.
	s.run("--item", "x", "--cooldown", "1h", "sh", "-c", countingChild, "sh", "item", "", "3").wantExit(t, 3)
	if got := s.popStarted(t); got != "item x 2" {
		t.Errorf("the second run started as %q, want \"item x 2\"", got)
	}
	if got := s.Client.HGet(ctx(t), s.key("state:x"), "last_result").Val(); got != "failure" {
		t.Errorf("the second run is recorded as %q, want failure", got)
	}
	// --timeout stops it as it stops any run, which then backs off.
	s.run("--item", "x", "--timeout", "200ms", "--failure-backoff", "1h", "sleep", "60").wantExit(t, 124)
	if got := s.Client.HGet(ctx(t), s.key("state:x"), "last_result").Val(); got != "timeout" {
		t.Errorf("the third run is recorded as %q, want timeout", got)
	}
	if s.Client.Exists(ctx(t), s.key("backoff:x")).Val() != 1 {
		t.Error("the timed-out run's backoff was not written")
	}
	// Each run is in the events stream, its start and its end.
	var events []string
	for _, e := range s.Client.XRange(ctx(t), s.key("events"), "-", "+").Val() {
		field := func(name string) string { v, _ := e.Values[name].(string); return v }
		events = append(events, field("type")+" "+field("item")+" "+field("fence")+field("result"))
	}
	if want := []string{"start x 1", "finish x success", "start x 2", "finish x failure", "start x 3", "timeout x timeout"}; !slices.Equal(events, want) {
		t.Errorf("the events stream holds %q, want %q", events, want)
	}
	s.wantList("a", "b")
	s.noLocks()
}

// TestItemWaitsForTheFleet: while a fleet worker runs an item, --item
// waits for its lock, then runs; the two never run at once.
func TestItemWaitsForTheFleet(t *testing.T) {
	s := withList(t, "itemwait", "a")
	fleet := s.start("sh", "-c", countingChild, "sh", "fleet", "block")
	if got := s.popStarted(t); got != "fleet a 1" {
		t.Fatalf("the fleet started %q", got)
	}
	one := s.start("--item", "a", "--wait", "1m", "sh", "-c", countingChild, "sh", "item")
	poll.WaitFor(t, "--item to wait for the lock", func() bool {
		return strings.Contains(one.stderrSoFar(), "waiting for it")
	})
	s.Client.RPush(ctx(t), "go", "1")
	fleet.wait(t).wantExit(t, 0)
	one.wait(t).wantExit(t, 0)
	s.wantInTurn("item a 2")
}

// TestFleetWaitsForTheItem: while --item runs an item, a fleet worker does
// not take it (a one-shot run finds no work), and takes it once --item has
// ended; the two never run at once.
func TestFleetWaitsForTheItem(t *testing.T) {
	s := withList(t, "itemfirst", "a")
	one := s.start("--item", "a", "sh", "-c", countingChild, "sh", "item", "block")
	if got := s.popStarted(t); got != "item a 1" {
		t.Fatalf("--item started %q", got)
	}
	s.run("--no-work-exit-code", "3", "sh", "-c", countingChild, "sh", "fleet").wantExit(t, 3)
	s.Client.RPush(ctx(t), "go", "1")
	one.wait(t).wantExit(t, 0)
	s.run("sh", "-c", countingChild, "sh", "fleet").wantExit(t, 0)
	s.wantInTurn("fleet a 2")
}

// TestItemGivesUp: a lock held for all of --wait (or at once, with no
// --wait) ends --item with 121 and one line, without running the command
// or touching the holder's lock.
func TestItemGivesUp(t *testing.T) {
	s := withList(t, "itemheld", "a")
	s.Client.Set(ctx(t), s.key("lock:a"), "someone", 0)
	for _, wait := range []string{"0", "300ms"} {
		r := s.run("-q", "--item", "a", "--wait", wait, "sh", "-c", countingChild, "sh", "item")
		r.wantExit(t, 121)
		oneLine(t, r.Stderr, `item "a": its lock is held`)
	}
	if n := s.Client.LLen(ctx(t), "started").Val(); n != 0 {
		t.Errorf("the command ran %d times", n)
	}
	if got := s.Client.Get(ctx(t), s.key("lock:a")).Val(); got != "someone" {
		t.Errorf("the holder's lock is now %q", got)
	}
}

// TestItemPaused: a paused item is refused (125, one line) unless
// --ignore-pause, which runs it and leaves the pause.
func TestItemPaused(t *testing.T) {
	s := withList(t, "itempause", "a")
	s.ctl("pause", "a").wantExit(t, 0)
	r := s.run("--item", "a", "sh", "-c", countingChild, "sh", "item")
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, `item "a": it is paused: --ignore-pause runs it anyway`)
	s.run("--item", "a", "--ignore-pause", "sh", "-c", countingChild, "sh", "item").wantExit(t, 0)
	if got := s.popStarted(t); !strings.HasPrefix(got, "item a ") {
		t.Errorf("started %q", got)
	}
	if s.Client.Exists(ctx(t), s.key("pause:a")).Val() != 1 {
		t.Error("--ignore-pause removed the pause")
	}
	s.noLocks()
}

// wantInTurn fails the test unless the second of two runs of countingChild
// started as second, and the two never ran at once (each child saw itself
// alone), and no lock is left.
func (b *bundle) wantInTurn(second string) {
	b.t.Helper()
	if got := b.popStarted(b.t); got != second {
		b.t.Errorf("the second run started as %q, want %q", got, second)
	}
	if seen := b.Client.LRange(ctx(b.t), "seen", 0, -1).Val(); strings.Join(seen, ",") != "1,1" {
		b.t.Errorf("the children saw %q running, want 1 each: they overlapped", seen)
	}
	b.noLocks()
}
