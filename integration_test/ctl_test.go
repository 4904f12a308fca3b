package integration_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	s := withList(t, "ad", "a", "b")

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
// item's cooldown, backoff, pause, state and settings; a running item is left to
// finish, and its run ends as it would have.
func TestCtlRemove(t *testing.T) {
	s := withList(t, "rm", "a", "b", "a", "c")
	for _, key := range []string{"cooldown:a", "backoff:a", "pause:a"} {
		s.Client.Set(ctx(t), s.key(key), "x", time.Hour)
	}
	s.Client.HSet(ctx(t), s.key("state:a"), "runs", 4)
	s.Client.HSet(ctx(t), s.key("settings:a"), "timeout", "1h0m0s")
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
	r.wantStdout(t, `removed "a" (2 occurrences) and its cooldown, backoff, pause, state and settings`+"\n"+
		`removed "b" (1 occurrence) and its cooldown, backoff, pause, state and settings; it is running now (holder `+holder+"): its run is left to finish\n")
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
	s := withList(t, "pz", "forever", "timed", "free")
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
	s := withList(t, "pr", "a")
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

// TestCtlRunNow: an item in an hour's cooldown is taken by an idle
// continuous worker within a second of run-now; an item that runs is not
// started twice.
func TestCtlRunNow(t *testing.T) {
	s := withList(t, "rn", "cool", "busy")
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

// TestDocsCtlSession runs docs/operating.md's w8yctl session as it is written, with w8y
// and w8yctl pointed at the test's Redis by W8Y_REDIS_URL, and checks that it
// prints what the page shows, but for the times, holders, durations and
// who.
func TestDocsCtlSession(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	pageSession(t, s.URL, "docs/operating.md", "w8yctl -k work add --create", `added 3 items to "work:list"`)
	if got := s.list(t, "work:list"); !slices.Equal(got, []string{"report:alpha", "report:beta"}) {
		t.Errorf("the list after the session: %q", got)
	}
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
		`(?m)^"zz": not in the list "st:list", idle\n  lock: free\n  cooldown: none\n  backoff: none\n  pause: none\n  settings: none \(the workers. own options stand\)\n  last run: never\n  runs=0 failures=0 consecutive_failures=0\n  latest events:\n    \S+ add "zz" by=\S+\n    \S+ remove "zz" by=\S+\n\z`,
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
