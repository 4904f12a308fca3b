package proc

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Reaper reaps the orphans that the kernel re-parents to w8y, which happens
// when w8y is PID 1 (in a container) or a child subreaper (--subreaper):
// left unreaped, each would stay a zombie until w8y exits.
//
// It never reaps w8y's own children. Their goroutines wait for them, and a
// Reaper that took one's exit status first would leave exec.Cmd.Wait with
// ECHILD and w8y without the child's exit code. So it only peeks at an exited
// child (WNOWAIT) and reaps it only if it is not w8y's own, and it registers
// each child of w8y under the same mutex as it starts it, so that not even a
// child that exits at once can be mistaken for an orphan.
//
// A nil *Reaper is valid: it starts and forgets children, and reaps nothing.
type Reaper struct {
	log  zerolog.Logger
	mu   sync.Mutex
	own  map[int]bool
	kick chan struct{}
}

// NewReaper returns a Reaper; Run makes it reap.
func NewReaper(log zerolog.Logger) *Reaper {
	return &Reaper{log: log, own: map[int]bool{}, kick: make(chan struct{}, 1)}
}

// BecomeSubreaper makes orphaned descendants of w8y its children.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// Run reaps orphans whenever a child exits, until ctx is done. It returns a
// channel that is closed when it has finished.
func (r *Reaper) Run(ctx context.Context) <-chan struct{} {
	finished := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		defer close(finished)
		defer signal.Stop(sigs)
		for {
			r.reap()
			select {
			case <-ctx.Done():
				return
			case <-sigs:
			case <-r.kick:
			}
		}
	}()
	return finished
}

// start starts cmd and registers it as w8y's own child.
func (r *Reaper) start(cmd *exec.Cmd) error {
	if r == nil {
		return cmd.Start()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	r.own[cmd.Process.Pid] = true
	return nil
}

// waited is called once an own child has been waited for. Orphans that
// exited behind it (see reap) are reaped now.
func (r *Reaper) waited(pid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	delete(r.own, pid)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// childInfo is the head of Linux's siginfo_t as waitid(2) fills it in for a
// child, on 64-bit platforms: the union that holds the pid, the uid and the
// status (the exit code, or the signal) is 8-aligned.
type childInfo struct {
	signo, errno, code, _ int32
	pid                   int32
	uid                   uint32
	status                int32
	_                     [128 - 28]byte
}

// reap reaps exited orphans until none is left or the next exited child is
// w8y's own. waitid reports the exited children in a fixed order, so an own
// child that has not been waited for yet hides the orphans behind it until
// its goroutine waits for it and calls waited.
func (r *Reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var info childInfo
		err := unix.Waitid(unix.P_ALL, 0, (*unix.Siginfo)(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		pid := int(info.pid)
		if err != nil || pid == 0 || r.own[pid] {
			return
		}
		var status syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &status, syscall.WNOHANG, nil); err != nil {
			return
		}
		r.log.Debug().Int("pid", pid).Msg("reaped an orphaned process")
	}
}
