package integration_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// cancelSlack is what the test allows on top of the third of --key-expiry
// within which a cancel must have stopped a child's group: the refresh's own
// round trip and the group's exit, on a machine that runs the whole suite in
// parallel under the race detector.
const cancelSlack = 500 * time.Millisecond

// keysOf are the keys under prefix on one server, as control.Cancel takes them.
func keysOf(prefix string) schema.Keys {
	return schema.Keys{Prefix: schema.NormalizePrefix(prefix), Colocated: true}
}

// lastEvent returns the fields of the last entry of prefix's events stream.
func (s *server) lastEvent(t *testing.T, prefix string) map[string]any {
	t.Helper()
	entries, err := s.Client.XRevRangeN(ctx(t), prefix+":events", "+", "-", 1).Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("events of %s: %v, %v", prefix, entries, err)
	}
	return entries[0].Values
}

// TestCancel: a cancel stops a continuous worker's running child, and the
// child's own child, within a third of --key-expiry; the run is recorded as
// cancelled with the reason, counts as no failure, and the worker goes on
// and takes the item again.
func TestCancel(t *testing.T) {
	s := withList(t, "cx", "a")
	dir := t.TempDir()
	const expiry = 3 * time.Second
	s.setenv("DIR=" + dir)
	p := s.start("-c", "-x", "3", "--kill-after", "300ms",
		"sh", "-c", `echo $$ > "$DIR/child"; sleep 1000 & echo $! > "$DIR/grandchild"; `+started+`; wait`)
	if item := s.popStarted(t); item != "a" {
		t.Fatalf("took %q", item)
	}
	child, grandchild := readPID(t, filepath.Join(dir, "child")), readPID(t, filepath.Join(dir, "grandchild"))
	holder := s.Client.Get(ctx(t), s.key("lock:a")).Val()

	req, err := control.Cancel(ctx(t), s.Client, keysOf("cx"), "a", "the disk is full", false)
	asked := time.Now()
	if err != nil || req.Holder != holder {
		t.Fatalf("Cancel = %+v, %v; the lock holds %q", req, err, holder)
	}
	if !poll.Poll(poll.Timeout, func() bool { return !stillRuns(child) && !stillRuns(grandchild) }) {
		t.Fatalf("the child %d or its child %d still runs after %s", child, grandchild, poll.Timeout)
	}
	took := time.Since(asked)
	if took > expiry/3+cancelSlack {
		t.Errorf("the group was gone %s after the cancel, want within a third of %s", took, expiry)
	}
	t.Logf("the group was gone %s after the cancel (a third of the expiry: %s)", took.Round(time.Millisecond), expiry/3)

	// The worker goes on, and takes the item again: it is due at once.
	if item := s.popStarted(t); item != "a" {
		t.Fatalf("took %q after the cancel, want a again", item)
	}
	state := s.Client.HGetAll(ctx(t), s.key("state:a")).Val()
	if state["last_result"] != "cancelled" || state["last_reason"] != "the disk is full" || state["runs"] != "1" ||
		state["failures"] != "" || state["consecutive_failures"] != "" {
		t.Errorf("state after the cancelled run: %v", state)
	}
	events, err := s.Client.XRange(ctx(t), s.key("events"), "-", "+").Result()
	if err != nil || len(events) != 3 {
		t.Fatalf("events: %v, %v; want a start, an end and a start", events, err)
	}
	end := events[1].Values
	want := map[string]any{"type": "cancelled", "result": "cancelled", "item": "a", "holder": holder, "reason": "the disk is full", "cancelled_by": req.By}
	for f, v := range want {
		if end[f] != v {
			t.Errorf("the end event's %s is %v, want %v (event %v)", f, end[f], v, end)
		}
	}
	// No pause of any kind, and the request is spent.
	if keys := s.keys(t, s.key("*")); strings.Contains(strings.Join(keys, " "), "cooldown:") ||
		strings.Contains(strings.Join(keys, " "), "backoff:") || strings.Contains(strings.Join(keys, " "), "cancel:") {
		t.Errorf("keys after the cancelled run: %q", keys)
	}
	drain(t, []*proc{p})
	s.noLocks()
}

// TestCancelMissesTheNextRun: a cancel that reaches a run only as it ends by
// itself does not stop the next run of the item, though the same worker, and
// so the same token, runs it: the finish spends the request. Nor does a
// request aimed at another holder's token stop a run.
func TestCancelMissesTheNextRun(t *testing.T) {
	s := withList(t, "cn", "a")
	dir := t.TempDir()
	// Refreshes come every 2s: the first run ends long before its first.
	s.setenv("DIR=" + dir)
	p := s.start("-c", "-x", "6",
		"sh", "-c", `n=$(redis-cli -p "$REDIS_PORT" incr runs); echo $$ > "$DIR/child.$n"; `+started+`; `+
			`while [ ! -e "$DIR/gate.$n" ]; do sleep 0.01; done`)
	s.popStarted(t)
	if _, err := control.Cancel(ctx(t), s.Client, keysOf("cn"), "a", "too late", false); err != nil {
		t.Fatal(err)
	}
	open := func(n int) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("gate.%d", n)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	open(1)
	s.popStarted(t)
	if got := s.Client.HGet(ctx(t), s.key("state:a"), "last_result").Val(); got != "success" {
		t.Fatalf("the first run ended %q, want success: it ended before any refresh", got)
	}
	if n := s.Client.Exists(ctx(t), s.key("cancel:a")).Val(); n != 0 {
		t.Errorf("the request outlived the run it was aimed at")
	}
	// A request aimed at another token, as if left by a holder that died.
	s.Client.HSet(ctx(t), s.key("cancel:a"), "holder", "dead-host:1:abc", "reason", "old", "by", "x", "at", "0", "as_failure", "0")
	waitRefresh(t, s.server, s.key("lock:a"))
	second := readPID(t, filepath.Join(dir, "child.2"))
	if !stillRuns(second) {
		t.Fatalf("the second run's child %d was stopped", second)
	}
	open(2)
	poll.WaitFor(t, "the second run's end", func() bool { return s.Client.HGet(ctx(t), s.key("state:a"), "runs").Val() == "2" })
	if got := s.Client.HGet(ctx(t), s.key("state:a"), "last_result").Val(); got != "success" {
		t.Errorf("the second run ended %q, want success", got)
	}
	drain(t, []*proc{p})
	if n := s.Client.Exists(ctx(t), s.key("cancel:a")).Val(); n != 1 {
		t.Errorf("the request aimed at another holder was deleted")
	}
}

// waitRefresh waits until lock has been refreshed: its time to live went
// up from one read to the next. (Not above the first read: one made in the
// millisecond of a refresh reads the whole expiry, which no later refresh
// exceeds.)
func waitRefresh(t *testing.T, s *server, lock string) {
	t.Helper()
	last := s.Client.PTTL(ctx(t), lock).Val()
	poll.WaitFor(t, "a refresh of "+lock, func() bool {
		now := s.Client.PTTL(ctx(t), lock).Val()
		refreshed := now > last
		last = now
		return refreshed
	})
}

// TestCancelNothingRuns: a cancel of an item that no run holds says so and
// changes nothing in Redis, and the next run of the item is not cancelled.
func TestCancelNothingRuns(t *testing.T) {
	s := withList(t, "cz", "a", "b")
	// b's lock was set by hand, without an expiry: no run holds it.
	s.Client.Set(ctx(t), s.key("lock:b"), "by hand", 0)
	s.Client.HSet(ctx(t), s.key("state:a"), "consecutive_failures", 1)
	before := s.dump(t, s.key("*"))
	for _, item := range []string{"a", "b", "c"} {
		if _, err := control.Cancel(ctx(t), s.Client, keysOf("cz"), item, "r", true); !errors.Is(err, control.ErrNotRunning) {
			t.Errorf("cancel of %s: %v, want ErrNotRunning", item, err)
		}
	}
	if after := s.dump(t, s.key("*")); after != before {
		t.Errorf("a cancel of nothing changed Redis from\n%s\nto\n%s", before, after)
	}
	// A run that refreshes its lock, and so reads the cancel request, a few
	// times (every 500ms), under a lease long enough for a loaded machine.
	s.run("-x", "1.5", "sh", "-c", "sleep 1.2").wantExit(t, 0)
	if got := s.Client.HGet(ctx(t), s.key("state:a"), "last_result").Val(); got != "success" {
		t.Errorf("the next run ended %q", got)
	}
}

// dump is redistest.Dump of every key matching pattern, for comparing
// what Redis holds before and after.
func (s *server) dump(t *testing.T, pattern string) string {
	t.Helper()
	return strings.Join(redistest.Lines(redistest.Dump(t, s.Client, pattern)), "\n")
}

// TestCancelOneShot: a cancelled one-shot run exits 123 with one line on
// stderr (the log goes to a file); it counts as no failure unless the
// request asked.
func TestCancelOneShot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		asFailure bool
		// state is consecutive_failures and failures after the run, from 2
		// and none.
		state   [2]string
		backoff int64
	}{
		{"not a failure", false, [2]string{"2", ""}, 0},
		{"counted as a failure", true, [2]string{"3", "1"}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startRedis(t)
			s.seed(t, "co:list", "a")
			s.Client.HSet(ctx(t), "co:state:a", "consecutive_failures", 2)
			logFile := filepath.Join(t.TempDir(), "w8y.log")
			p := startW8y(t, portEnv(s), "-u", s.URL, "-k", "co", "-x", "1.5", "--kill-after", "300ms", "--failure-backoff", "10s",
				"-f", logFile, "sh", "-c", started+"; exec sleep 1000")
			s.popStarted(t)
			req, err := control.Cancel(ctx(t), s.Client, keysOf("co"), "a", "wrong input", tt.asFailure)
			if err != nil {
				t.Fatal(err)
			}
			r := p.wait(t)
			r.wantExit(t, 123)
			if want := fmt.Sprintf("w8y: item \"a\" was cancelled by %s: \"wrong input\"; the child was stopped\n", req.By); r.Stderr != want {
				t.Errorf("stderr %q, want %q", r.Stderr, want)
			}
			state := s.Client.HGetAll(ctx(t), "co:state:a").Val()
			if state["consecutive_failures"] != tt.state[0] || state["failures"] != tt.state[1] || state["last_result"] != "cancelled" {
				t.Errorf("state %v, want consecutive_failures %q and failures %q", state, tt.state[0], tt.state[1])
			}
			if n := s.Client.Exists(ctx(t), "co:backoff:a").Val(); n != tt.backoff {
				t.Errorf("%d backoff keys, want %d", n, tt.backoff)
			}
			if ev := s.lastEvent(t, "co"); ev["reason"] != "wrong input" || ev["exit_code"] != "143" {
				t.Errorf("end event %v", ev)
			}
			s.noLocks(t, "co")
		})
	}
}

// TestCancelOneOfParallel: with --parallel, a cancel stops only the child
// of its item; the other runs on under its own lock.
func TestCancelOneOfParallel(t *testing.T) {
	s := withList(t, "cp", "a", "b")
	dir := t.TempDir()
	s.setenv("DIR=" + dir)
	p := s.start("-c", "--parallel", "2", "-x", "1.5", "--kill-after", "300ms",
		"--cooldown", "1h", "sh", "-c", `echo $$ > "$DIR/$W8Y_ITEM"; `+started+`; while [ ! -e "$DIR/gate.$W8Y_ITEM" ]; do sleep 0.01; done`)
	s.popStarted(t)
	s.popStarted(t)
	a, b := readPID(t, filepath.Join(dir, "a")), readPID(t, filepath.Join(dir, "b"))
	if _, err := control.Cancel(ctx(t), s.Client, keysOf("cp"), "a", "only a", false); err != nil {
		t.Fatal(err)
	}
	processGone(t, a)
	poll.WaitFor(t, "a's end", func() bool { return s.Client.HGet(ctx(t), s.key("state:a"), "last_result").Val() == "cancelled" })
	// b outlives refreshes of its own lock that read its cancel key.
	waitRefresh(t, s.server, s.key("lock:b"))
	if !stillRuns(b) || s.Client.HGet(ctx(t), s.key("state:b"), "runs").Val() != "" {
		t.Fatalf("b's child was stopped too")
	}
	if err := os.WriteFile(filepath.Join(dir, "gate.b"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, "b's end", func() bool { return s.Client.HGet(ctx(t), s.key("state:b"), "last_result").Val() == "success" })
	// a, cancelled, has no cooldown: the worker takes it again.
	if item := s.popStarted(t); item != "a" {
		t.Errorf("took %q after the cancel, want a", item)
	}
	if err := os.WriteFile(filepath.Join(dir, "gate.a"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	drain(t, []*proc{p})
	s.noLocks()
}

// TestCtlCancel: w8yctl cancel, as an operator types it, stops a one-shot
// worker's running child (exit 123, recorded as cancelled with the reason);
// a cancel of an item nobody runs says so and changes nothing; remove
// --cancel removes a running item and stops its run.
func TestCtlCancel(t *testing.T) {
	s := withList(t, "cc", "a", "b")
	child := []string{"-u", s.URL, "-k", "cc", "-x", "1.5", "--kill-after", "300ms", "-q", "sh", "-c", started + "; exec sleep 1000"}
	w := startW8y(t, s.env, child...)
	if got := s.popStarted(t); got != "a" {
		t.Fatalf("the worker took %q, want a", got)
	}
	holder := s.Client.Get(ctx(t), s.key("lock:a")).Val()

	// A mistyped prefix is refused, not taken for an item nobody runs.
	before := s.snapshot(t)
	r := runCtl(t, nil, "-u", s.URL, "-k", "ccc", "cancel", "a")
	r.wantExit(t, 120)
	oneLineOf(t, "w8yctl", r.Stderr, `the list "ccc:list" does not exist`)

	r = s.ctl("cancel", "b")
	r.mustExit(t, 0)
	r.wantStdout(t, `"b" is not running: nothing to cancel`+"\n")
	if after := s.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("a cancel of an item nobody runs changed Redis")
	}

	r = s.ctl("cancel", "--reason", "the disk is full", "a")
	r.mustExit(t, 0)
	r.wantStdout(t, "asked "+holder+` to stop "a": its child stops at the holder's next lock refresh`+"\n")
	w.wait(t).wantExit(t, 123)
	if state := s.Client.HGetAll(ctx(t), s.key("state:a")).Val(); state["last_result"] != "cancelled" || state["last_reason"] != "the disk is full" {
		t.Errorf("state of the cancelled a: %v", state)
	}
	// status ITEM tells why the last run ended.
	r = s.ctl("status", "a")
	r.mustExit(t, 0)
	if !regexp.MustCompile(`last run: result=cancelled .*reason="the disk is full"`).MatchString(r.Stdout) {
		t.Errorf("status a does not show the cancelled run's reason:\n%s", r.Stdout)
	}

	// remove --cancel: b runs, and is removed and stopped.
	w = startW8y(t, s.env, child...)
	if got := s.popStarted(t); got != "b" {
		t.Fatalf("the worker took %q, want b", got)
	}
	holder = s.Client.Get(ctx(t), s.key("lock:b")).Val()
	r = s.ctl("remove", "--cancel", "b")
	r.mustExit(t, 0)
	r.wantStdout(t, `removed "b" (1 occurrence) and its cooldown, backoff, pause, state and settings; it is running now (holder `+holder+"): its run is cancelled\n")
	w.wait(t).wantExit(t, 123)
	if got := s.list(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("list after remove --cancel: %q", got)
	}
	s.noLocks()
}
