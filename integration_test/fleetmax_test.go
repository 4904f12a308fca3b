package integration_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
)

// capChild records each run's start and end in $DIR/log, each with the
// clock's nanoseconds, the shell's pid and the run's holder token (whose
// middle field is its w8y's pid), around 0.4s of work.
const capChild = `echo "start $(date +%s%N) $$ $W8Y_HOLDER" >> "$DIR/log"; sleep 0.4; ` +
	`echo "end $(date +%s%N) $$ $W8Y_HOLDER" >> "$DIR/log"`

// span is one child's run as it recorded it: from start to end, in Unix
// nanoseconds; end is 0 while it has not recorded one.
type span struct {
	start, end int64
	holder     string
}

// spans reads capChild's log in dir, by the shell's pid.
func spans(t *testing.T, dir string) map[int]*span {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[int]*span{}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue // a line being written
		}
		at, err1 := strconv.ParseInt(f[1], 10, 64)
		pid, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("log line %q", line)
		}
		if out[pid] == nil {
			out[pid] = &span{holder: f[3]}
		}
		if f[0] == "start" {
			out[pid].start = at
		} else {
			out[pid].end = at
		}
	}
	return out
}

// mostAtOnce is the most spans that ran at one instant between from and
// to (Unix nanoseconds), a span without an end counting as running still.
func mostAtOnce(all map[int]*span, from, to int64) int {
	instants := []int64{from}
	for _, s := range all {
		if s.start > from && s.start <= to {
			instants = append(instants, s.start)
		}
	}
	most := 0
	for _, x := range instants {
		n := 0
		for _, s := range all {
			if s.start != 0 && s.start <= x && (s.end == 0 || x < s.end) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// holderPID is the pid of the w8y whose lock token is holder
// (host:pid:random).
func holderPID(holder string) int {
	f := strings.Split(holder, ":")
	if len(f) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(f[len(f)-2])
	return pid
}

// TestFleetMaxRunning: four workers with --parallel 3 and
// --fleet-max-running 2 never run more than two children at once, as the
// children themselves record it, including when one worker is SIGKILLed
// mid-run: its place stays in use until its lock expires, never less, and
// is taken again once it has. w8yctl status shows the places in use.
func TestFleetMaxRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, "cap")
	dir := t.TempDir()
	b.setenv("DIR=" + dir)
	b.items("a", "b", "c", "d", "e", "f", "g", "h")
	const ttl = 3 * time.Second
	workers := map[int]*proc{}
	for range 4 {
		p := b.start("-c", "--parallel", "3", "--fleet-max-running", "2", "-x", ttl.String(), "--idle-wait", "100ms", "--drain-timeout", "20s", "--", "sh", "-c", capChild)
		workers[p.cmd.Process.Pid] = p
	}
	poll.WaitFor(t, "ten runs", func() bool { return len(spans(t, dir)) >= 10 })

	// Kill a worker that holds a place: the holder of a lock among the
	// places, whose lock it still holds once it is dead.
	var token string
	// A worker whose run ended just before it was killed holds no place,
	// and another is killed; locks left are those of the killed.
	killedPIDs := map[int]bool{}
	poll.WaitFor(t, "a worker killed while it holds a place", func() bool {
		for _, key := range b.Client.SMembers(ctx(t), b.key("running")).Val() {
			holder, err := b.Client.Get(ctx(t), key).Result()
			p := workers[holderPID(holder)]
			// Two workers at least must live on, to fill both places again.
			if err != nil || p == nil || len(workers) <= 2 {
				continue
			}
			p.kill()
			delete(workers, p.cmd.Process.Pid)
			killedPIDs[p.cmd.Process.Pid] = true
			if b.Client.Get(ctx(t), key).Val() == holder {
				token = holder
				return true
			}
		}
		return false
	})
	killed := time.Now().UnixNano()
	// Its places: the locks it still holds, one per child it ran.
	var locks []string
	for _, key := range b.Client.SMembers(ctx(t), b.key("running")).Val() {
		if b.Client.Get(ctx(t), key).Val() == token {
			locks = append(locks, key)
		}
	}
	// The killed workers' children, which their guards kill with them:
	// gone, and so done writing to the log, once no process carries their
	// holder token (the registry of live workers names each worker's).
	holders := map[int]string{}
	for _, key := range b.keys(t, b.key("worker:*")) {
		holder := strings.TrimPrefix(key, b.key("worker:"))
		holders[holderPID(holder)] = holder
	}
	for pid := range killedPIDs {
		if holders[pid] == "" {
			t.Fatalf("killed worker %d is not in the registry", pid)
		}
		if left := waitMarkerGone("W8Y_HOLDER="+holders[pid], poll.Timeout); len(left) > 0 {
			t.Fatalf("processes %v outlived killed worker %d", left, pid)
		}
	}
	childrenGone := time.Now().UnixNano()
	var children []int
	ours := 0
	for pid, s := range spans(t, dir) {
		if killedPIDs[holderPID(s.holder)] && s.end == 0 {
			children = append(children, pid)
			if s.holder == token {
				ours++
			}
		}
	}
	if ours != len(locks) || len(locks) == 0 {
		t.Fatalf("the killed worker ran %d children without an end in the log, and holds %d locks (%q)", ours, len(locks), locks)
	}

	// The dead worker's places are in use while its locks live.
	var doc struct {
		FleetMax *struct {
			InUse int64 `json:"in_use"`
			Limit int64 `json:"limit"`
		} `json:"fleet_max_running"`
	}
	r := b.ctl("status", "--json")
	r.mustExit(t, 0)
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil || doc.FleetMax == nil || doc.FleetMax.Limit != 2 || doc.FleetMax.InUse < int64(len(locks)) {
		t.Errorf("status --json while the dead worker's %d locks live: %+v (%v)\n%s", len(locks), doc.FleetMax, err, r.Stdout)
	}

	// When does its first lock expire? Its last TTL, read just before it
	// went.
	expires := int64(0)
	poll.WaitFor(t, "the dead worker's first lock to expire", func() bool {
		for _, lock := range locks {
			now := time.Now()
			left, err := b.Client.PTTL(ctx(t), lock).Result()
			if err != nil || left < 0 {
				return true
			}
			if at := now.Add(left).UnixNano(); expires == 0 || at < expires {
				expires = at
			}
		}
		return false
	})
	if expires-killed > int64(ttl) {
		t.Fatalf("the lock expired %s after the kill, more than its TTL", time.Duration(expires-killed))
	}
	// The places are taken again once they are free. The killed workers'
	// children wrote no end: they ended when they were found gone, and
	// must not count as running (with two workers killed, they alone would
	// make three at once).
	poll.WaitFor(t, "two children at once after the expiry", func() bool {
		now := spans(t, dir)
		for _, pid := range children {
			now[pid].end = childrenGone
		}
		return mostAtOnce(now, expires, time.Now().UnixNano()) >= 2
	})
	others := slices.Collect(func(yield func(*proc) bool) {
		for _, p := range workers {
			if !yield(p) {
				return
			}
		}
	})
	drain(t, others)

	all := spans(t, dir)
	for _, pid := range children {
		all[pid].end = childrenGone
	}
	for pid, s := range all {
		if s.end == 0 {
			t.Errorf("run %d (%s) recorded no end", pid, s.holder)
		}
	}
	if n := mostAtOnce(all, 0, time.Now().UnixNano()); n > 2 {
		t.Errorf("%d children ran at once, want at most 2 (--fleet-max-running 2)", n)
	}
	// 50ms for the read of the TTL, which runs late rather than early.
	if n := mostAtOnce(all, childrenGone, expires-int64(50*time.Millisecond)); n > 2-len(locks) {
		t.Errorf("%d children ran at once while the dead worker's %d locks lived, want at most %d: a place was freed early", n, len(locks), 2-len(locks))
	}
	t.Logf("%d runs; the killed worker held %d places, the first for %s after the kill", len(all), len(locks), time.Duration(expires-killed))
	for _, key := range b.keys(t, b.key("lock:*")) {
		if holder := b.Client.Get(ctx(t), key).Val(); !killedPIDs[holderPID(holder)] {
			t.Errorf("%s is held by %s, which drained", key, holder)
		}
	}
	poll.WaitFor(t, "the killed workers' locks to expire", func() bool { return len(b.keys(t, b.key("lock:*"))) == 0 })
	if status := b.ctl("status"); !strings.Contains(status.Stdout, "0 of 2 in use (--fleet-max-running)") {
		t.Errorf("status after the drain: %s", status)
	}
}

// TestFleetMaxRunningExample runs the scheduling page's example as three
// hosts would, each its own w8y with the page's line: the children, as
// they record themselves, run two at once at most and at least once, and
// the page's status line shows the places in use.
func TestFleetMaxRunningExample(t *testing.T) {
	b := withList(t, "work", "a", "b", "c", "d", "e", "f")
	dir, hosts, statusLine := pageFleet(t, b, "--fleet-max-running", "export.sh", capChild)
	poll.WaitFor(t, "two exports at once", func() bool { return mostAtOnce(spans(t, dir), 0, time.Now().UnixNano()) == 2 })
	// The three hosts registered as live workers (each does as it starts,
	// which a loaded machine may not have got to yet).
	poll.WaitFor(t, "three live workers", func() bool {
		return b.Client.ZCard(ctx(t), b.key("workers")).Val() == 3
	})
	r := runCtl(t, nil, append([]string{"-u", b.URL}, statusLine...)...)
	r.mustExit(t, 0)
	if !regexp.MustCompile(`live workers 3  [0-2] of 2 in use \(--fleet-max-running\)`).MatchString(r.Stdout) {
		t.Errorf("the page's status line shows no places in use:\n%s", r.Stdout)
	}
	drain(t, hosts)
	if n := mostAtOnce(spans(t, dir), 0, time.Now().UnixNano()); n != 2 {
		t.Errorf("%d exports ran at once, want 2 (--fleet-max-running 2)", n)
	}
}

// TestFleetMaxRunningItem: w8y --item under --fleet-max-running waits for a
// place as for its lock: with --wait 0, exit 121 and one line; with a
// --wait, it runs once the fleet's run ends and frees the place.
func TestFleetMaxRunningItem(t *testing.T) {
	t.Parallel()
	b := setup(t, "capitem")
	dir := t.TempDir()
	b.setenv("DIR=" + dir)
	b.items("a")
	worker := b.start("-c", "--fleet-max-running", "1", "--cooldown", "1h", "--", "sh", "-c",
		`: >"$DIR/$W8Y_ITEM"; until [ -e "$DIR/go" ]; do sleep 0.05; done`)
	poll.WaitFor(t, "the fleet's run of a", func() bool {
		_, err := os.Stat(filepath.Join(dir, "a"))
		return err == nil
	})
	r := b.run("--item", "x", "--fleet-max-running", "1", "--", "sh", "-c", `: >"$DIR/$W8Y_ITEM"`)
	r.wantExit(t, 121)
	oneLine(t, r.Stderr, `w8y: item "x": every place of --fleet-max-running is in use (--wait 0: not waiting for it)`)
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("--item ran without a place")
	}
	waiting := b.start("--item", "x", "--fleet-max-running", "1", "--wait", "60s", "--", "sh", "-c", `: >"$DIR/$W8Y_ITEM"`)
	poll.WaitFor(t, "--item to wait for a place", func() bool {
		return strings.Contains(waiting.stderrSoFar(), "every place of --fleet-max-running is in use: waiting for it (--wait)")
	})
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waiting.wait(t).wantExit(t, 0)
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Errorf("--item with --wait did not run once the place was free: %v", err)
	}
	worker.stop(t)
}
