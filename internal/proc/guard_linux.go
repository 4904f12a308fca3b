package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
)

// GuardArg, as w8y's first argument, makes the process a guard (see
// RunGuard). It is not an option: users never type it.
const GuardArg = "--w8y-guard"

// A guard is a small process (w8y itself, started with GuardArg) that
// SIGKILLs everything w8y started the moment w8y dies without saying goodbye
// (SIGKILL, the OOM killer).
//
// The parent-death signal alone cannot do this: it reaches only the direct
// child, and grandchildren would run on without a lock once it expired. No
// signal reaches anyone when a process dies, but a pipe does: the guard
// reads a pipe that only w8y writes, and reads end-of-file when the kernel
// closes w8y's end as w8y dies, however it dies. Through the pipe, w8y tells
// the guard each child's process group as it starts and ends. At end-of-file
// the guard kills those groups, and also every process whose environment
// carries this w8y's marker, which catches a process that a child started
// in the moment before w8y could name its group, or that left the group.
// One guard serves every child a w8y runs, so it costs one process start per
// w8y, not per item.
type guard struct {
	pid  int
	done chan struct{}

	// mu serialises writes to pipe: children that start and end at once
	// (--parallel) each name their group, and the goodbye must come last.
	mu   sync.Mutex
	pipe *os.File
}

// startGuard starts a guard for the w8y whose children carry marker.
func startGuard(reap *Reaper, marker string) (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the guard's pipe: %w", err)
	}
	defer r.Close()
	cmd := &exec.Cmd{
		// Not os.Executable: /proc/self/exe still runs after the binary
		// was replaced or deleted by an upgrade.
		Path:       "/proc/self/exe",
		Args:       []string{"w8y-guard", GuardArg, marker},
		ExtraFiles: []*os.File{r},
		// A group of its own keeps it out of the terminal's foreground, and
		// out of the groups that w8y signals.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := reap.start(cmd); err != nil {
		w.Close()
		return nil, fmt.Errorf("start w8y's guard: %w", err)
	}
	g := &guard{pid: cmd.Process.Pid, pipe: w, done: make(chan struct{})}
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

// watch tells the guard that the process group pgid holds a child of w8y.
// Pipe writes this short are atomic and never block on a live guard.
func (g *guard) watch(pgid int) { g.write(fmt.Sprintf("+%d\n", pgid)) }

// forget tells the guard that the process group pgid has ended.
func (g *guard) forget(pgid int) { g.write(fmt.Sprintf("-%d\n", pgid)) }

// write sends line to the guard, one line at a time. After the goodbye the
// pipe is closed, and a late line is dropped: the guard has left.
func (g *guard) write(line string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, _ = g.pipe.WriteString(line)
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
}

// ErrGuardMisused is RunGuard's answer to a process that was not started by
// a Spawner.
var ErrGuardMisused = errors.New(GuardArg + " is for w8y's own use, not an option")

// errOrphaned is RunGuard's answer when w8y died without its goodbye.
var errOrphaned = errors.New("w8y died without saying goodbye: its children were killed")

// RunGuard is the guard's side (see guard): it ignores the signals that
// reach a terminal's process groups, follows the process groups w8y names
// on the pipe (fd 3), and kills what w8y started, the groups and every
// process whose environment holds marker, if the pipe ends without w8y's
// goodbye. It returns nil after the goodbye.
func RunGuard(marker string) error {
	pipe := os.NewFile(3, "w8y-guard-pipe")
	if marker == "" || pipe == nil {
		return ErrGuardMisused
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	var groups []int
	lines := bufio.NewScanner(pipe)
	for lines.Scan() {
		line := lines.Text()
		if line == "q" {
			return nil
		}
		pgid, err := strconv.Atoi(line[min(1, len(line)):])
		switch {
		case err != nil:
		case line[0] == '+':
			groups = append(groups, pgid)
		case line[0] == '-':
			groups = slices.DeleteFunc(groups, func(g int) bool { return g == pgid })
		}
	}
	// End-of-file without the goodbye: w8y is gone.
	for _, pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	for _, pid := range ProcessesWithEnv(marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return errOrphaned
}
