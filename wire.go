package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/logging"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/registry"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/settings"
	"github.com/w8y/w8y/internal/status"
	"github.com/w8y/w8y/internal/take"
	"github.com/w8y/w8y/internal/wake"
)

// runWorker wires a worker from opts and runs it until it is done: the child's
// command, the Redis client, the process's signals, terminal and reaper
// (see jobctl.Process), the metrics, then the worker itself. The child gets stdin
// (unless several run at once), stdout and stderr.
func runWorker(opts *Options, stdin io.Reader, stdout, stderr io.Writer, log zerolog.Logger) error {
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
	if blank := (schema.Keys{Prefix: opts.KeyPrefix}).BlankPrefix(); blank != "" {
		log.Warn().Msg(blank)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdinFile, _ := stdin.(*os.File)
	p, err := jobctl.Start(ctx, jobctl.Setup{
		Stdin: stdinFile, KeepTerminal: opts.Parallel > 1, Subreaper: opts.Subreaper, Marker: childcmd.HolderVar + "=" + token,
		Drain: opts.drain(),
	}, log)
	if err != nil {
		return err
	}
	defer p.Close()
	keys := schema.Keys{Prefix: opts.KeyPrefix, Colocated: redisconn.Colocated(client, opts.KeyPrefix)}
	// A Redis that may evict w8y's keys, or a replica, is refused before
	// anything is taken (see needs.go), and so is a list that a newer w8y
	// keeps in a layout this one does not know: by the first take itself
	// where it can (see startFolded), else here.
	needs := &needs{client: client, allow: opts.AllowEviction, log: log}
	folded := startFolded(opts, keys)
	if !folded {
		if err := checkStart(ctx, needs, client, keys, log); err != nil {
			return err
		}
	}
	go needs.watch(ctx)
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
	w.needs = needs
	if folded {
		w.rotator.Start = take.StartWords(true, schema.Version)
	}
	if opts.Continuous && keys.Colocated {
		w.waker = &wake.Waiter{Client: client, Keys: keys, Holder: token}
	}
	if err := w.rotator.CheckPlaces(); err != nil {
		return err
	}
	// A one-shot run whose start the first take checks (see startFolded)
	// and that has no --fleet-rate of its own reads no rate's record: its
	// two calls are its take and its finish.
	if !folded || !opts.FleetRate.IsZero() {
		w.rotator.WarnOtherRate(ctx)
	}
	w.reports = logging.FailureReports(opts.logging(), stderr)
	defer announce(ctx, w, client, keys, token, log)()
	log.Debug().Str("list", keys.List()).Str("holder", token).Bool("continuous", opts.Continuous).Msg("w8y starting")
	return needs.full(ctx, w.run(ctx))
}

// startFolded reports whether the checks of the start (the server's needs,
// the layout's version) are made by the first take, in the same call (see
// take.StartWords): a one-shot run over the list whose first look reaches
// every key, without --allow-eviction, which reads INFO for itself. It
// then costs Redis two calls, its take and its finish.
func startFolded(opts *Options, keys schema.Keys) bool {
	return !opts.Continuous && opts.Item == "" && keys.Colocated && !opts.AllowEviction
}

// checkStart makes the checks of the start by themselves: the server's
// needs, then the layout's version, which it records where none is. Redis'
// other errors are the take's to report, or to ride out (a Redis not up
// yet); bounded, as a server that never answers is the take's to name.
func checkStart(ctx context.Context, needs *needs, client redis.UniversalClient, keys schema.Keys, log zerolog.Logger) error {
	if err := needs.check(ctx); err != nil {
		return err
	}
	claimCtx, cancelClaim := context.WithTimeout(ctx, 2*time.Second)
	err := schema.ClaimVersion(claimCtx, client, keys)
	cancelClaim()
	if errors.Is(err, schema.ErrNewerSchema) {
		return err
	} else if err != nil {
		log.Debug().Err(err).Msg("could not read or record the version of the layout of the list's keys")
	}
	return nil
}

// childCommand resolves the executable of opts, so that one that cannot run
// fails before any item is taken, and gives the child w8y's streams.
func childCommand(opts *Options, stdin io.Reader, stdout, stderr io.Writer) (childcmd.Command, error) {
	command, err := childcmd.Resolve(opts.Command, opts.EnvVar, redisconn.WithoutSecrets(os.Environ()))
	if err != nil {
		return childcmd.Command{}, err
	}
	command.Stdout, command.Stderr = stdout, stderr
	// Children that run at once cannot share one stdin or one terminal.
	if opts.Parallel == 1 {
		command.Stdin = stdin
	}
	return command, nil
}

// connect opens the worker's Redis client. Taking items uses one
// connection at a time, and so does an idle worker's wait for a wake
// (BLPOP), which never runs beside a take; each running child's lock
// refresher and finish one more, and the registry's beat one, so that a
// beat never makes a refresh wait for a connection. The push that ends a
// wait early comes when a child has ended, whose connection is free. With
// a Cluster, that is per node.
func connect(opts *Options, log zerolog.Logger) (redis.UniversalClient, error) {
	conns := opts.Parallel + 2
	if opts.MetricsAddr != "" {
		// One more, so that a health probe's PING never waits for the
		// worker's connections.
		conns++
	}
	return redisconn.Connect(&opts.Options, conns, log)
}

// newWorker builds the worker over client: its rotator, finisher and
// children, and, for --until-idle, a reader of the list.
func newWorker(opts *Options, command childcmd.Command, client redis.UniversalClient, keys schema.Keys, token string, p *jobctl.Process, counts observer, beat *health.Heartbeat, log zerolog.Logger) *worker {
	keep := keptOutput(opts.KeepOutput, command.Stdout, command.Stderr)
	record := &finish.Recorder{Keys: keys, StateTTL: time.Duration(opts.StateTTL)}
	if !opts.NoEvents {
		record.EventsMaxLen = opts.EventsMaxLen
	}
	clk := clock.New()
	schedule := finish.Schedule{Cooldown: time.Duration(opts.Cooldown), Cron: opts.cron, Backoff: opts.FailureBackoff}
	w := &worker{
		opts: opts,
		rotator: &Rotator{take.Taker{
			Client: client, Keys: keys, Token: token, TTL: time.Duration(opts.KeyExpiry),
			MaxItemLen: command.MaxItemLen(keys.Lock(""), proc.ArgMax()), Log: log,
			Record: record, ReplicaAcks: opts.ReplicaAcks, FleetMax: int(opts.FleetMaxRunning), Rate: opts.FleetRate, Clock: clk,
			// An item's own settings stand in for these options, one by one.
			Settings: settings.Defaults{
				Run:  settings.Run{Timeout: time.Duration(opts.Timeout), Schedule: schedule},
				Zone: opts.ScheduleTimezone, Jitter: time.Duration(opts.Jitter),
			},
			NewItemsWait: !opts.FirstRunNow, Told: &settings.Told{Log: log},
		}},
		finisher: &finish.Finisher{
			Client: client, Record: record, Jitter: finish.JitterFactor, Clock: clk,
			Schedule: schedule,
		},
		children: &childRunner{
			command: command, spawn: p.Spawner, stops: p.Router, exitCodes: opts.ExitCodes,
			killAfter: time.Duration(opts.KillAfter.Flag), timeout: time.Duration(opts.Timeout),
			timeoutSignal: syscall.Signal(opts.TimeoutSignal), keepOutput: keep, keepSuccess: opts.KeepOutput != nil,
			metrics: counts, health: beat, log: log,
		},
		stops: p.Router,
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

// defaultKeepOutput is how many of the last bytes of each of a failed
// run's stdout and stderr w8y keeps without --keep-output: some fifty lines,
// room for the error and the stack trace that say why, in the state hash
// that w8yctl status ITEM and the dashboard read.
const defaultKeepOutput = 4096

// keptOutput is how many bytes of the child's stdout and stderr w8y keeps
// (see keepoutput.Capture): --keep-output's if given, else defaultKeepOutput,
// but none where w8y's stdout or stderr is a terminal, whose person sees
// the output, and whose child must keep it: a pipe would make it buffer
// its output and drop its colours.
func keptOutput(flag *int, stdout, stderr io.Writer) int {
	if flag != nil {
		return *flag
	}
	for _, w := range []io.Writer{stdout, stderr} {
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			return 0
		}
	}
	return defaultKeepOutput
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
	reader := &status.Reader{Client: client, Keys: schema.Keys{Prefix: opts.KeyPrefix, Colocated: redisconn.Colocated(client, opts.KeyPrefix)}}
	view := status.View{JSON: opts.JSON, Watch: time.Duration(opts.Watch), Filter: opts.filter}
	return status.Show(ctx, reader, view, stdout, log)
}

// announce keeps w's entry in the registry of live workers while ctx
// lasts; the returned stop ends it, removes the entry and waits for that.
func announce(ctx context.Context, w *worker, client redis.UniversalClient, keys schema.Keys, token string, log zerolog.Logger) (stop func()) {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	v, _ := buildVersion()
	opts := w.opts
	// The skew of Redis' clock, before the first finish needs it; each
	// beat then measures it again. Unmeasured, the host's clock stands.
	// Bounded as the version's read is: a server that never answers is the
	// take's to name.
	// A one-shot run without --schedule computes no time that Redis
	// compares (its scripts read Redis' clock themselves), so it reads none.
	clk := w.rotator.Clock
	if opts.Continuous || opts.Schedule != "" {
		measureCtx, cancelMeasure := context.WithTimeout(ctx, 2*time.Second)
		err = clk.Measure(measureCtx, client)
		cancelMeasure()
		if err != nil {
			log.Debug().Err(err).Msg("could not read Redis' clock (TIME); the host's clock stands in for it until a beat reads it")
		}
	}
	w.presence = registry.NewPresence(client, keys, registry.Self{
		Holder: token, Host: host, PID: os.Getpid(), Version: v, Started: time.Now(),
		Continuous: opts.Continuous, Slots: opts.Parallel,
		Looks: opts.Continuous && !opts.UntilIdle && w.rotator.Looks(),
	}, clk, log)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.presence.Run(ctx)
	}()
	return func() { cancel(); <-done }
}
