package jobctl

import (
	"errors"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/proc"
	"golang.org/x/sys/unix"
)

// forwardedSignals are passed on to the whole process group of every running
// child.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// stopSignals also make w8y stop taking items. A second one while children
// run kills their groups.
var stopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Catch makes w8y catch the forwarded signals, and returns the channel they
// arrive on and a function that stops catching them. Call it once, when the
// worker starts: dispositions belong to the whole process.
//
// A signal that w8y's parent had it ignore (nohup: SIGHUP; a shell that
// starts a background job without job control: SIGINT and SIGQUIT) is left
// ignored, by w8y and, through exec, by its children, which is what the
// parent asked: catching it would reset it to its default in every child.
// ignored says which were ignored at start (see proc.IgnoredNow: Go's
// runtime keeps SIGHUP's and SIGINT's, but forgets the others').
//
// It also catches SIGTSTP, unless ignored, to stop the children before w8y
// stops (see suspend.go).
func Catch(ignored proc.Ignored) (<-chan os.Signal, func()) {
	var caught []os.Signal
	for _, sig := range slices.Concat(forwardedSignals, []os.Signal{syscall.SIGTSTP}) {
		if !ignored.Has(sig.(syscall.Signal)) {
			caught = append(caught, sig)
		}
	}
	sigs := make(chan os.Signal, len(caught))
	signal.Notify(sigs, caught...)
	return sigs, func() { signal.Stop(sigs) }
}

// ErrStopped is returned when a stop signal came before the next item could
// be taken or its child started.
var ErrStopped = errors.New("stopped")

// StopError is ErrStopped with the signal that asked for the stop: w8y
// exits with 128 plus its number, as a shell reports a process it killed.
type StopError struct{ Signal syscall.Signal }

func (e StopError) Error() string        { return "stopped by " + unix.SignalName(e.Signal) }
func (e StopError) Is(target error) bool { return target == ErrStopped }

// Pausable is what keeps a running child's lock alive, as job control sees
// it: Pause stops it while w8y is stopped; Resume goes on once w8y is
// continued, or, if the lock was lost meanwhile, calls kill and returns the
// loss.
type Pausable interface {
	Pause()
	Resume(kill func()) error
}

// Lender lends a child the terminal's foreground (see proc.Spawner.Lend).
type Lender interface {
	Lend(child *proc.Child) bool
}

// Router passes the signals w8y receives to the process groups of the
// running children (one, or up to --parallel) and turns stop signals into a
// stop request. It also stops and continues w8y with its children when the
// terminal stops them (see suspend.go).
type Router struct {
	log zerolog.Logger
	// term lends the children the terminal; set by Route.
	term Lender
	// orphaned and stopJob are proc.Orphaned and proc.StopJob, which a test
	// replaces: the real ones stop the whole process.
	orphaned func() bool
	stopJob  func(whole bool)

	// drain is --drain-timeout: how long the first stop signal waits
	// before it is passed to the running children; 0 passes it at once.
	drain time.Duration

	mu sync.Mutex
	// children are the running children, each with what keeps its lock
	// alive.
	children map[*proc.Child]Pausable
	stopSig  syscall.Signal
	stop     chan struct{}
	// drained passes the first stop signal on once the drain is over; nil
	// until a drain starts. Route stops it when it finishes.
	drained *time.Timer
}

// New returns a Router that routes nothing until Route.
func New(log zerolog.Logger) *Router {
	return &Router{
		log: log, orphaned: proc.Orphaned, stopJob: proc.StopJob,
		children: map[*proc.Child]Pausable{}, stop: make(chan struct{}),
	}
}

// Route handles signals from sigs until done is closed, lending the
// children the terminal through term. It returns a channel that is closed
// when it has finished. Signals caught before it starts wait in sigs.
func (r *Router) Route(sigs <-chan os.Signal, term Lender, done <-chan struct{}) <-chan struct{} {
	r.term = term
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer r.endDrain()
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if sig == syscall.SIGTSTP {
					r.suspend(false, syscall.SIGTSTP)
				} else {
					r.Handle(sig.(syscall.Signal), nil)
				}
			}
		}
	}()
	return finished
}

// Heard handles sig, which the terminal sent the process group of child
// while the child held it (see proc.Spawner): as a signal sent to w8y,
// except that child has it already.
func (r *Router) Heard(child *proc.Child, sig syscall.Signal) {
	r.Handle(sig, child)
}

// Handle forwards sig to every running child but from, whose group has it
// already, and records stop requests. A second stop signal while children
// run kills their groups, from included.
func (r *Router) Handle(sig syscall.Signal, from *proc.Child) {
	r.mu.Lock()
	defer r.mu.Unlock()
	isStop := slices.Contains(stopSignals, os.Signal(sig))
	if isStop && r.stopSig != 0 && len(r.children) > 0 {
		for child := range r.children {
			r.log.Warn().Str("signal", unix.SignalName(sig)).Int("pid", child.PID).Msg("second stop signal: killing the child's process group")
			_ = child.Signal(syscall.SIGKILL)
		}
		return
	}
	if isStop && r.stopSig == 0 {
		// Said before anyone can act on it, so that "stopping" always
		// comes before the "drained; exiting" that it leads to.
		r.log.Info().Str("signal", unix.SignalName(sig)).Msg("stopping: no new items will be taken")
		r.stopSig = sig
		close(r.stop)
		if r.drain > 0 && len(r.children) > 0 && from == nil {
			r.startDrain(sig)
			return
		}
	}
	if len(r.children) == 0 {
		if !isStop {
			r.log.Debug().Str("signal", unix.SignalName(sig)).Msg("no child running; signal ignored")
		}
		return
	}
	for child := range r.children {
		if child == from {
			continue
		}
		if err := child.Signal(sig); err != nil {
			r.log.Error().Err(err).Str("signal", unix.SignalName(sig)).Int("pid", child.PID).Msg("could not forward signal")
		}
	}
}

// Stopping reports whether a stop signal has arrived.
func (r *Router) Stopping() bool { return r.StopSignal() != 0 }

// Stopped is closed once a stop signal has arrived.
func (r *Router) Stopped() <-chan struct{} { return r.stop }

// StopSignal is the first stop signal received, or 0.
func (r *Router) StopSignal() syscall.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopSig
}

// StopErr is the StopError of the first stop signal.
func (r *Router) StopErr() error { return StopError{Signal: r.StopSignal()} }

// StartChild calls start unless a stop was requested (then a StopError),
// and routes signals to the child from the moment it exists, so none is
// lost between its start and its registration. p keeps the child's lock
// alive; job control pauses it while w8y is stopped.
func (r *Router) StartChild(start func() (*proc.Child, error), p Pausable) (*proc.Child, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopSig != 0 {
		return nil, StopError{Signal: r.stopSig}
	}
	child, err := start()
	if err != nil {
		return nil, err
	}
	r.children[child] = p
	return child, nil
}

// ChildDone stops routing signals to child.
func (r *Router) ChildDone(child *proc.Child) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.children, child)
}

// startDrain lets the running children finish for up to the drain time
// before they get sig, the first stop signal. Their leases go on meanwhile:
// a drained child keeps its lock. A second stop signal kills their groups
// at once (see Handle). Call it with r.mu held.
func (r *Router) startDrain(sig syscall.Signal) {
	r.log.Info().Str("signal", unix.SignalName(sig)).Dur("drain_timeout", r.drain).Int("running", len(r.children)).
		Msg("draining: the running children may finish before they get the signal (--drain-timeout)")
	r.drained = time.AfterFunc(r.drain, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for child := range r.children {
			r.log.Info().Str("signal", unix.SignalName(sig)).Int("pid", child.PID).Msg("--drain-timeout passed: passing the stop signal to the child's process group")
			if err := child.Signal(sig); err != nil {
				r.log.Error().Err(err).Str("signal", unix.SignalName(sig)).Int("pid", child.PID).Msg("could not forward signal")
			}
		}
	})
}

// endDrain stops the drain's timer, if any: the router is done.
func (r *Router) endDrain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drained != nil {
		r.drained.Stop()
	}
}
