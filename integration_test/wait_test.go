package integration_test

import (
	"bufio"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// TestOneShotIsOneConnectionAndTwoCalls: a one-shot run over a list that
// the fleet has tried sends Redis, through one connection, its handshake
// and two script calls: the take (which also checks the server and the
// layout's version) and the finish. MONITOR sees every command a client
// sends; a second connection (a registry beat, a check of its own) or a
// third call fails the test.
func TestOneShotIsOneConnectionAndTwoCalls(t *testing.T) {
	b := withList(t, "lean", "a", "b")
	// The first runs over the list try its untried head (a pass, as a
	// one-shot run always made), which later runs do not.
	for range 2 {
		b.run("true").wantExit(t, 0)
	}
	if got := b.Client.Get(ctx(t), b.key("untried")).Val(); got != "0" {
		t.Fatalf("after two runs over two items, %q are untried, want 0", got)
	}

	// MONITOR, as an operator would watch it.
	lines, c := monitor(t, b.Port)
	b.run("true").wantExit(t, 0)
	b.Client.Echo(ctx(t), "monitor-off")
	byConn := map[string][]string{}
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("MONITOR ended before the test's ECHO")
			}
			if strings.Contains(l, "monitor-off") {
				done = true
				continue
			}
			// 1795920422.909531 [0 127.0.0.1:43258] "hello" "3"
			f := strings.Fields(l)
			if len(f) < 4 || f[2] == "lua]" || strings.Contains(l, "monitor-on") {
				continue
			}
			byConn[f[2]] = append(byConn[f[2]], strings.Trim(strings.ToLower(f[3]), `"`))
		case <-c.Done():
			t.Fatal("MONITOR did not show the test's ECHO")
		}
	}
	if len(byConn) != 1 {
		t.Fatalf("the one-shot run opened %d connections, want 1: %v", len(byConn), byConn)
	}
	for conn, cmds := range byConn {
		if got := strings.Join(cmds, " "); got != "hello evalsha evalsha" {
			t.Errorf("the one-shot run sent %q through %s, want its handshake, its take and its finish", got, conn)
		}
	}
}

// monitor runs redis-cli MONITOR against the server on port until the
// test's end, and returns its lines, once MONITOR has said OK, and the
// context that bounds it.
func monitor(t *testing.T, port int) (<-chan string, context.Context) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	mon := exec.CommandContext(c, "redis-cli", "-p", strconv.Itoa(port), "MONITOR")
	out, err := mon.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := mon.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	lines := make(chan string, 10000)
	go func() {
		defer close(lines)
		scan := bufio.NewScanner(out)
		for scan.Scan() {
			lines <- scan.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = mon.Wait()
	})
	if l := <-lines; l != "OK" {
		t.Fatalf("MONITOR said %q", l)
	}
	return lines, c
}

// blocked is the count of clients that wait in BLPOP (idle workers waiting
// for a wake) and have done so for at least a second, as CLIENT LIST shows
// them.
func blocked(t *testing.T, s *server) (waiting, forLong int) {
	t.Helper()
	list, err := s.Client.ClientList(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " cmd=blpop ") {
			continue
		}
		waiting++
		for _, f := range strings.Fields(line) {
			if idle, ok := strings.CutPrefix(f, "idle="); ok && idle != "0" {
				forLong++
			}
		}
	}
	return waiting, forLong
}

// TestIdleWorkersWakeForWhatW8yWrites: idle workers do not poll: they wait
// in BLPOP (their fallback's look, --idle-wait, is an hour away), and each
// way that w8y makes an item takeable wakes one of them at once, which
// takes it: w8yctl run-now, add and resume, another worker's finish that
// leaves its item due, and a cooldown's end, which the worker's wait ends
// at. One run-now wakes one worker, not the fleet: the others go on
// waiting, never woken.
func TestIdleWorkersWakeForWhatW8yWrites(t *testing.T) {
	items := redistest.Items(10)
	b := withList(t, "wake", items...)
	b.coolAll(t, b.prefix, items, time.Hour)
	// No sweep of the fleet's comes in the test, whose step would end
	// every worker's wait: only a wake can.
	b.Client.Set(ctx(t), b.key("sweep"), "test", time.Hour)
	const workers = 3
	for range workers {
		p := b.start("--continuous", "--idle-wait", "1h", "--cooldown", "1h", "sh", "-c", started)
		t.Cleanup(func() { p.stop(t) })
	}
	// Each waits once its first pass and its probe are over, and a second
	// later has not been woken.
	poll.WaitFor(t, "every worker to wait for a wake for a second", func() bool {
		_, forLong := blocked(t, b.server)
		return forLong == workers
	})

	b.ctl("run-now", "i1").wantExit(t, 0)
	if got := b.popStarted(t); got != "i1" {
		t.Fatalf("after run-now i1, %q started", got)
	}
	if waiting, forLong := blocked(t, b.server); forLong < workers-1 {
		t.Errorf("one run-now woke more than one worker: %d of %d still waited (%d waiting)", forLong, workers, waiting)
	}

	b.ctl("add", "new").wantExit(t, 0)
	if got := b.popStarted(t); got != "new" {
		t.Fatalf("after add new, %q started", got)
	}

	b.ctl("pause", "i2").wantExit(t, 0)
	b.Client.Del(ctx(t), b.key("cooldown:i2"))
	b.ctl("resume", "i2").wantExit(t, 0)
	if got := b.popStarted(t); got != "i2" {
		t.Fatalf("after resume i2, %q started", got)
	}

	// Another worker runs i3 by name, without a cooldown: its finish leaves
	// i3 due now, and wakes a waiting worker.
	b.Client.Del(ctx(t), b.key("cooldown:i3"))
	b.run("--item", "i3", "true").wantExit(t, 0)
	if got := b.popStarted(t); got != "i3" {
		t.Fatalf("after another worker's finish of i3, %q started", got)
	}
}

// TestIdleWorkerWakesAtACooldownsEnd: a worker alone, whose fallback's look
// is an hour away, runs its item again when the item's cooldown ends: its
// wait ends when the due index says the item comes due.
func TestIdleWorkerWakesAtACooldownsEnd(t *testing.T) {
	b := withList(t, "cooled", "only")
	p := b.start("--continuous", "--idle-wait", "1h", "--cooldown", "1500ms", "sh", "-c", started)
	t.Cleanup(func() { p.stop(t) })
	if got := b.popStarted(t); got != "only" {
		t.Fatalf("%q started, want only", got)
	}
	first := time.Now()
	poll.WaitFor(t, "the worker to wait for a wake", func() bool {
		waiting, _ := blocked(t, b.server)
		return waiting == 1
	})
	if got := b.popStarted(t); got != "only" {
		t.Fatalf("%q started, want only again", got)
	}
	if since := time.Since(first); since < 1400*time.Millisecond {
		t.Errorf("the item ran again %s after its start, within its cooldown", since)
	}
}

// TestIdleWorkerTakesAnOutsideRPUSHAtItsFallback: an item that another
// program appends with RPUSH wakes no worker, and the fallback's look, every
// --idle-wait, finds it.
func TestIdleWorkerTakesAnOutsideRPUSHAtItsFallback(t *testing.T) {
	items := redistest.Items(3)
	b := withList(t, "outside", items...)
	b.coolAll(t, b.prefix, items, time.Hour)
	p := b.start("--continuous", "--idle-wait", "200ms", "--cooldown", "1h", "sh", "-c", started)
	t.Cleanup(func() { p.stop(t) })
	poll.WaitFor(t, "the worker to wait for a wake", func() bool {
		waiting, _ := blocked(t, b.server)
		return waiting == 1
	})
	b.Client.RPush(ctx(t), b.key("list"), "pushed")
	if got := b.popStarted(t); got != "pushed" {
		t.Fatalf("after an outside RPUSH, %q started", got)
	}
	if n := b.Client.LLen(ctx(t), b.key("wake")).Val(); n != 0 {
		t.Errorf("the wake list holds %d tokens after an outside RPUSH, want none: nothing of w8y's wrote one", n)
	}
}

// TestAFreedPlaceWakesAWaitingWorker: a worker that waits for a place of
// --fleet-max-running (its fallback's look an hour away) is woken by the
// finish that frees one, and takes its item.
func TestAFreedPlaceWakesAWaitingWorker(t *testing.T) {
	b := withList(t, "place", "a", "b")
	b.Client.Set(ctx(t), b.key("sweep"), "test", time.Hour)
	// A run of a, by name, holds the one place until the test opens its gate:
	// its child waits in BRPOP, not BLPOP, so that blocked counts only the
	// worker's wait (the child's BLPOP made it see two waits, or one before
	// the worker's began).
	holder := b.start("--item", "a", "--fleet-max-running", "1", "--cooldown", "1h", "sh", "-c", started+`; redis-cli -p "$REDIS_PORT" brpop gate 30 >/dev/null`)
	if got := b.popStarted(t); got != "a" {
		t.Fatalf("%q started, want a", got)
	}
	p := b.start("--continuous", "--idle-wait", "1h", "--fleet-max-running", "1", "--cooldown", "1h", "sh", "-c", started)
	t.Cleanup(func() { p.stop(t) })
	poll.WaitFor(t, "the worker to wait for a place", func() bool {
		waiting, _ := blocked(t, b.server)
		return waiting == 1
	})
	b.Client.RPush(ctx(t), "gate", "go")
	holder.wait(t).wantExit(t, 0)
	if got := b.popStarted(t); got != "b" {
		t.Fatalf("after the place was freed, %q started, want b", got)
	}
}

// TestIdleWorkerWakesAtAPausesEnd: a worker alone, whose fallback's look is
// an hour away, takes an item paused with --for when the pause ends: the
// pause's end is in the due index, which its wait ends at.
func TestIdleWorkerWakesAtAPausesEnd(t *testing.T) {
	b := withList(t, "paused", "p")
	b.Client.Set(ctx(t), b.key("sweep"), "test", time.Hour)
	paused := time.Now()
	b.ctl("pause", "p", "--for", "1500ms").mustExit(t, 0)
	p := b.start("--continuous", "--idle-wait", "1h", "--cooldown", "1h", "sh", "-c", started)
	t.Cleanup(func() { p.stop(t) })
	if got := b.popStarted(t); got != "p" {
		t.Fatalf("%q started, want p", got)
	}
	if since := time.Since(paused); since < 1500*time.Millisecond {
		t.Errorf("p started %s after its pause of 1.5s began", since)
	}
}

// TestIdleWorkerHoldsTwoConnections: an idle worker holds two connections
// to Redis, its wait for a wake and its registry's beat, however many its
// start opened beside its first beat; a fleet's every connection is one
// that Redis tends each second.
func TestIdleWorkerHoldsTwoConnections(t *testing.T) {
	items := redistest.Items(3)
	b := withList(t, "conns", items...)
	b.coolAll(t, b.prefix, items, time.Hour)
	ours := clientIDs(t, b.server)
	before := redistest.CommandStats(t, b.Client)["blpop"]
	p := b.start("--continuous", "--idle-wait", "200ms", "--cooldown", "1h", "true")
	t.Cleanup(func() { p.stop(t) })
	// Its first beat, and three waits (a wait ended, a probe, a wait
	// again): every connection that the worker has used has been handed
	// back to its pool since.
	poll.WaitFor(t, "the worker's beat and its third wait", func() bool {
		return b.Client.Exists(ctx(t), b.key("workers")).Val() == 1 && redistest.CommandStats(t, b.Client)["blpop"]-before >= 3
	})
	for range 3 {
		// The worker's connections: those that the test's own client did
		// not hold before it started.
		var its []string
		for id, line := range clientIDs(t, b.server) {
			if _, mine := ours[id]; !mine {
				its = append(its, line)
			}
		}
		if len(its) > 2 {
			t.Fatalf("an idle worker holds %d connections, want 2 (its wait, its beat):\n%s", len(its), strings.Join(its, "\n"))
		}
		blpops := redistest.CommandStats(t, b.Client)["blpop"]
		poll.WaitFor(t, "another fallback", func() bool { return redistest.CommandStats(t, b.Client)["blpop"] > blpops })
	}
}

// clientIDs is the connections that CLIENT LIST shows, by id, with their
// lines, but for the one that asks.
func clientIDs(t *testing.T, s *server) map[string]string {
	t.Helper()
	list, err := s.Client.ClientList(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for line := range strings.Lines(list) {
		if strings.Contains(line, " cmd=client|list ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				ids[id] = strings.TrimSpace(line)
			}
		}
	}
	return ids
}

// TestAnIdleWaitAndItsProbeAreOneRead: an idle worker's probe goes with its
// wait (take.Taker.ProbeCmd, wake.Waiter.Wait), so that Redis reads both
// in one read, and an idle Redis wakes once a fallback, not twice. Over a
// window of the worker's fallbacks, the server's reads
// (total_reads_processed) fall short of the calls it served from clients
// (BLPOP, the scripts, the test's own INFO) by about one a wait; sent
// apart, they would be as many.
func TestAnIdleWaitAndItsProbeAreOneRead(t *testing.T) {
	items := redistest.Items(3)
	b := withList(t, "oneread", items...)
	b.coolAll(t, b.prefix, items, time.Hour)
	blpops := func() int { return redistest.CommandStats(t, b.Client)["blpop"] }
	before := blpops()
	p := b.start("--continuous", "--idle-wait", "200ms", "--cooldown", "1h", "true")
	t.Cleanup(func() { p.stop(t) })
	poll.WaitFor(t, "the worker's beat and its third wait", func() bool {
		return b.Client.Exists(ctx(t), b.key("workers")).Val() == 1 && blpops()-before >= 3
	})

	// calls is what clients sent: the calls that are not a script's own
	// (INFO commandstats counts those too, by their names), and reads the
	// server's reads; each INFO of the test is one of each.
	calls := func() (calls, waits int) {
		stats := redistest.CommandStats(t, b.Client)
		for _, name := range []string{"blpop", "evalsha", "eval", "evalsha_ro", "eval_ro", "info", "ping", "hello", "client|list"} {
			calls += stats[name]
		}
		return calls, stats["blpop"]
	}
	reads := func() int {
		n, err := strconv.Atoi(redistest.Info(t, b.Client, "stats")["total_reads_processed"])
		if err != nil {
			t.Fatalf("INFO stats total_reads_processed: %v", err)
		}
		return n
	}
	calls0, waits0 := calls()
	reads0 := reads()
	poll.WaitFor(t, "six more waits", func() bool { _, w := calls(); return w-waits0 >= 6 })
	reads1 := reads()
	calls1, waits1 := calls()
	// The two INFOs that took calls0 and reads0 are in calls1, and not in
	// the reads after reads0.
	waits, sent, read := waits1-waits0, calls1-calls0-2, reads1-reads0
	if sent-read < waits-2 {
		t.Errorf("over %d waits, Redis read %d times for %d calls: want at most about one read a wait and its probe (%d fewer reads than calls)",
			waits, read, sent, waits-2)
	}
}

// TestAnIdleWorkersBeatRidesItsWait: the registry's beat that comes due
// while an idle worker waits goes with the wait (registry.Presence.BeatCmd)
// and runs as it ends: MONITOR shows the beat (beat.lua, the one call with
// the registry's three keys) right after the probe that ended a BLPOP, on
// the same connection, not as a call of its own; and the worker's entry
// lives on, its expiry pushed on by each beat.
func TestAnIdleWorkersBeatRidesItsWait(t *testing.T) {
	items := redistest.Items(3)
	b := withList(t, "ride", items...)
	b.coolAll(t, b.prefix, items, time.Hour)
	p := b.start("--continuous", "--idle-wait", "1s", "--cooldown", "1h", "true")
	t.Cleanup(func() { p.stop(t) })
	poll.WaitFor(t, "the worker's first beat", func() bool { return b.Client.Exists(ctx(t), b.key("workers")).Val() == 1 })
	lines, c := monitor(t, b.Port)
	type call struct {
		at   float64
		what string
	}
	last := map[string][]call{} // by connection, its last two calls
	beats, ridden := 0, 0
	for beats < 2 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("MONITOR ended")
			}
			// 1795920422.909531 [0 127.0.0.1:43258] "evalsha" "9f…" "3" "ride:worker:…"
			f := strings.Fields(l)
			if len(f) < 4 || f[2] == "lua]" {
				continue
			}
			at, _ := strconv.ParseFloat(f[0], 64)
			what := strings.Trim(strings.ToLower(f[3]), `"`)
			if what == "evalsha" && len(f) >= 7 && f[5] == `"3"` && strings.Contains(f[6], b.key("worker:")) {
				what = "beat"
				beats++
				// Ridden: the connection's last calls were a BLPOP and then,
				// in the same moment as the beat, the call that it ended
				// with (the probe).
				if prev := last[f[2]]; len(prev) == 2 && prev[0].what == "blpop" && prev[1].what == "evalsha" && at-prev[1].at < 0.005 {
					ridden++
				}
			}
			prev := append(last[f[2]], call{at, what})
			last[f[2]] = prev[max(0, len(prev)-2):]
		case <-c.Done():
			t.Fatalf("MONITOR showed %d beats before the test's timeout, want 2", beats)
		}
	}
	if ridden == 0 {
		t.Errorf("none of the worker's %d beats rode its wait", beats)
	}
	members := b.Client.ZRangeWithScores(ctx(t), b.key("workers"), 0, -1).Val()
	now := b.Client.Time(ctx(t)).Val()
	if len(members) != 1 || members[0].Score <= float64(now.UnixMilli()) {
		t.Errorf("after its beats rode its waits, the registry holds %+v at %d, want the worker, live", members, now.UnixMilli())
	}
}
