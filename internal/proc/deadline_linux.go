package proc

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The guard holds each child's deadline (see guard). A lease's timer that
// lives in w8y cannot stop a child while w8y itself is stopped (SIGSTOP, a
// debugger, a freezer on w8y's cgroup alone, a Ctrl-Z) or stalled, and the
// child runs on: past its lock's expiry, once another host has taken the
// item. The guard is a process of its own that such a stop of w8y leaves
// running, so w8y tells it, after each refresh, until when the lock is held;
// if that moment, less a margin for the kill, comes with no newer word, the
// guard stops the child's group itself and records why, for w8y to read
// when it runs again.

// Deadline is what the guard enforces on a child's process group: the lock
// that the child runs under is held until Until (the earliest moment the
// server may expire it); if Until less Margin comes with no later word (see
// Child.HoldUntil), the guard sends the group SIGTERM (and SIGCONT), and
// SIGKILL Grace later. Margin must leave room for Grace and for the SIGKILL
// to land before Until.
type Deadline struct {
	Until         time.Time
	Margin, Grace time.Duration
}

// NoDeadline is the Deadline of a child that runs under no lock: the guard
// kills its group only if w8y dies.
var NoDeadline = Deadline{}

// bootClock reads the clock the guard's deadlines are on: time since boot,
// counting time suspended. It is shared by every process on the host, unlike
// the monotonic readings of Go's time.Time, and it is not stepped as the
// wall clock is; and while a host sleeps, the lease runs out on the Redis
// server all the same, so the sleep must count.
func bootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// CLOCK_BOOTTIME is in every Linux since 2.6.39.
		panic(fmt.Sprintf("read CLOCK_BOOTTIME: %v", err))
	}
	return time.Duration(ts.Nano())
}

// onBootClock converts t, a moment of this process' clock, to the boot
// clock, for another process.
func onBootClock(t time.Time) time.Duration { return bootClock() + time.Until(t) }

// The guard's pipe carries one line per word of w8y, each naming a child by
// an id that w8y gives it (a process group's id may be reused once the group
// has ended, before the guard hears that it has):
//
//	+ID PGID                        watch the group PGID: kill it if w8y dies
//	+ID PGID UNTIL MARGIN GRACE     the same, with a deadline (nanoseconds; UNTIL on the boot clock)
//	@ID UNTIL                       the lock is now held until UNTIL
//	sID                             w8y has stopped the group itself: the guard's part is SIGKILL at the last moment
//	cID                             the group was continued: the guard's own SIGTERM is back on
//	-ID                             the group has ended: forget it
//	q                               goodbye: w8y exits normally
//
// The guard reports each group it signals on a pipe of its own, one line
// each, before the first signal: "ID WHEN" (WHEN in Unix nanoseconds).

// watched is a group that the guard watches, and its deadline, if any.
type watched struct {
	pgid int
	// until is when the lock is held to, on the boot clock, zero for no
	// deadline; margin and grace as in Deadline.
	until, margin, grace time.Duration
	// signalled: w8y has sent the group its stop signal itself, or stopped
	// it for job control, so a SIGTERM of the guard's would be a second one,
	// or could not be acted on: only SIGKILL is left to the guard.
	signalled bool
	// termed says that the guard has sent SIGTERM; done that it has no more
	// to send (it sent SIGKILL, or found the group gone).
	termed, done bool
}

// deadlines is the guard's book of the groups it watches, by id: it applies
// w8y's words and says which group to signal when. It reads no clock: its
// caller passes the time, so a test can pass its own.
type deadlines struct {
	groups map[int]*watched
}

func newDeadlines() *deadlines { return &deadlines{groups: map[int]*watched{}} }

// apply applies one line of w8y's (see above). It reports whether the line
// is the goodbye. A line it cannot read is dropped: the pipe is w8y's alone,
// and the guard must not die of a stray one.
func (d *deadlines) apply(line string) (goodbye bool) {
	if line == "q" {
		return true
	}
	if line == "" {
		return false
	}
	f := strings.Fields(line[1:])
	n := make([]int64, len(f))
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return false
		}
		n[i] = v
	}
	if len(n) == 0 {
		return false
	}
	id := int(n[0])
	g := d.groups[id]
	switch {
	case line[0] == '+' && len(n) == 2:
		d.groups[id] = &watched{pgid: int(n[1])}
	case line[0] == '+' && len(n) == 5:
		d.groups[id] = &watched{pgid: int(n[1]), until: time.Duration(n[2]), margin: time.Duration(n[3]), grace: time.Duration(n[4])}
	case g == nil:
	case line[0] == '@' && len(n) == 2:
		// Once the guard has begun to stop the group, a late word changes
		// nothing: the group's SIGKILL stays due within the lease it overran.
		if g.until != 0 && !g.termed {
			g.until = time.Duration(n[1])
		}
	case line[0] == 's':
		g.signalled = true
	case line[0] == 'c':
		g.signalled = false
	case line[0] == '-':
		delete(d.groups, id)
	}
	return false
}

// stopAt is when the guard sends g SIGTERM, and killAt when SIGKILL.
func (g *watched) stopAt() time.Duration { return g.until - g.margin }
func (g *watched) killAt() time.Duration { return g.stopAt() + g.grace }

// enforce sends, through stop, what is due at now: SIGTERM to each group
// whose deadline has come (unless w8y signalled it), SIGKILL to each whose
// grace is over. stop is told whether this is the first signal the guard
// sends the group, and reports whether the group was still there; a group
// found gone gets nothing more, for its id might be another's by then.
func (d *deadlines) enforce(now time.Duration, stop func(id, pgid int, sig syscall.Signal, first bool) bool) {
	for id, g := range d.groups {
		if g.until == 0 || g.done {
			continue
		}
		if !g.termed && !g.signalled && now >= g.stopAt() {
			g.termed = true
			if !stop(id, g.pgid, syscall.SIGTERM, true) {
				g.done = true
				continue
			}
		}
		if (g.termed || g.signalled) && now >= g.killAt() {
			g.done = true
			stop(id, g.pgid, syscall.SIGKILL, !g.termed)
		}
	}
}

// next is how long after now the next signal falls due, and false if none
// is pending.
func (d *deadlines) next(now time.Duration) (time.Duration, bool) {
	var at time.Duration
	found := false
	for _, g := range d.groups {
		if g.until == 0 || g.done {
			continue
		}
		due := g.stopAt()
		if g.termed || g.signalled {
			due = g.killAt()
		}
		if !found || due < at {
			at, found = due, true
		}
	}
	return max(at-now, 0), found
}

// pgids lists the groups that the guard watches.
func (d *deadlines) pgids() []int {
	var out []int
	for _, g := range d.groups {
		out = append(out, g.pgid)
	}
	return out
}
