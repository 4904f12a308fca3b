package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// GuardArg, as w8y's first argument, makes the process a guard (see
// RunGuard). It is not an option: users never type it.
const GuardArg = "--w8y-guard"

// A guard is a small process (w8y itself, started with GuardArg) that
// SIGKILLs everything w8y started the moment w8y dies without saying goodbye
// (SIGKILL, the OOM killer), and that stops a child whose lease ran out while
// w8y could not (see deadline_linux.go).
//
// The parent-death signal alone cannot do this: it reaches only the direct
// child, and grandchildren would run on without a lock once it expired. No
// signal reaches anyone when a process dies, but a pipe does: the guard
// reads a pipe that only w8y writes, and reads end-of-file when the kernel
// closes w8y's end as w8y dies, however it dies. Through the pipe, w8y tells
// the guard each child's process group as it starts and ends, and until when
// its lock is held. At end-of-file the guard kills those groups, and also
// every process whose environment carries this w8y's marker, which catches a
// process that a child started in the moment before w8y could name its
// group, or that left the group. One guard serves every child a w8y runs, so
// it costs one process start per w8y, not per item.
type guard struct {
	pid  int
	done chan struct{}

	// mu serialises writes to pipe: children that start and end at once
	// (--parallel) each name their group, and the goodbye must come last.
	// It also guards ids, the last id given to a child.
	mu   sync.Mutex
	pipe *os.File
	ids  int

	// reports is w8y's end of the pipe on which the guard reports each group
	// it stopped, read only when a child's end asks (see stoppedAt); stops
	// holds what was read, by the child's id, and partial the start of a
	// line not yet whole. rmu guards the three.
	rmu     sync.Mutex
	reports *os.File
	partial []byte
	stops   map[int]time.Time
}

// startGuard starts a guard for the w8y whose children carry marker.
func startGuard(reap *Reaper, marker string) (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the guard's pipe: %w", err)
	}
	defer r.Close()
	reports, reportsW, err := os.Pipe()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("make the guard's pipe: %w", err)
	}
	defer reportsW.Close()
	cmd := &exec.Cmd{
		// Not os.Executable: /proc/self/exe still runs after the binary
		// was replaced or deleted by an upgrade.
		Path:       "/proc/self/exe",
		Args:       []string{"w8y-guard", GuardArg, marker},
		ExtraFiles: []*os.File{r, reportsW},
		// A group of its own keeps it out of the terminal's foreground, and
		// out of the groups that w8y signals and stops.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := reap.start(cmd); err != nil {
		w.Close()
		reports.Close()
		return nil, fmt.Errorf("start w8y's guard: %w", err)
	}
	g := &guard{pid: cmd.Process.Pid, pipe: w, done: make(chan struct{}), reports: reports, stops: map[int]time.Time{}}
	go func() {
		_ = cmd.Wait()
		reap.waited(g.pid)
		close(g.done)
	}()
	return g, nil
}

// running reports whether the guard still runs.
func (g *guard) running() bool {
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

// watch tells the guard that the process group pgid holds a child of w8y,
// with deadline d (see Deadline; NoDeadline for none), and returns the id
// that names the child in the guard's other words.
func (g *guard) watch(pgid int, d Deadline) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ids++
	line := fmt.Sprintf("+%d %d\n", g.ids, pgid)
	if !d.Until.IsZero() {
		line = fmt.Sprintf("+%d %d %d %d %d\n", g.ids, pgid, onBootClock(d.Until), d.Margin, d.Grace)
	}
	g.writeLocked(line)
	return g.ids
}

// hold tells the guard that the lock of the child id is held until until.
func (g *guard) hold(id int, until time.Time) {
	g.write(fmt.Sprintf("@%d %d\n", id, onBootClock(until)))
}

// signalled tells the guard that w8y has sent the group of the child id its
// stop signal, or stopped it: the guard sends it no SIGTERM of its own.
func (g *guard) signalled(id int) { g.write(fmt.Sprintf("s%d\n", id)) }

// continued tells the guard that the group of the child id was continued
// after signalled.
func (g *guard) continued(id int) { g.write(fmt.Sprintf("c%d\n", id)) }

// forget tells the guard that the group of the child id has ended.
func (g *guard) forget(id int) {
	g.write(fmt.Sprintf("-%d\n", id))
	g.rmu.Lock()
	defer g.rmu.Unlock()
	delete(g.stops, id)
}

// write sends line to the guard, one line at a time. After the goodbye the
// pipe is closed, and a late line is dropped: the guard has left. Pipe
// writes this short are atomic and never block on a live guard.
func (g *guard) write(line string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writeLocked(line)
}

func (g *guard) writeLocked(line string) { _, _ = g.pipe.WriteString(line) }

// stoppedAt reports whether, and when, the guard stopped the group of the
// child id because its deadline came with no newer word from w8y.
//
// The guard writes its report before its first signal to the group, so
// once the child has been seen to end, or w8y has been seen to have been
// stopped past the lease, the report is in the pipe if there is one: the
// pipe is read here, without waiting, rather than by a goroutine that might
// not have run yet.
func (g *guard) stoppedAt(id int) (time.Time, bool) {
	g.rmu.Lock()
	defer g.rmu.Unlock()
	g.readReports()
	at, ok := g.stops[id]
	return at, ok
}

// readReports reads what the guard has reported so far, without waiting.
// Call it with rmu held.
func (g *guard) readReports() {
	if g.reports == nil {
		return
	}
	rc, err := g.reports.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 512)
	for {
		var n int
		var rerr error
		// Returning true tells the runtime not to wait for the pipe to be
		// readable: an empty pipe answers EAGAIN at once.
		if err := rc.Read(func(fd uintptr) bool { n, rerr = unix.Read(int(fd), buf); return true }); err != nil || rerr != nil || n <= 0 {
			break
		}
		g.partial = append(g.partial, buf[:n]...)
	}
	for {
		i := bytes.IndexByte(g.partial, '\n')
		if i < 0 {
			return
		}
		var id int
		var at int64
		if _, err := fmt.Sscanf(string(g.partial[:i]), "%d %d", &id, &at); err == nil {
			g.stops[id] = time.Unix(0, at)
		}
		g.partial = g.partial[i+1:]
	}
}

// stop tells the guard that w8y is exiting normally. It does not wait for
// the guard: that would add the guard's start-up to a one-shot run, and the
// guard leaves by itself once it reads the goodbye, with no terminal or
// output of w8y's open.
func (g *guard) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	fmt.Fprintln(g.pipe, "q")
	g.pipe.Close()
	g.rmu.Lock()
	defer g.rmu.Unlock()
	if g.reports != nil {
		g.reports.Close()
		g.reports = nil
	}
}

// ErrGuardMisused is RunGuard's answer to a process that was not started by
// a Spawner.
var ErrGuardMisused = errors.New(GuardArg + " is for w8y's own use, not an option")

// errOrphaned is RunGuard's answer when w8y died without its goodbye.
var errOrphaned = errors.New("w8y died without saying goodbye: its children were killed")

// The guard's ends of its pipes: it reads w8y's words on guardWords and
// writes its reports on guardReports (see startGuard's ExtraFiles).
const (
	guardWords   = 3
	guardReports = 4
)

// RunGuard is the guard's side (see guard): it ignores the signals that
// reach a terminal's process groups, follows the process groups w8y names
// on the pipe (fd 3) and their deadlines, stops a group whose deadline has
// come (see deadlines) and reports it (fd 4), and kills what w8y started,
// the groups and every process whose environment holds marker, if the pipe
// ends without w8y's goodbye. It returns nil after the goodbye.
func RunGuard(marker string) error {
	if marker == "" || !isOpen(guardWords) || !isOpen(guardReports) {
		return ErrGuardMisused
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	// A report that w8y, stopped, does not read must never hold the guard
	// up: were the pipe ever full, the report is dropped, not the kill.
	_ = unix.SetNonblock(guardReports, true)
	book := newDeadlines()
	words := make([]byte, 0, 4096)
	buf := make([]byte, 4096)
	for {
		wait := -1
		if d, ok := book.next(bootClock()); ok {
			// Rounded up: a wake-up a millisecond early would find nothing
			// due and spin until it is.
			wait = int((d + time.Millisecond - 1) / time.Millisecond)
		}
		ready, err := unix.Poll([]unix.PollFd{{Fd: guardWords, Events: unix.POLLIN}}, wait)
		if ready > 0 {
			n, err := unix.Read(guardWords, buf)
			if n == 0 || err != nil && !errors.Is(err, syscall.EINTR) && !errors.Is(err, syscall.EAGAIN) {
				// End-of-file without the goodbye: w8y is gone.
				break
			}
			words = append(words, buf[:max(n, 0)]...)
			for {
				i := bytes.IndexByte(words, '\n')
				if i < 0 {
					break
				}
				if book.apply(string(words[:i])) {
					return nil
				}
				words = words[i+1:]
			}
		} else if err != nil && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("wait for w8y's words: %w", err)
		}
		book.enforce(bootClock(), stopOverdue)
	}
	for _, pgid := range book.pgids() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	for _, pid := range ProcessesWithEnv(marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return errOrphaned
}

// stopOverdue sends sig to the group pgid of the child id, whose deadline
// has come, if anyone of it is alive (an ended child's zombie, which w8y
// has not reaped while stopped, is no one): SIGTERM is followed by SIGCONT,
// for a group that is stopped. Before the first signal it reports the stop
// for w8y (see guard.stoppedAt).
func stopOverdue(id, pgid int, sig syscall.Signal, first bool) bool {
	if !groupAlive(pgid) {
		return false
	}
	if first {
		_, _ = unix.Write(guardReports, []byte(fmt.Sprintf("%d %d\n", id, time.Now().UnixNano())))
	}
	_ = signalGroup(pgid, sig)
	if sig == syscall.SIGTERM {
		_ = signalGroup(pgid, syscall.SIGCONT)
	}
	return true
}

// isOpen reports whether fd is an open file descriptor.
func isOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}
