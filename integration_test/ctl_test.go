package integration_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// The tests of w8yctl run the built binary, as an operator does, against
// workers that run the built w8y.

// snapshot is redistest.Dump of every key of s but the registry of live
// workers, so that a test can check that a refused command changed nothing.
func (s *server) snapshot(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, k := range redistest.Dump(t, s.Client, "*") {
		// The registry of live workers changes with their beats, whatever
		// w8yctl does.
		if strings.HasSuffix(k.Name, ":workers") || strings.HasSuffix(k.Name, ":looking") || strings.Contains(k.Name, ":worker:") {
			continue
		}
		out = append(out, k.String())
	}
	return out
}

// TestCtlAdd: add appends only what the list lacks and says how many; it
// refuses, a line each, items that no worker could run, and then adds
// nothing; a missing list is started only with --create.
func TestCtlAdd(t *testing.T) {
	t.Parallel()
	s := setup(t, "ad")
	s.items("a", "b")

	r := s.ctl("add", "b", "c", "d")
	r.mustExit(t, 0)
	r.wantStdout(t, "added 2 items to \"ad:list\"\n\"b\" is in the list already\nadded \"c\"\nadded \"d\"\n")
	if got := s.list(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("list after add: %q", got)
	}

	// An argument can hold no NUL byte (internal/childcmd's item test covers those),
	// and is at most 128 KiB: this one fits, but not beside W8Y_LOCK_KEY=
	// and the lock prefix in one environment string of the child's.
	long := strings.Repeat("x", 131_060)
	before := s.snapshot(t)
	r = s.ctl("add", "e", "", long)
	lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
	if r.Code != 125 || len(lines) != 2 || !strings.HasPrefix(lines[0], `w8yctl: item 2, "", cannot be added: it is empty`) ||
		!strings.Contains(lines[1], "item 3, \"xxxx") || !strings.Contains(lines[1], "it is 131060 bytes long") {
		// Not r, whose command line holds the long item.
		t.Errorf("want exit 125 and a line for each bad item, got %d:\n%s", r.Code, r.Stderr)
	}
	if r.Stdout != "" || goSpeak.MatchString(r.Stderr) {
		t.Errorf("refused add: stdout %q, stderr %q", r.Stdout, r.Stderr)
	}
	if after := s.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("a refused add changed Redis")
	}

	// A mistyped prefix starts no list; --create does.
	r = runCtl(t, nil, "-u", s.URL, "-k", "adx", "add", "a")
	r.wantExit(t, 120)
	oneLineOf(t, "w8yctl", r.Stderr, `the list "adx:list" does not exist or is empty: is --key-prefix (W8Y_KEY_PREFIX) right? Give --create`)
	r = runCtl(t, nil, "-u", s.URL, "-k", "adx", "add", "--create", "--json", "a")
	r.mustExit(t, 0)
	var results []map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &results); err != nil || len(results) != 1 || results[0]["item"] != "a" || results[0]["changed"] != 1.0 {
		t.Errorf("add --json: %v %s", err, r)
	}
	if got := s.server.list(t, "adx:list"); !slices.Equal(got, []string{"a"}) {
		t.Errorf("list after add --create: %q", got)
	}
}

// TestCtlRemove: remove takes every occurrence out of the list with the
// item's cooldown, backoff, pause and state; a running item is left to
// finish, and its run ends as it would have.
func TestCtlRemove(t *testing.T) {
	t.Parallel()
	s := setup(t, "rm")
	s.items("a", "b", "a", "c")
	for _, key := range []string{"cooldown:a", "backoff:a", "pause:a"} {
		s.Client.Set(ctx(t), s.key(key), "x", time.Hour)
	}
	s.Client.HSet(ctx(t), s.key("state:a"), "runs", 4)
	// a's entry in the due index, as its last run's finish wrote it: a
	// member of a sorted set, which no key pattern finds (see noTrace).
	s.Client.ZAdd(ctx(t), s.key("due"), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "a"})
	// a cools down, so the worker takes b, and holds it until the gate.
	w := s.start(append([]string{"-q"}, gated...)...)
	if got := s.popStarted(t); got != "b" {
		t.Fatalf("the worker took %q, want b", got)
	}
	holder := s.Client.Get(ctx(t), s.key("lock:b")).Val()

	r := s.ctl("remove", "a", "b")
	r.mustExit(t, 0)
	r.wantStdout(t, `removed "a" (2 occurrences) and its cooldown, backoff, pause and state`+"\n"+
		`removed "b" (1 occurrence) and its cooldown, backoff, pause and state; it is running now (holder `+holder+"): its run is left to finish\n")
	if got := s.list(); !slices.Equal(got, []string{"c"}) {
		t.Errorf("list after remove: %q", got)
	}
	s.noTrace("a")
	if got := s.Client.Get(ctx(t), s.key("lock:b")).Val(); got != holder {
		t.Errorf("b's lock is %q while it runs, want its holder's %q", got, holder)
	}
	s.Client.RPush(ctx(t), "gate:b", "0")
	w.wait(t).wantExit(t, 0)
	s.noLocks()

	// Gone: a second remove is refused and changes nothing.
	before := s.snapshot(t)
	r = s.ctl("remove", "a")
	r.wantExit(t, 125)
	oneLineOf(t, "w8yctl", r.Stderr, `"a" is not in the list "rm:list" (nothing was changed)`)
	if after := s.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("a refused remove changed Redis")
	}
}

// TestCtlPause: no worker of several takes a paused item; a pause with
// --for ends by itself and the item is then taken, promptly; resume ends
// a pause without one. A paused item that runs finishes its run.
func TestCtlPause(t *testing.T) {
	t.Parallel()
	s := setup(t, "pz")
	s.items("forever", "timed", "free")
	paused := time.Now()
	r := s.ctl("pause", "forever", "--reason", "broken disk")
	r.mustExit(t, 0)
	r.wantStdout(t, "paused \"forever\" until resumed (broken disk)\n")
	s.ctl("pause", "timed", "--for", "1500ms").mustExit(t, 0)
	if h := s.Client.HGetAll(ctx(t), s.key("pause:forever")).Val(); h["reason"] != "broken disk" || !strings.Contains(h["by"], "@") || h["at"] == "" {
		t.Errorf("the pause's hash: %v", h)
	}
	// status shows both, and who paused forever and why.
	r = s.ctl("status")
	r.mustExit(t, 0)
	for _, want := range []string{"forever  paused forever", "timed    paused ", "forever is paused by ", ": broken disk\n"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("status lacks %q: %s", want, r)
		}
	}

	var workers []*proc
	for range 3 {
		workers = append(workers, s.start("-c", "-q", "--cooldown", "200ms",
			"--idle-wait", "50ms", "sh", "-c", stamp("pz")))
	}
	// waitFor pops runs until item's, failing on a run of forever, or
	// after poll.Timeout: free runs meanwhile, so the pops alone would
	// not end.
	waitFor := func(item string) (r run) {
		t.Helper()
		poll.Repeat(t, poll.Timeout, item+" to run", func() bool {
			r = s.popRun(t)
			if r.item == "forever" && item != "forever" {
				t.Fatalf("forever ran while paused")
			}
			return r.item == item
		})
		return r
	}
	timed := waitFor("timed")
	if early := paused.Add(1500 * time.Millisecond).Sub(timed.at); early > 0 {
		t.Errorf("timed ran %s before its pause ended", early)
	}
	late := timed.at.Sub(paused.Add(1500 * time.Millisecond))
	if late > 3*time.Second {
		t.Errorf("timed ran %s after its pause ended, want within a couple of looks", late)
	}
	t.Logf("pause --for: the item started %s after its pause ended", late)
	// free ran meanwhile, over and over: every worker passed forever by.
	for range 5 {
		waitFor("free")
	}
	resumed := time.Now()
	r = s.ctl("resume", "forever", "timed")
	r.mustExit(t, 0)
	r.wantStdout(t, "resumed \"forever\"\n\"timed\" was not paused\n")
	late = waitFor("forever").at.Sub(resumed)
	if late > 2*time.Second {
		t.Errorf("forever ran %s after resume, want within a second or so", late)
	}
	t.Logf("resume: the item started %s after the command", late)
	drain(t, workers)
}

// TestCtlPauseRunningItem: pausing an item that runs says so, and the run
// goes on to its end.
func TestCtlPauseRunningItem(t *testing.T) {
	t.Parallel()
	s := setup(t, "pr")
	s.items("a")
	w := s.start(append([]string{"-q"}, gated...)...)
	s.popStarted(t)
	holder := s.Client.Get(ctx(t), s.key("lock:a")).Val()
	r := s.ctl("pause", "a")
	r.mustExit(t, 0)
	r.wantStdout(t, "paused \"a\" until resumed; it is running now (holder "+holder+"): it finishes this run\n")
	s.Client.RPush(ctx(t), "gate:a", "0")
	w.wait(t).wantExit(t, 0)
	if got := s.Client.HGet(ctx(t), s.key("state:a"), "last_result").Val(); got != "success" {
		t.Errorf("the paused run ended %q, want success", got)
	}
	// And no worker takes it now.
	s.run("-q", "--no-work-exit-code", "3", "true").wantExit(t, 3)
}

// TestOneWhoForPauseAndCancel: a pause and a cancel given by one person
// record the same who: $USER, else the login name (not "uid 0"), at the
// host.
func TestOneWhoForPauseAndCancel(t *testing.T) {
	t.Parallel()
	s := setup(t, "who")
	s.items("a", "b")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		env  []string
		want string
	}{
		{nil, me.Username + "@" + host},
		{[]string{"USER=ops"}, "ops@" + host},
	} {
		// b runs somewhere, for cancel to ask its holder.
		s.Client.Set(ctx(t), s.key("lock:b"), "elsewhere:1:abc", time.Minute)
		at := []string{"-u", s.URL, "-k", "who"}
		runCtl(t, tt.env, append(at, "pause", "a")...).mustExit(t, 0)
		runCtl(t, tt.env, append(at, "cancel", "b")...).mustExit(t, 0)
		paused := s.Client.HGet(ctx(t), s.key("pause:a"), "by").Val()
		cancelled := s.Client.HGet(ctx(t), s.key("cancel:b"), "by").Val()
		if paused != tt.want || cancelled != tt.want {
			t.Errorf("with %q: pause by %q, cancel by %q, want both %q", tt.env, paused, cancelled, tt.want)
		}
		s.Client.Del(ctx(t), s.key("cancel:b"))
	}
}

// TestCtlChangesAreEvents: pause, run-now and remove given as alice are
// entries of the events stream, after the workers' starts and ends, with
// who gave them, and a pause's reason and length, a number in --json; the
// text lines show who too.
func TestCtlChangesAreEvents(t *testing.T) {
	t.Parallel()
	s := setup(t, "ce")
	s.items("a", "b", "c")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// A run starts the stream, as any fleet that keeps events has one.
	s.run("-q", "true").mustExit(t, 0)
	alice := []string{"USER=alice"}
	at := []string{"-u", s.URL, "-k", "ce"}
	runCtl(t, alice, append(at, "pause", "a", "--for", "1h", "--reason", "disk full")...).mustExit(t, 0)
	runCtl(t, alice, append(at, "run-now", "b")...).mustExit(t, 0)
	runCtl(t, alice, append(at, "remove", "c")...).mustExit(t, 0)

	r := s.ctl("events", "--json")
	r.mustExit(t, 0)
	var changes []map[string]any
	for _, line := range strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n") {
		var event map[string]any
		if err := json.Unmarshal([]byte(line), &event); err != nil {
			t.Fatalf("events --json: %v in %q", err, line)
		}
		if event["type"] != "start" && event["type"] != "finish" {
			delete(event, "id")
			delete(event, "time")
			changes = append(changes, event)
		}
	}
	by := "alice@" + host
	want := []map[string]any{
		{"type": "pause", "item": "a", "by": by, "reason": "disk full", "for_ms": float64(3_600_000)},
		{"type": "run_now", "item": "b", "by": by},
		{"type": "remove", "item": "c", "by": by},
	}
	if fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Errorf("events --json's changes:\n%v\nwant\n%v", changes, want)
	}
	r = s.ctl("events", "--item", "c", "-n", "1")
	if !strings.HasSuffix(r.Stdout, ` remove "c" by=`+by+"\n") {
		t.Errorf("events --item c -n 1: %s", r)
	}
}

// TestCtlRunNow: an item in an hour's cooldown is taken by an idle
// continuous worker within a second of run-now; an item that runs is not
// started twice.
func TestCtlRunNow(t *testing.T) {
	t.Parallel()
	s := setup(t, "rn")
	s.items("cool", "busy")
	s.Client.Set(ctx(t), s.key("cooldown:cool"), "an earlier run", time.Hour)
	// Two slots: busy holds one at its gate, the other is idle and looks.
	child := `if [ "$W8Y_ITEM" = busy ]; then ` + started + `; redis-cli -p "$REDIS_PORT" blpop gate:busy 30 >/dev/null; fi; ` + stamp("rn")
	w := s.start("-c", "-q", "--parallel", "2", "--cooldown", "1h", "sh", "-c", child)
	if got := s.popStarted(t); got != "busy" {
		t.Fatalf("started %q, want busy", got)
	}
	poll.WaitFor(t, "the idle slot's first look", func() bool { return s.looks(t) > 0 })
	holder := s.Client.Get(ctx(t), s.key("lock:busy")).Val()

	asked := time.Now()
	r := s.ctl("run-now", "cool", "busy")
	r.mustExit(t, 0)
	r.wantStdout(t, "\"cool\" is due now: an idle worker takes it within a second (1 worker live)\n\"busy\" is running now (holder "+holder+"): it is not started twice\n")
	ran := s.popRun(t)
	if ran.item != "cool" || ran.cooling {
		t.Fatalf("ran %+v, want cool without its cooldown", ran)
	}
	// A second, plus a little for a loaded machine running the race
	// detector.
	late := ran.at.Sub(asked)
	if late > 1500*time.Millisecond {
		t.Errorf("cool ran %s after run-now, want within a second", late)
	}
	t.Logf("run-now: the item started %s after the command", late)
	// busy's due entry is looked at and found held: wait for two more
	// looks, which would have started it twice.
	looks := s.looks(t)
	poll.WaitFor(t, "two more looks", func() bool { return s.looks(t) >= looks+2 })
	if n := s.Client.LLen(ctx(t), "started").Val(); n != 0 {
		t.Errorf("%d more starts while busy ran: run-now started it twice", n)
	}
	s.Client.RPush(ctx(t), "gate:busy", "go")
	if ran := s.popRun(t); ran.item != "busy" {
		t.Errorf("ran %q, want busy's end", ran.item)
	}
	w.stop(t)
}

// TestCtlEvents: events shows the latest runs' starts and ends, and
// --follow prints a new one within a second, until SIGINT, which ends it
// with 0.
func TestCtlEvents(t *testing.T) {
	t.Parallel()
	s := setup(t, "ev")
	s.items("a", "b")
	at := []string{"-u", s.URL, "-k", "ev"}
	s.run("-q", "true").mustExit(t, 0)
	s.run("-q", "false").mustExit(t, 1)

	r := s.ctl("events")
	r.mustExit(t, 0)
	lines := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], ` start "a" holder=`) ||
		!strings.Contains(lines[3], ` finish "b" holder=`) || !strings.Contains(lines[3], " result=failure exit_code=1 duration_ms=") {
		t.Errorf("events: %s", r)
	}
	r = s.ctl("events", "--item", "a", "-n", "1", "--json")
	r.mustExit(t, 0)
	var event map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &event); err != nil || event["type"] != "finish" || event["item"] != "a" || event["result"] != "success" {
		t.Errorf("events --item a -n 1 --json: %v %s", err, r)
	}
	// Numbers are numbers, as in status --json.
	if _, ok := event["duration_ms"].(float64); !ok || event["exit_code"] != float64(0) {
		t.Errorf("events --json's exit_code and duration_ms are not numbers: %s", r.Stdout)
	}
	r = s.ctl("events", "--item", "a", "-n", "2", "--json")
	if !strings.Contains(r.Stdout, `"fence":`) || strings.Contains(r.Stdout, `"fence":"`) {
		t.Errorf("events --json's fence is not a number: %s", r.Stdout)
	}

	// From the third event on, by its ID; and those of the last hour.
	third := s.Client.XRange(ctx(t), s.key("events"), "-", "+").Val()[2].ID
	r = s.ctl("events", "--since", third)
	r.mustExit(t, 0)
	if got := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n"); !slices.Equal(got, lines[2:]) {
		t.Errorf("events --since %s: %s, want the last two of\n%s", third, r, strings.Join(lines, "\n"))
	}
	r = s.ctl("events", "--since", "1h")
	if r.Code != 0 || strings.Count(r.Stdout, "\n") != 4 {
		t.Errorf("events --since 1h: %s", r)
	}

	f := startCtl(t, nil, append(at, "events", "--follow", "-n", "1")...)
	poll.WaitFor(t, "the latest event", func() bool { return strings.Count(f.stdoutSoFar(), "\n") == 1 })
	// From before the run, so that the time bounds the run and both its
	// events' way to the screen.
	before := time.Now()
	s.run("-q", "true").mustExit(t, 0)
	poll.WaitFor(t, "the new events", func() bool { return strings.Count(f.stdoutSoFar(), "\n") == 3 })
	late := time.Since(before)
	if late > time.Second {
		t.Errorf("the new run's events were printed %s after it started, want within a second", late)
	}
	t.Logf("events --follow: a run's start and end were printed within %s of its start", late)
	if got := f.stdoutSoFar(); !strings.Contains(got, ` start "a"`) || !strings.Contains(got, ` finish "a"`) {
		t.Errorf("followed: %q", got)
	}
	f.signal(t, syscall.SIGINT)
	if r := f.wait(t); r.Code != 0 || r.Stderr != "" {
		t.Errorf("events --follow after SIGINT: %s", r)
	}
}

// TestCtlBadInput: each kind of bad input gets exit 125, one line in the
// user's words, and changes nothing in Redis.
func TestCtlBadInput(t *testing.T) {
	t.Parallel()
	s := setup(t, "bad")
	s.items("a", "b")
	s.Client.HSet(ctx(t), "hash:list", "f", "v")
	secured := startRedis(t, redistest.Password("right-horse-battery"))
	secured.seed(t, s.key("list"), "a")
	at := []string{"-u", s.URL, "-k", "bad"}
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown verb", nil, append(at, "frobnicate", "a"), `unknown verb "frobnicate"`},
		{"no verb", nil, at, "missing verb"},
		{"missing item", nil, append(at, "pause"), "pause needs at least one ITEM"},
		{"item given twice", nil, append(at, "run-now", "a", "b", "a"), `item "a" is given twice`},
		{"--for that does not parse", nil, append(at, "pause", "a", "--for", "a while"), `--for "a while"`},
		{"--for negative", nil, append(at, "pause", "a", "--for=-1h"), "a pause cannot last a negative time"},
		{"option of another verb", nil, append(at, "resume", "a", "--reason", "x"), "--reason goes with pause or cancel, not resume"},
		{"list of another type", nil, []string{"-u", s.URL, "-k", "hash", "remove", "a"}, `"hash:list" holds a hash, not a list`},
		{"item not in the list", nil, append(at, "pause", "a", "zz"), `"zz" is not in the list "bad:list"`},
		{"unreachable Redis", nil, []string{"-u", fmt.Sprintf("redis://127.0.0.1:%d", redistest.FreePort(t)), "-k", "bad", "pause", "a"}, "connect to Redis"},
		{"refused password", []string{"W8Y_REDIS_PASSWORD=wrong"}, []string{"-u", secured.URL, "-k", "bad", "pause", "a"}, "WRONGPASS"},
		{"no password", nil, []string{"-u", secured.URL, "-k", "bad", "pause", "a"}, "NOAUTH"},
		{"status of an item given twice", nil, append(at, "status", "a", "a"), `item "a" is given twice`},
		{"status --watch of items", nil, append(at, "status", "--watch", "a"), "--watch shows the table of every item: give it without ITEMs"},
		{"check on a list of another type", nil, []string{"-u", s.URL, "-k", "hash", "check", "--fix"}, `"hash:list" holds a hash, not a list`},
		{"unknown option", nil, append(at, "check", "--frobnicate"), "--frobnicate: no such option (see w8yctl --help)"},
		{"check given an item", nil, append(at, "check", "a"), "check takes no items"},
		{"--fix with another verb", nil, append(at, "resume", "a", "--fix"), "--fix goes with check, not resume"},
		{"check on an unreachable Redis", nil, []string{"-u", fmt.Sprintf("redis://127.0.0.1:%d", redistest.FreePort(t)), "-k", "bad", "check"}, "connect to Redis"},
		{"bad variable", []string{"W8Y_REDIS_CLUSTER=perhaps"}, append(at, "pause", "a"), `W8Y_REDIS_CLUSTER="perhaps": not true or false`},
		{"status of an item nothing is known of", nil, append(at, "status", "a", "zz"), `"zz" is not in the list "bad:list", and nothing of it is kept (no key, no event)`},
		{"cancel of an item neither listed nor running", nil, append(at, "cancel", "zz"), `"zz" is not in the list "bad:list", and no run holds it (nothing was changed)`},
		{"events of an item nothing is known of", nil, append(at, "events", "--item", "zz"), `"zz" is not in the list "bad:list", and the events stream holds none of its events`},
	}
	before, securedBefore := s.snapshot(t), secured.snapshot(t)
	for _, tt := range tests {
		r := runCtl(t, tt.env, tt.args...)
		r.wantExit(t, 125)
		oneLineOf(t, "w8yctl", r.Stderr, tt.want)
		if r.Stdout != "" || goSpeak.MatchString(r.Stderr) {
			t.Errorf("%s: %s", tt.name, r)
		}
	}
	if after := s.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("bad input changed Redis")
	}
	if after := secured.snapshot(t); !slices.Equal(after, securedBefore) {
		t.Errorf("bad input changed the secured Redis")
	}
}

// TestDocsCtlSession runs docs/operating.md's w8yctl session as it is written, with w8y
// and w8yctl pointed at the test's Redis by W8Y_REDIS_URL, and checks that it
// prints what the page shows, but for the times, holders, durations and
// who.
func TestDocsCtlSession(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	session := doctest.Block(t, "docs/operating.md", "sh", "w8yctl -k work add --create")
	bin := t.TempDir()
	for name, path := range map[string]string{"w8y": binary, "w8yctl": ctlBinary} {
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	r := startCommand(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "W8Y_REDIS_URL=" + s.URL},
		"bash", "-c", "set -e\n"+session).wait(t)
	r.mustExit(t, 0)
	if r.Stderr != "" {
		t.Errorf("the session wrote on stderr: %s", r)
	}
	varying := regexp.MustCompile(`\d{4}-\d\d-\d\dT[\d:.]+Z|holder=[^ \n]+|by=[^ \n]+|duration_ms=\d+`)
	same := func(text string) string {
		return varying.ReplaceAllStringFunc(text, func(m string) string { return m[:3] })
	}
	if got, want := same(r.Stdout), same(doctest.Block(t, "docs/operating.md", "", `added 3 items to "work:list"`)); got != want {
		t.Errorf("the session printed:\n%s\nwant the page's:\n%s", r.Stdout, want)
	}
	if got := s.list(t, "work:list"); !slices.Equal(got, []string{"report:alpha", "report:beta"}) {
		t.Errorf("the list after the session: %q", got)
	}
}

// TestCtlACL runs every verb of w8yctl as the recipes' ACL user for it, and
// its bad input as a user without the rights: it must be refused with one
// line that says so.
func TestCtlACL(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	const password = "Operator-Staple-77"
	rule := strings.Fields(strings.TrimSpace(doctest.Block(t, "docs/recipes.md", "", "ACL SETUSER operator")))
	for i, word := range rule {
		switch {
		case word == ">secret":
			rule[i] = ">" + password
		case word == "~reports:*":
			rule[i] = "~ops:*"
		case word == "+cluster|slots":
			// Not a Cluster.
			rule[i] = "+ping"
		}
	}
	args := make([]any, len(rule))
	for i, word := range rule {
		args[i] = word
	}
	if err := s.Client.Do(ctx(t), args...).Err(); err != nil {
		t.Fatalf("%q: %v", rule, err)
	}
	s.seed(t, "ops:list", "a", "b")
	// A list that a fleet of this version runs: its version, its events.
	s.Client.Set(ctx(t), "ops:schema", 2, 0)
	s.Client.XAdd(ctx(t), &redis.XAddArgs{Stream: "ops:events", Values: []string{"type", "start", "item", "a", "holder", "h"}})
	// b runs somewhere, for cancel to ask its holder: its lock, and its
	// entry among the locks, as a take writes them.
	s.Client.Set(ctx(t), "ops:lock:b", "elsewhere:1:abc", time.Minute)
	s.Client.ZAdd(ctx(t), "ops:locks", redis.Z{Score: float64(s.Client.Time(ctx(t)).Val().Add(time.Minute).UnixMilli()), Member: "b"})
	env := []string{"W8Y_REDIS_URL=redis://operator@127.0.0.1:" + itoa(s.Port), "W8Y_REDIS_PASSWORD=" + password, "W8Y_KEY_PREFIX=ops"}
	for _, verb := range [][]string{
		{"add", "c"}, {"pause", "a", "--for", "1h", "--reason", "r"}, {"status"}, {"resume", "a"}, {"run-now", "b"}, {"remove", "c"},
		{"events", "--item", "a"}, {"events", "--since", "1h"}, {"check"}, {"check", "--fix"}, {"status", "a", "b"}, {"cancel", "--reason", "r", "b"}, {"workers"},
	} {
		r := runCtl(t, env, verb...)
		r.wantExit(t, 0)
		if r.Stderr != "" {
			t.Errorf("as the recipes' ACL user: %s", r)
		}
	}
	if got := s.Client.HGet(ctx(t), "ops:cancel:b", "holder").Val(); got != "elsewhere:1:abc" {
		t.Errorf("the cancel request of b is aimed at %q, want its lock's holder", got)
	}
	// Each change is recorded: the rule allows its XADD, which the script
	// would otherwise leave out without a word.
	var changes []string
	for _, m := range s.Client.XRange(ctx(t), "ops:events", "-", "+").Val() {
		changes = append(changes, fmt.Sprint(m.Values["type"], " ", m.Values["item"]))
	}
	if want := []string{"start a", "add c", "pause a", "resume a", "run_now b", "remove c"}; !slices.Equal(changes, want) {
		t.Errorf("as the recipes' ACL user, the events are %q, want %q", changes, want)
	}
	r := runCtl(t, env, "-k", "other", "pause", "a")
	r.wantExit(t, 125)
	oneLineOf(t, "w8yctl", r.Stderr, "NOPERM")
}

// TestCtlCluster runs w8yctl's verbs on a Cluster, with a hash tag in the
// prefix (one script per command) and without (a command per key, on keys
// spread over the nodes), beside a worker: a paused item is not run until
// it is resumed, the others are, and remove leaves nothing of an item on
// any node.
func TestCtlCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, prefix := range []string{"{ops}:", "ops:"} {
		t.Run(prefix, func(t *testing.T) {
			at := []string{"--redis-cluster", "-u", c.URL, "-k", prefix}
			ctl := func(args ...string) result {
				t.Helper()
				r := runCtl(t, nil, append(at, args...)...)
				r.mustExit(t, 0)
				return r
			}
			ctl("add", "--create", "paused", "busy", "gone")
			ctl("pause", "paused", "--reason", "broken")
			ctl("pause", "gone", "--for", "1h")
			dir := t.TempDir()
			w := startW8y(t, []string{"DIR=" + dir}, append(at, "-c", "-q", "--idle-wait", "50ms", "--cooldown", "50ms",
				"sh", "-c", `echo "$W8Y_ITEM" >> "$DIR/runs"`)...)
			count := func(item string) int {
				return strings.Count(" "+strings.Join(lines(t, dir+"/runs"), " ")+" ", " "+item+" ")
			}
			poll.WaitFor(t, "busy to run thrice", func() bool { return count("busy") >= 3 })
			if n := count("paused") + count("gone"); n > 0 {
				t.Fatalf("paused items ran %d times", n)
			}
			ctl("resume", "paused")
			poll.WaitFor(t, "paused to run once resumed", func() bool { return count("paused") >= 1 })
			ctl("remove", "gone")
			if keys, _ := c.clusterKeys(t, prefix+"*gone"); len(keys) > 0 {
				t.Errorf("keys of a removed item left: %q", keys)
			}
			if got, err := c.Client.LRange(ctx(t), prefix+"list", 0, -1).Result(); err != nil || slices.Contains(got, "gone") || len(got) != 2 {
				t.Errorf("the list after remove: %q (%v)", got, err)
			}
			r := ctl("events", "--item", "paused", "-n", "1")
			if !strings.Contains(r.Stdout, `"paused"`) {
				t.Errorf("events of paused: %s", r)
			}
			// Recorded whichever way the command went, in the stream the
			// workers started.
			r = ctl("events", "--item", "gone", "-n", "1")
			if !strings.Contains(r.Stdout, ` remove "gone" by=`) {
				t.Errorf("events of gone: %s", r)
			}
			r = ctl("status", "busy", "gone")
			if !regexp.MustCompile(`(?m)^"busy": in the list "`+regexp.QuoteMeta(prefix)+`list" once, .*\n(.*\n)*  latest events:\n    .* "busy" `).MatchString(r.Stdout) ||
				!strings.Contains(r.Stdout, `"gone": not in the list`) {
				t.Errorf("status busy gone on the Cluster: %s", r)
			}
			w.stop(t)
		})
	}
}

// TestCtlStatusItems: status ITEM shows, for items that a real worker ran
// and runs, how often the list holds each, the lock's holder, the backoff
// and the pause with its reason, the last run with its fence, the counts,
// the latest events (the pause among them, with who paused) and the kept
// output, bounded and escaped; and an item that the list no longer holds,
// as such, with what is kept of it.
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

	// zz was in the list once: its events are kept.
	s.ctl("add", "zz").mustExit(t, 0)
	s.ctl("remove", "zz").mustExit(t, 0)
	r := s.ctl("status", "a", "b", "zz")
	r.mustExit(t, 0)
	for _, want := range []string{
		`(?m)^"a": in the list "st:list" once, paused$`,
		`(?m)^  lock: free$`,
		`(?m)^  backoff: \d+m[\d.]+s left$`,
		`(?m)^  pause: no expiry, by .+@\S+ at \d{4}-\d\d-\d\dT[\d:.]+Z: disk full$`,
		`(?m)^  last run: result=failure exit_code=3 start=\S+ end=\S+ duration_ms=\d+ holder=\S+ fence=` + fence + `$`,
		`(?m)^  runs=1 failures=1 consecutive_failures=1$`,
		`(?m)^  latest events:\n    \S+ start "a" holder=\S+ fence=` + fence + `\n    \S+ finish "a" .*result=failure.*\n    \S+ pause "a" by=\S+@\S+ reason="disk full"$`,
		`(?m)^  last stdout \(3000 bytes, the last 2048 shown\):\n    \| x+\n    \| the end\n`,
		`(?m)^  last stderr \(13 bytes\):\n    \| \\x1b\[31mred\\x1b\[0m\n`,
		`(?m)^"b": in the list "st:list" once, locked\n  lock: holder=` + regexp.QuoteMeta(holder) + `, \d.*s left$`,
		`(?m)^"zz": not in the list "st:list", idle\n  lock: free\n  cooldown: none\n  backoff: none\n  pause: none\n  last run: never\n  runs=0 failures=0 consecutive_failures=0\n  latest events:\n    \S+ add "zz" by=\S+\n    \S+ remove "zz" by=\S+\n\z`,
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
		d["last_fence"] == nil || d["last_stdout"] != stdout || d["last_stderr"] != "\x1b[31mred\x1b[0m\n" || len(events) != 3 {
		t.Errorf("status --json a: %s", r.Stdout)
	}
	if first, _ := events[0].(map[string]any); first["type"] != "start" || first["item"] != "a" || first["id"] == nil {
		t.Errorf("status --json a's first event: %v", events[0])
	}
	if last, _ := events[len(events)-1].(map[string]any); last["type"] != "pause" || last["by"] != d["paused_by"] || last["reason"] != "disk full" {
		t.Errorf("status --json a's last event: %v, want the pause by %v", last, d["paused_by"])
	}

	c.RPush(ctx(t), "gate:b", "0")
	w.wait(t).wantExit(t, 0)
}

// TestCtlCheck seeds a mess of each kind that check finds beside a running
// worker: check reports each, with the command that repairs it; --fix
// repairs exactly the safe ones and says so, a second check finds only the
// locks and the item that it leaves to an operator, and the running
// worker's lock, and a removed item's lock that expires, are untouched.
func TestCtlCheck(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := s.Client
	s.seed(t, "ck:list", "run")
	w := startW8y(t, portEnv(s), append([]string{"-u", s.URL, "-k", "ck", "-q"}, gated...)...)
	if got := s.popStarted(t); got != "run" {
		t.Fatalf("the worker took %q, want run", got)
	}
	holder := c.Get(ctx(t), "ck:lock:run").Val()
	c.RPush(ctx(t), "ck:list", "a", "b", "a", "c", "a", "")
	c.Set(ctx(t), "ck:lock:b", "lost-holder", 0)
	c.HSet(ctx(t), "ck:lock:c", "f", "v")
	c.HSet(ctx(t), "ck:cooldown:a", "f", "v")
	c.RPush(ctx(t), "ck:backoff:a", "x")
	c.Set(ctx(t), "ck:pause:c", "x", time.Hour)
	c.HSet(ctx(t), "ck:state:old", "runs", 3)
	c.Set(ctx(t), "ck:cooldown:old", "x", time.Hour)
	c.HSet(ctx(t), "ck:pause:old", "reason", "r")
	c.ZAdd(ctx(t), "ck:due", redis.Z{Member: "old"}, redis.Z{Member: "a"})
	// An item removed while it runs: its lock ends by itself.
	c.Set(ctx(t), "ck:lock:old", "removed-run", time.Hour)
	// Keys of another fleet, and w8y's own keys: none is a finding.
	c.Set(ctx(t), "ckx:lock:z", "x", 0)
	c.Set(ctx(t), "ck:fence", "7", 0)

	at := []string{"-u", s.URL, "-k", "ck"}
	// The repairs carry the connection options, so that pasted into a
	// shell they go to this Redis, not to whatever listens on 6379.
	ctl := "w8yctl -u " + s.URL + " -k ck"
	cli := fmt.Sprintf("redis-cli -h 127.0.0.1 -p %d", s.Port)
	want := []string{
		`cannot_run: "" can never run: it is empty, and every worker skips it; to repair: ` + ctl + ` remove -- ''`,
		`duplicate: "a" is in the list 3 times, and runs 3 times as often as the others; to repair: ` + ctl + ` check --fix`,
		`lock_without_expiry: the lock "ck:lock:b", held by "lost-holder", has no expiry: if its holder is gone, no worker will take "b" again; to repair: ` + cli + ` DEL 'ck:lock:b'  # once no run holds it`,
		`orphan_due: the due index holds "old", which the list does not; to repair: ` + ctl + ` check --fix`,
		`orphan_key: "ck:cooldown:old" belongs to "old", which the list does not hold; to repair: ` + ctl + ` check --fix`,
		`orphan_key: "ck:pause:old" belongs to "old", which the list does not hold; to repair: ` + ctl + ` check --fix`,
		`orphan_key: "ck:state:old" belongs to "old", which the list does not hold; to repair: ` + ctl + ` check --fix`,
		`wrong_type: "ck:backoff:a" is a list, not a string (w8y writes a string there), and holds "a" up for good (it has no expiry); to repair: ` + ctl + ` check --fix`,
		`wrong_type: "ck:cooldown:a" is a hash, not a string (w8y writes a string there), and holds "a" up for good (it has no expiry); to repair: ` + ctl + ` check --fix`,
		`wrong_type: the lock "ck:lock:c" is a hash, not a string: no worker can take "c" until it is deleted; to repair: ` + cli + ` DEL 'ck:lock:c'`,
	}
	pauseLine := `wrong_type: "ck:pause:c" is a string, not a hash (w8y writes a hash there), and holds "c" up for `
	before := s.snapshot(t)
	r := runCtl(t, nil, append(at, "check")...)
	r.wantExit(t, 1)
	got := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	if len(got) != len(want)+2 || !strings.HasPrefix(got[len(got)-2], pauseLine) || got[len(got)-1] != `found 11 problems under "ck:"` ||
		!slices.Equal(got[:len(got)-2], want) || r.Stderr != "" {
		t.Errorf("check printed:\n%s\nwant:\n%s\n%s...\nfound 11 problems under \"ck:\"\n(stderr %q)", r.Stdout, strings.Join(want, "\n"), pauseLine, r.Stderr)
	}
	if after := s.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("check without --fix changed Redis")
	}

	r = runCtl(t, nil, append(at, "check", "--json")...)
	r.wantExit(t, 1)
	var findings []struct {
		Kind, Item, Key, Problem string
		Fixed, Remedy            *string
	}
	if err := json.Unmarshal([]byte(r.Stdout), &findings); err != nil || len(findings) != 11 {
		t.Fatalf("check --json: %v\n%s", err, r)
	}
	if f := findings[2]; f.Kind != "lock_without_expiry" || f.Item != "b" || f.Key != "ck:lock:b" || f.Fixed != nil || f.Remedy == nil {
		t.Errorf("check --json's third finding: %+v", f)
	}

	r = runCtl(t, nil, append(at, "check", "--fix")...)
	r.wantExit(t, 1)
	for _, line := range []string{
		`duplicate: "a" is in the list 3 times, and runs 3 times as often as the others: removed 2 extra occurrences, kept the first`,
		`orphan_due: the due index holds "old", which the list does not: removed the entry`,
		`orphan_key: "ck:state:old" belongs to "old", which the list does not hold: deleted it`,
		`wrong_type: "ck:cooldown:a" is a hash, not a string (w8y writes a string there), and holds "a" up for good (it has no expiry): deleted it`,
		`wrong_type: the lock "ck:lock:c" is a hash, not a string: no worker can take "c" until it is deleted; to repair: ` + cli + ` DEL 'ck:lock:c'`,
		`found 11 problems under "ck:", repaired 8`,
	} {
		if !strings.Contains(r.Stdout, line+"\n") {
			t.Errorf("check --fix did not print %q:\n%s", line, r.Stdout)
		}
	}
	if got := s.list(t, "ck:list"); !slices.Equal(got, []string{"run", "a", "b", "c", ""}) {
		t.Errorf("the list after check --fix: %q", got)
	}
	for _, key := range []string{"ck:cooldown:a", "ck:backoff:a", "ck:pause:c", "ck:state:old", "ck:cooldown:old", "ck:pause:old"} {
		if c.Exists(ctx(t), key).Val() != 0 {
			t.Errorf("check --fix left %s", key)
		}
	}
	// The worker's take put "run" there, due when its lock would expire.
	due := c.ZRange(ctx(t), "ck:due", 0, -1).Val()
	slices.Sort(due)
	if !slices.Equal(due, []string{"a", "run"}) {
		t.Errorf("the due index after check --fix: %q", due)
	}
	for key, value := range map[string]string{"ck:lock:run": holder, "ck:lock:old": "removed-run", "ck:lock:b": "lost-holder", "ckx:lock:z": "x", "ck:fence": "7"} {
		if got := c.Get(ctx(t), key).Val(); got != value {
			t.Errorf("%s is %q after check --fix, want %q", key, got, value)
		}
	}
	if ttl := c.PTTL(ctx(t), "ck:lock:run").Val(); ttl <= 0 {
		t.Errorf("the running worker's lock has PTTL %v after check --fix", ttl)
	}
	if c.Type(ctx(t), "ck:lock:c").Val() != "hash" {
		t.Errorf("check --fix touched the lock of another type")
	}

	// What is left is an operator's: the remedies, run, leave none.
	r = runCtl(t, nil, append(at, "check")...)
	r.wantExit(t, 1)
	if n := strings.Count(r.Stdout, "\n"); n != 4 || !strings.Contains(r.Stdout, "cannot_run:") || !strings.Contains(r.Stdout, "lock_without_expiry:") ||
		!strings.Contains(r.Stdout, `wrong_type: the lock "ck:lock:c"`) {
		t.Errorf("the second check:\n%s", r.Stdout)
	}
	// Run as a shell runs them, where W8Y_REDIS_URL is not set. A remedy
	// without this server's port is not run: it would go to port 6379.
	r = runCtl(t, nil, append(at, "check", "--json")...)
	findings = nil
	if err := json.Unmarshal([]byte(r.Stdout), &findings); err != nil || len(findings) != 3 {
		t.Fatalf("check --json: %v\n%s", err, r)
	}
	bin := t.TempDir()
	if err := os.Symlink(ctlBinary, filepath.Join(bin, "w8yctl")); err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		if f.Remedy == nil || !strings.HasPrefix(*f.Remedy, ctl+" ") && !strings.HasPrefix(*f.Remedy, cli+" ") {
			t.Errorf("the repair of %s is not one for this Redis: %v", f.Key, f.Remedy)
			continue
		}
		r := startCommand(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, "bash", "-c", *f.Remedy).wait(t)
		r.mustExit(t, 0)
	}
	r = runCtl(t, nil, append(at, "check")...)
	r.mustExit(t, 0)
	r.wantStdout(t, "found 0 problems under \"ck:\"\n")
	r = runCtl(t, nil, append(at, "check", "--json")...)
	r.mustExit(t, 0)
	r.wantStdout(t, "[]\n")

	c.RPush(ctx(t), "gate:run", "0")
	w.wait(t).wantExit(t, 0)
}

// TestCtlCheckCluster: on a Cluster, with a hash tag in the prefix and
// without (where the keys lie on every node), check finds and --fix
// repairs a duplicate and the keys of an item gone from the list, beside a
// worker whose locks it leaves alone.
func TestCtlCheckCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, prefix := range []string{"{ck}:", "ck:"} {
		t.Run(prefix, func(t *testing.T) {
			at := []string{"--redis-cluster", "-u", c.URL, "-k", prefix}
			items := []string{"a", "b", "c", "d", "e", "f"}
			if err := c.Client.RPush(ctx(t), prefix+"list", "a", "b", "c", "d", "e", "f", "a").Err(); err != nil {
				t.Fatal(err)
			}
			var gone []string
			for i := range 20 {
				key := fmt.Sprintf("%sstate:gone%d", prefix, i)
				c.Client.HSet(ctx(t), key, "runs", 1)
				gone = append(gone, key)
			}
			w := startW8y(t, nil, append(at, "-c", "-q", "--idle-wait", "50ms", "--cooldown", "50ms", "true")...)
			r := runCtl(t, nil, append(at, "check")...)
			r.wantExit(t, 1)
			if n := strings.Count(r.Stdout, "orphan_key:"); n != 20 || !strings.Contains(r.Stdout, `duplicate: "a" is in the list 2 times`) {
				t.Errorf("check on the Cluster:\n%s", r)
			}
			r = runCtl(t, nil, append(at, "check", "--fix")...)
			r.mustExit(t, 0)
			for _, key := range gone {
				if c.Client.Exists(ctx(t), key).Val() != 0 {
					t.Errorf("check --fix left %s", key)
				}
			}
			got, _ := c.Client.LRange(ctx(t), prefix+"list", 0, -1).Result()
			slices.Sort(got)
			if !slices.Equal(got, items) {
				t.Errorf("the list after check --fix: %q", got)
			}
			r = runCtl(t, nil, append(at, "check")...)
			r.mustExit(t, 0)
			poll.WaitFor(t, "the worker to run every item", func() bool {
				for _, item := range items {
					if c.Client.Exists(ctx(t), prefix+"state:"+item).Val() == 0 {
						return false
					}
				}
				return true
			})
			w.stop(t)
		})
	}
}

// TestDocsCtlCheck runs docs/operating.md's check session, a command at a
// time, on the mess that the page describes, and checks that it prints what
// the page shows and ends each command as the page says: 1, 0, 0.
func TestDocsCtlCheck(t *testing.T) {
	t.Parallel()
	s := setup(t, "work")
	s.items("report:alpha", "report:beta", "report:alpha")
	s.Client.HSet(ctx(t), s.key("state:report:old"), "runs", 3)
	s.Client.HSet(ctx(t), s.key("cooldown:report:beta"), "by", "hand")
	session := doctest.Block(t, "docs/operating.md", "sh", "w8yctl -k work check --fix")
	bin := t.TempDir()
	if err := os.Symlink(ctlBinary, filepath.Join(bin, "w8yctl")); err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	var codes []int
	for _, line := range strings.Split(strings.TrimSpace(session), "\n") {
		r := startCommand(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "W8Y_REDIS_URL=" + s.URL}, "bash", "-c", line).wait(t)
		if r.Stderr != "" {
			t.Errorf("%q wrote on stderr: %s", line, r)
		}
		stdout.WriteString(r.Stdout)
		codes = append(codes, r.Code)
	}
	// The page's server, where the repairs go.
	printed := strings.ReplaceAll(stdout.String(), "-u "+s.URL+" ", "-u redis://redis.internal:6379 ")
	if want := doctest.Block(t, "docs/operating.md", "", `found 3 problems under "work:"`); printed != want {
		t.Errorf("the session printed:\n%s\nwant the page's:\n%s", stdout.String(), want)
	}
	if !slices.Equal(codes, []int{1, 0, 0}) {
		t.Errorf("the session's exit codes: %v, want [1 0 0]", codes)
	}
}

// TestCtlCheckNotDue: check names the items that nothing will run before
// the fleet's next sweep (in the list, tried by the fleet, held by
// nothing, absent from the due index), and --fix makes them due; an item
// that a cooldown holds, one with an entry, and those that the fleet has
// yet to try (appended, or a list no worker has seen) are not findings.
func TestCtlCheckNotDue(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := s.Client
	at := []string{"-u", s.URL, "-k", "nd"}
	s.seed(t, "nd:list", "a", "b", "c", "d")
	// No worker has seen the list: every item is to be tried.
	runCtl(t, nil, append(at, "check")...).mustExit(t, 0)

	// What a fleet of this version left: its marks, and its version.
	c.Set(ctx(t), "nd:seen", 4, 0)
	c.Set(ctx(t), "nd:untried", 0, 0)
	c.Set(ctx(t), "nd:schema", 2, 0)
	c.ZAdd(ctx(t), "nd:due", redis.Z{Member: "a", Score: 1}, redis.Z{Member: "b", Score: float64(time.Now().Add(time.Hour).UnixMilli())})
	c.Set(ctx(t), "nd:cooldown:c", "hand", time.Hour)
	c.RPush(ctx(t), "nd:list", "appended")
	r := runCtl(t, nil, append(at, "check")...)
	r.wantExit(t, 1)
	// b's entry is in the future with nothing to hold it, and c's cooldown,
	// set by hand, has no entry: the summary that does not read the list
	// would count b as cooling and c as idle.
	fix := "; to repair: w8yctl -u " + s.URL + " -k nd check --fix\n"
	r.wantStdout(t, `counts_drift: the summaries count "b" otherwise than its keys say (a key set or deleted by hand)`+fix+
		`counts_drift: the summaries count "c" otherwise than its keys say (a key set or deleted by hand)`+fix+
		`not_due: "d" is in the list and nothing holds it, but the due index has no entry for it: no take finds it before the fleet's next sweep`+fix+
		`found 3 problems under "nd:"`+"\n")
	r = runCtl(t, nil, append(at, "check", "--fix")...)
	r.wantExit(t, 0)
	if !strings.Contains(r.Stdout, `not_due: "d" is in the list and nothing holds it, but the due index has no entry for it: no take finds it before the fleet's next sweep: made it due now`) {
		t.Errorf("check --fix:\n%s", r)
	}
	if score, err := c.ZScore(ctx(t), "nd:due", "d").Result(); err != nil || score != 0 {
		t.Errorf("d's entry after check --fix: %v (%v), want 0 (now)", score, err)
	}
	runCtl(t, nil, append(at, "check")...).mustExit(t, 0)
}
