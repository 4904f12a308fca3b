package main

import (
	"errors"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"

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

// catchSignals makes w8y catch the forwarded signals, and returns the
// channel they arrive on and a function that stops catching them. It is
// called once, when serve starts: dispositions belong to the whole process.
//
// A signal that w8y's parent had it ignore (nohup: SIGHUP; a shell that
// starts a background job without job control: SIGINT and SIGQUIT) is left
// ignored, by w8y and, through exec, by its children, which is what the
// parent asked: catching it would reset it to its default in every child.
// ignored says which were ignored at start (see proc.IgnoredNow: Go's
// runtime keeps SIGHUP's and SIGINT's, but forgets the others').
//
// It also catches SIGTSTP, unless ignored, to stop the children before w8y
// stops (see jobcontrol.go).
func catchSignals(ignored proc.Ignored) (<-chan os.Signal, func()) {
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

// errStopped is returned when a stop signal came before the next item could
// be taken or its child started.
var errStopped = errors.New("stopped")

// stopError is errStopped with the signal that asked for the stop: w8y
// exits with 128 plus its number, as a shell reports a process it killed.
type stopError struct{ Signal syscall.Signal }

func (e stopError) Error() string        { return "stopped by " + unix.SignalName(e.Signal) }
func (e stopError) Is(target error) bool { return target == errStopped }

// signalRouter passes the signals w8y receives to the process groups of the
// running children (one, or up to --parallel) and turns stop signals into a
// stop request. It also stops and continues w8y with its children when the
// terminal stops them (see jobcontrol.go).
type signalRouter struct {
	log zerolog.Logger
	// spawn starts the children, and lends them the terminal.
	spawn *proc.Spawner

	mu sync.Mutex
	// children are the running children, each with the lease that keeps
	// its lock alive.
	children map[*proc.Child]*lease
	stopSig  syscall.Signal
	stop     chan struct{}
}

func newSignalRouter(log zerolog.Logger) *signalRouter {
	return &signalRouter{log: log, children: map[*proc.Child]*lease{}, stop: make(chan struct{})}
}

// route handles signals from sigs until done is closed. It returns a channel
// that is closed when it has finished.
func (r *signalRouter) route(sigs <-chan os.Signal, done <-chan struct{}) <-chan struct{} {
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if sig == syscall.SIGTSTP {
					r.suspend(false, syscall.SIGTSTP)
				} else {
					r.handle(sig.(syscall.Signal), nil)
				}
			}
		}
	}()
	return finished
}

// heard handles sig, which the terminal sent the process group of child
// while the child held it (see proc.Spawner): as a signal sent to w8y,
// except that child has it already.
func (r *signalRouter) heard(child *proc.Child, sig syscall.Signal) {
	r.handle(sig, child)
}

// handle forwards sig to every running child but from, whose group has it
// already, and records stop requests. A second stop signal while children
// run kills their groups, from included.
func (r *signalRouter) handle(sig syscall.Signal, from *proc.Child) {
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

// stopping reports whether a stop signal has arrived.
func (r *signalRouter) stopping() bool { return r.StopSignal() != 0 }

// Stopped is closed once a stop signal has arrived.
func (r *signalRouter) Stopped() <-chan struct{} { return r.stop }

// StopSignal is the first stop signal received, or 0.
func (r *signalRouter) StopSignal() syscall.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopSig
}

// stopErr is the stopError of the first stop signal.
func (r *signalRouter) stopErr() error { return stopError{Signal: r.StopSignal()} }

// startChild calls start unless a stop was requested (then a stopError), and
// routes signals to the child from the moment it exists, so none is lost
// between its start and its registration. lease keeps the child's lock
// alive; job control pauses it while w8y is stopped.
func (r *signalRouter) startChild(start func() (*proc.Child, error), lease *lease) (*proc.Child, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopSig != 0 {
		return nil, stopError{Signal: r.stopSig}
	}
	child, err := start()
	if err != nil {
		return nil, err
	}
	r.children[child] = lease
	return child, nil
}

// childDone stops routing signals to child.
func (r *signalRouter) childDone(child *proc.Child) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.children, child)
}
