package jobctl

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/proc"
)

// Process is what a worker's children need of w8y's process: its signals
// routed to them (Router), the terminal lent to them and their groups
// started and supervised (Spawner), and its orphans reaped.
type Process struct {
	Router  *Router
	Spawner *proc.Spawner
	// closers stop what Start started, in the order of their start.
	closers []func()
	cancel  context.CancelFunc
}

// Setup is how w8y's options shape its Process.
type Setup struct {
	// Stdin is w8y's standard input, nil if it is not a file. If it is a
	// terminal, a child that runs alone borrows it.
	Stdin *os.File
	// KeepTerminal keeps the terminal from every child (--parallel above
	// 1): children that run at once cannot share it.
	KeepTerminal bool
	// Subreaper is --subreaper: w8y becomes a child subreaper and reaps the
	// orphans of its children's processes, as it does anyway as PID 1.
	Subreaper bool
	// Marker is the NAME=VALUE that marks this w8y's children for the guard
	// (see proc.NewSpawner).
	Marker string
	// Drain is --drain-timeout: how long the running children may go on
	// after the first stop signal before they get it; 0 passes it at once.
	Drain time.Duration
}

// Start catches the signals, finds the terminal, becomes a subreaper if
// asked and reaps orphans there or as PID 1, and starts the spawner and the
// signal router, all until ctx ends or Close is called. Call it once:
// signal dispositions belong to the whole process (see Catch).
func Start(ctx context.Context, s Setup, log zerolog.Logger) (*Process, error) {
	ctx, cancel := context.WithCancel(ctx)
	sigs, release := Catch(proc.IgnoredNow())
	p := &Process{Router: New(log), closers: []func(){release}, cancel: cancel}
	p.Router.drain = s.Drain
	term := proc.TerminalOf(s.Stdin)
	if s.KeepTerminal {
		term = term.Kept()
	}
	if s.Subreaper {
		if err := proc.BecomeSubreaper(); err != nil {
			p.Close()
			return nil, fmt.Errorf("become a child subreaper: %w", err)
		}
	}
	var reaper *proc.Reaper
	if s.Subreaper || os.Getpid() == 1 {
		reaper = proc.NewReaper(log)
		reaped := reaper.Run(ctx)
		p.closers = append(p.closers, func() { cancel(); <-reaped })
	}
	p.Spawner = proc.NewSpawner(term, reaper, s.Marker, p.Router.Heard)
	p.closers = append(p.closers, p.Spawner.Close)
	// Signals caught since Catch wait in sigs until the router, which needs
	// the spawner to lend the terminal, starts.
	routed := p.Router.Route(sigs, p.Spawner, ctx.Done())
	p.closers = append(p.closers, func() { cancel(); <-routed })
	return p, nil
}

// Close stops all that Start started and waits for its goroutines, in the
// reverse order of their start.
func (p *Process) Close() {
	p.cancel()
	for _, c := range slices.Backward(p.closers) {
		c()
	}
}
