package integration_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// TestRestartDuringARun is issue 24's measurement, three times over: Redis
// shut down with SHUTDOWN SAVE one second into a run and started again on
// its port 1.1s later, with the lock kept and time left on its 5s lease.
// The child must go on to its end and the run be recorded as a success:
// w8y reaches Redis again as soon as it is back, and the lease never ran
// out. (go-redis' pool, left to itself, refuses to dial for a second after
// as many failed dials as it has connections, and the lease gave up.)
func TestRestartDuringARun(t *testing.T) {
	// The lease retries every 50ms (see refreshRetry); a refresh takes a
	// millisecond, the test's polling 10ms, and the race detector and a
	// loaded machine the rest.
	const refreshedWithin = 100 * time.Millisecond
	t.Parallel()
	b := setup(t, "rs")
	b.items("a")
	for i := range 3 {
		p := b.start("-x", "5", "--", "sh", "-c", "sleep 5")
		redistest.WaitFor(t, "the lock of a", func() bool { return b.Client.Exists(ctx(t), b.key("lock:a")).Val() == 1 })
		// The outage's timing is the scenario itself, not a wait for a
		// state: these sleeps make the outage that the issue measured.
		time.Sleep(time.Second)
		pttl := func() time.Duration { return b.Client.PTTL(ctx(t), b.key("lock:a")).Val() }
		before := pttl()
		b.ShutDown(t)
		time.Sleep(1100 * time.Millisecond)
		b.Restart(t)
		// Restart returns once the server answers the test: Redis is back
		// by then. The lease refreshes the lock as soon as it can, before
		// that or just after: the lock's PTTL rises again, and tells when.
		back := time.Now()
		var refreshed time.Time
		redistest.WaitFor(t, "a refresh of a's lock", func() bool {
			left := pttl()
			refreshed = time.Now().Add(left - 5*time.Second)
			return left > before
		})
		late := refreshed.Sub(back)
		t.Logf("run %d: the lock was refreshed %s after Redis answered the test (negative: before)", i+1, late.Round(time.Millisecond))
		if late > refreshedWithin {
			t.Errorf("run %d: the lock was refreshed %s after Redis answered the test, want within %s", i+1, late.Round(time.Millisecond), refreshedWithin)
		}
		r := p.wait(t)
		r.mustExit(t, 0)
		st := b.stateOf(t, "rs", "a")
		if st["last_result"] != "success" || st["runs"] != itoa(i+1) {
			t.Fatalf("run %d: state of a after a restart during its run: %v\n%s", i+1, st, r)
		}
		b.noLocks()
	}
}

// TestIdleWorkersBackWithinASecond: three idle --continuous workers whose
// items came due while Redis was down for eight seconds each start one of
// them within a second of Redis' return, and say how long Redis was
// unreachable, counted from their first failure. (With the retry's
// back-off alone, a worker waited up to the last back-off, seconds, after
// Redis was back; issue 24 measured 0.3s, 6.3s and 10.5s after 8s.)
func TestIdleWorkersBackWithinASecond(t *testing.T) {
	t.Parallel()
	const outage = 8 * time.Second
	b := setup(t, "idle")
	items := []string{"a", "b", "c"}
	b.items(items...)
	// Each run takes a second, so that a worker that has started one cannot
	// start another within the second that the test allows: three starts
	// within it are three workers back. The cooldown ends during the outage.
	var workers []*proc
	for range 3 {
		workers = append(workers, b.start("-c", "--cooldown", "3s", "--", "sh", "-c", started+"; sleep 1"))
	}
	for range items {
		b.popStarted(t)
	}
	redistest.WaitFor(t, "the three runs to end", func() bool {
		for _, item := range items {
			if b.stateOf(t, "idle", item)["last_result"] != "success" {
				return false
			}
		}
		return true
	})
	b.ShutDown(t)
	down := time.Now()
	time.Sleep(outage) // the outage itself, not a wait for a state
	b.Restart(t)
	back := time.Now()
	for range items {
		b.popStarted(t)
	}
	if took := time.Since(back); took > time.Second {
		t.Errorf("the three idle workers started their items %s after Redis was back, want within 1s", took.Round(time.Millisecond))
	} else {
		t.Logf("the three idle workers started their items %s after Redis was back", took.Round(time.Millisecond))
	}
	drain(t, workers)
	// Each worker counts from its first failure, at its first look after the
	// shutdown (at most a second later, see --idle-wait), to its first
	// answer: about the outage, and never the back-off on top of it.
	reachable := regexp.MustCompile(`Redis is reachable again, after ([0-9.]+)s`)
	for i, w := range workers {
		m := reachable.FindStringSubmatch(w.stderrSoFar())
		if m == nil {
			t.Errorf("worker %d did not say that Redis was reachable again:\n%s", i, w.stderrSoFar())
			continue
		}
		said, _ := strconv.ParseFloat(m[1], 64)
		if was := back.Sub(down).Seconds(); said > was+0.5 || said < was-1.5 {
			t.Errorf("worker %d said Redis was unreachable for %.2fs; it was down for %.2fs", i, said, was)
		}
	}
	if got := b.list(); len(got) != len(items) {
		t.Errorf("list holds %q, want %q in some order", got, items)
	}
}
