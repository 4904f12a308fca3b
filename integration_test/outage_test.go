package integration_test

import (
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
