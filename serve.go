package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/runs"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// serve sets up Redis, signals, the terminal and the children's
// supervision from opts, then runs the worker until it is done. The child
// gets stdin (unless several run at once), stdout and stderr.
func serve(opts *Options, stdin io.Reader, stdout, stderr io.Writer, log zerolog.Logger) error {
	command, err := resolveCommand(opts.Command, opts.EnvVar, redisconn.WithoutSecrets(os.Environ()))
	if err != nil {
		return err
	}
	command.Stdout, command.Stderr = stdout, stderr
	// Children that run at once cannot share one stdin or one terminal.
	if opts.Parallel == 1 {
		command.Stdin = stdin
	}
	// Taking items uses one connection at a time, and each running child's
	// lock refresher and finish one more. With a Cluster, that is per node.
	conns := opts.Parallel + 1
	if opts.MetricsAddr != "" {
		// One more, so that a health probe's PING never waits for the
		// worker's connections.
		conns++
	}
	client, err := redisconn.Connect(&opts.Options, conns, log)
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
	sigs, release := jobctl.Catch(proc.IgnoredNow())
	defer release()
	stops := jobctl.New(log)

	stdinFile, _ := stdin.(*os.File)
	term := proc.TerminalOf(stdinFile)
	if opts.Parallel > 1 {
		term = term.Kept()
	}
	if opts.Subreaper {
		if err := proc.BecomeSubreaper(); err != nil {
			return fmt.Errorf("become a child subreaper: %w", err)
		}
	}
	var reaper *proc.Reaper
	if opts.Subreaper || os.Getpid() == 1 {
		reaper = proc.NewReaper(log)
		reaped := reaper.Run(ctx)
		defer func() {
			cancel()
			<-reaped
		}()
	}
	spawn := proc.NewSpawner(term, reaper, holderVar+"="+token, stops.Heard)
	defer spawn.Close()
	// Signals caught since jobctl.Catch wait in sigs until the router,
	// which needs the spawner to lend the terminal, starts.
	routed := stops.Route(sigs, spawn, ctx.Done())
	defer func() {
		cancel()
		<-routed
	}()

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
			command: command, spawn: spawn, stops: stops, exitCodes: opts.ExitCodes,
			killAfter: time.Duration(opts.KillAfter.Flag), timeout: time.Duration(opts.Timeout), keepOutput: opts.KeepOutput,
			metrics: counts, health: beat, log: log,
		},
		stops: router{stops},
		// Only take calls it, when a stop finds nothing but a take using
		// Redis; the deferred Close then finds it closed, which is harmless.
		hangUp:  func() { _ = client.Close() },
		metrics: counts,
		health:  beat,
		log:     log,
		reports: failureReports(opts, stderr),
	}
	if opts.UntilIdle {
		w.items = &status.Reader{Client: client, Keys: keys}
	}
	log.Debug().Str("list", keys.List()).Str("holder", token).Bool("continuous", opts.Continuous).Msg("w8y starting")
	return w.run(ctx)
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
