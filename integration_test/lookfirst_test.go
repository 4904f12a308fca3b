package integration_test

import (
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// listReads are the commands that read or move a list's items one by one,
// which a take whose cost does not grow with the list never sends: a pass
// reads the list with LRANGE and rotates it with RPUSH and LTRIM (or LMOVE
// per candidate), and checks each candidate's keys with EXISTS and MGET.
var listReads = []string{"lrange", "ltrim", "lmove", "rpoplpush", "exists", "mget", "lpos", "lrem"}

// TestOneShotDoesNotReadTheList: once the fleet has tried a long list (its
// appended items, then one sweep), a one-shot run over it that finds
// nothing to take reads none of its items, however long it is: one look
// at the due index and the appended items (none), and no sweep, which the
// first run made for the fleet. An item made eligible by hand (its
// cooldown key deleted) is left to the next sweep; one appended with RPUSH
// is taken by the next run.
func TestOneShotDoesNotReadTheList(t *testing.T) {
	t.Parallel()
	b := setup(t, "oneshot")
	items := redistest.Items(20_000)
	b.items(items...)
	b.coolAll(t, b.prefix, items, time.Hour)

	// The first run tries the list as appended, then sweeps it for the
	// fleet: the next sweep is an hour away (--idle-wait).
	b.run("--idle-wait", "1h", "true").wantExit(t, 0)
	if got := b.Client.Get(ctx(t), b.key("seen")).Val(); got != strconv.Itoa(len(items)) {
		t.Fatalf("after the first run, seen is %q, want %d: every item tried", got, len(items))
	}
	if left := b.Client.PTTL(ctx(t), b.key("sweep")).Val(); left < 50*time.Minute {
		t.Fatalf("after the first run's sweep, the next is %s away, want about --idle-wait 1h", left)
	}

	before := redistest.CommandStats(t, b.Client)
	for range 3 {
		r := b.run("--idle-wait", "1h", "true")
		r.wantExit(t, 0)
		if !strings.Contains(r.Stderr, "no item could be taken") {
			t.Errorf("a run that found nothing did not say so: %s", r)
		}
	}
	b.Client.Del(ctx(t), b.key("cooldown:i12345"))
	b.run("--idle-wait", "1h", "--no-work-exit-code", "3", "true").wantExit(t, 3)
	after := redistest.CommandStats(t, b.Client)
	for _, cmd := range listReads {
		if n := after[cmd] - before[cmd]; n != 0 {
			t.Errorf("four one-shot runs over a cooling list sent %d %s", n, cmd)
		}
	}
	if got := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]; got > 4 {
		t.Errorf("four one-shot runs sent %d scripts, want one look each", got)
	}
	if got := b.list(); !slices.Equal(got, items) {
		t.Errorf("the list changed: %d items, want the %d seeded in order", len(got), len(items))
	}

	// An appended item is found by the next run, without a sweep.
	b.Client.RPush(ctx(t), b.key("list"), "new")
	r := b.run("--idle-wait", "1h", "sh", "-c", `echo "ran $W8Y_ITEM"`)
	r.wantExit(t, 0)
	r.wantStdout(t, "ran new\n")
}

// TestFreshListKeepsTheFleetBusy: a list that w8y has never run (thousands
// of items, no due index, no seen mark) gets every worker of a fleet
// running at once, each on an item of its own: the looks try the list as
// appended items, each item once for the fleet, rather than leaving it to
// one sweeping worker at a time. The children count themselves in Redis.
func TestFreshListKeepsTheFleetBusy(t *testing.T) {
	t.Parallel()
	b := setup(t, "fresh")
	items := redistest.Items(5_000)
	b.items(items...)
	const workers = 12
	// Each child counts itself running, and the most ever running, then
	// waits until the test lets it go.
	child := []string{"sh", "-c", `redis-cli -p "$REDIS_PORT" EVAL "local n = redis.call('INCR', KEYS[1]) if n > tonumber(redis.call('GET', KEYS[2]) or 0) then redis.call('SET', KEYS[2], n) end" 2 fresh:running fresh:most >/dev/null
redis-cli -p "$REDIS_PORT" SADD fresh:ran "$W8Y_ITEM" >/dev/null
while [ "$(redis-cli -p "$REDIS_PORT" EXISTS fresh:stop)" = 0 ]; do sleep 0.05; done
redis-cli -p "$REDIS_PORT" DECR fresh:running >/dev/null`}
	var ps []*proc
	for range workers {
		// --idle-wait 1h: the sweep, once elected, does not come back; the
		// fleet must get busy from the looks alone.
		ps = append(ps, b.start(append([]string{"-c", "-q", "--idle-wait", "1h", "--cooldown", "1h"}, child...)...))
	}
	redistest.WaitFor(t, "every worker running a child", func() bool {
		return b.Client.Get(ctx(t), "fresh:most").Val() == strconv.Itoa(workers)
	})
	// Each counted itself before it said which item it runs.
	redistest.WaitFor(t, "every child's item", func() bool { return b.Client.SCard(ctx(t), "fresh:ran").Val() >= workers })
	if n := b.Client.SCard(ctx(t), "fresh:ran").Val(); n != workers {
		t.Errorf("%d children ran %d items, want one each", workers, n)
	}
	b.Client.Set(ctx(t), "fresh:stop", "1", 0)
	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		p.wait(t).wantExit(t, 0)
	}
	if got := b.list(); !isRotation(got, items) {
		t.Errorf("the list lost, gained or reordered items: %d of %d", len(got), len(items))
	}
	b.noLocks()
}
