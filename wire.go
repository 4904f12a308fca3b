package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/runs"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// serve wires a worker from opts and runs it until it is done: the child's
// command, the Redis client, the process's signals, terminal and reaper
// (see process), the metrics, then the worker itself. The child gets stdin
// (unless several run at once), stdout and stderr.
func serve(opts *Options, stdin io.Reader, stdout, stderr io.Writer, log zerolog.Logger) error {
	command, err := childCommand(opts, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	client, err := connect(opts, log)
	if err != nil {
		return err
	}
	defer client.Close()
	token, err := newToken()
	if err != nil {
		return err
	}
	if opts.KeyPrefix == "" {
		log.Warn().Msg("no --key-prefix: using the keys 'list' and 'lock:<item>' at the top of the database")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := startProcess(ctx, opts, stdin, token, log)
	if err != nil {
		return err
	}
	defer p.close()
	keys := schema.Keys{Prefix: opts.KeyPrefix, Colocated: redisconn.Colocated(client, opts.KeyPrefix)}
	var counts observer = noMetrics{}
	var beat *health.Heartbeat
	if opts.MetricsAddr != "" {
		var stop func()
		counts, beat, stop, err = startMetrics(opts.MetricsAddr, client, keys, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	w := newWorker(opts, command, client, keys, token, p, counts, beat, log)
	w.reports = failureReports(opts, stderr)
	defer announce(ctx, w, client, keys, token, log)()
	log.Debug().Str("list", keys.List()).Str("holder", token).Bool("continuous", opts.Continuous).Msg("w8y starting")
	return w.run(ctx)
}

// childCommand resolves the executable of opts, so that one that cannot run
// fails before any item is taken, and gives the child w8y's streams.
func childCommand(opts *Options, stdin io.Reader, stdout, stderr io.Writer) (Command, error) {
	command, err := resolveCommand(opts.Command, opts.EnvVar, redisconn.WithoutSecrets(os.Environ()))
	if err != nil {
		return Command{}, err
	}
	command.Stdout, command.Stderr = stdout, stderr
	// Children that run at once cannot share one stdin or one terminal.
	if opts.Parallel == 1 {
		command.Stdin = stdin
	}
	return command, nil
}

// connect opens the worker's Redis client. Taking items uses one
// connection at a time, each running child's lock refresher and finish one
// more, and the registry's beat one, so that a beat never makes a refresh
// wait for a connection. With a Cluster, that is per node.
func connect(opts *Options, log zerolog.Logger) (redis.UniversalClient, error) {
	conns := opts.Parallel + 2
	if opts.MetricsAddr != "" {
		// One more, so that a health probe's PING never waits for the
		// worker's connections.
		conns++
	}
	return redisconn.Connect(&opts.Options, conns, log)
}

// process is what the worker's children need of w8y's process: its signals
// routed to them, the terminal lent to them, and its orphans reaped.
type process struct {
	stops *jobctl.Router
	spawn *proc.Spawner
	// close stops all of it and waits for its goroutines, in the reverse
	// order of their start.
	close func()
}

// startProcess catches the signals, finds the terminal, becomes a
// subreaper with --subreaper and reaps orphans there or as PID 1, and
// starts the spawner and the signal router, all until ctx ends and close
// is called. token marks this w8y's children for the guard.
func startProcess(ctx context.Context, opts *Options, stdin io.Reader, token string, log zerolog.Logger) (*process, error) {
	ctx, cancel := context.WithCancel(ctx)
	sigs, release := jobctl.Catch(proc.IgnoredNow())
	closers := []func(){release}
	p := &process{stops: jobctl.New(log), close: func() {
		cancel()
		for _, c := range slices.Backward(closers) {
			c()
		}
	}}
	stdinFile, _ := stdin.(*os.File)
	term := proc.TerminalOf(stdinFile)
	if opts.Parallel > 1 {
		term = term.Kept()
	}
	if opts.Subreaper {
		if err := proc.BecomeSubreaper(); err != nil {
			p.close()
			return nil, fmt.Errorf("become a child subreaper: %w", err)
		}
	}
	var reaper *proc.Reaper
	if opts.Subreaper || os.Getpid() == 1 {
		reaper = proc.NewReaper(log)
		reaped := reaper.Run(ctx)
		closers = append(closers, func() { cancel(); <-reaped })
	}
	p.spawn = proc.NewSpawner(term, reaper, holderVar+"="+token, p.stops.Heard)
	closers = append(closers, p.spawn.Close)
	// Signals caught since jobctl.Catch wait in sigs until the router,
	// which needs the spawner to lend the terminal, starts.
	routed := p.stops.Route(sigs, p.spawn, ctx.Done())
	closers = append(closers, func() { cancel(); <-routed })
	return p, nil
}

// newWorker builds the worker over client: its rotator, finisher and
// children, and, for --until-idle, a reader of the list.
func newWorker(opts *Options, command Command, client redis.UniversalClient, keys schema.Keys, token string, p *process, counts observer, beat *health.Heartbeat, log zerolog.Logger) *worker {
	record := &runs.Recorder{Keys: keys, StateTTL: time.Duration(opts.StateTTL)}
	if !opts.NoEvents {
		record.EventsMaxLen = opts.EventsMaxLen
	}
	w := &worker{
		opts: opts,
		rotator: &Rotator{
			Client: client, Keys: keys, Token: token, TTL: time.Duration(opts.KeyExpiry),
			MaxItemLen: command.maxItemLen(keys.Lock(""), proc.ArgMax()), Log: log,
			Record: record, ReplicaAcks: opts.ReplicaAcks, IdleWait: time.Duration(opts.IdleWait),
		},
		finisher: &runs.Finisher{
			Client: client, Record: record, Jitter: runs.JitterFactor,
			Schedule: runs.Schedule{Cooldown: time.Duration(opts.Cooldown), Backoff: opts.FailureBackoff},
		},
		children: &childRunner{
			command: command, spawn: p.spawn, stops: p.stops, exitCodes: opts.ExitCodes,
			killAfter: time.Duration(opts.KillAfter.Flag), timeout: time.Duration(opts.Timeout), keepOutput: opts.KeepOutput,
			metrics: counts, health: beat, log: log,
		},
		stops: router{p.stops},
		// Only take calls it, when a stop finds nothing but a take using
		// Redis; the deferred Close then finds it closed, which is harmless.
		hangUp:  func() { _ = client.Close() },
		metrics: counts,
		health:  beat,
		log:     log,
	}
	if opts.UntilIdle {
		w.items = &status.Reader{Client: client, Keys: keys}
	}
	return w
}

// showStatus is w8y --status: it reads the list under --key-prefix once, or
// every --watch interval until SIGINT or SIGTERM.
func showStatus(opts *Options, stdout io.Writer, log zerolog.Logger) error {
	client, err := redisconn.Connect(&opts.Options, 1, log)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	reader := &status.Reader{Client: client, Keys: schema.Keys{Prefix: opts.KeyPrefix}}
	return status.Show(ctx, reader, opts.JSON, time.Duration(opts.Watch), stdout, log)
}
