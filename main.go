// Command w8y runs an executable on one item of a circular Redis list at a
// time, holding the item's lock while the executable runs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redisconn"
)

// version and commit are stamped at build time by make build, with
// -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// Exit codes of w8y's own making. Otherwise w8y exits with the child's code.
const (
	// exitOK: the child succeeded, nothing was eligible, or --continuous drained.
	exitOK = 0
	// exitLockLost: the lock was lost while the child ran, and the child was
	// stopped. 122 is unused by shells and by timeout(1).
	exitLockLost = 122
	// exitTimeout: the child ran past --timeout and was stopped, as timeout(1).
	exitTimeout = 124
	// exitFailure: w8y itself failed (options, URL, Redis), as env(1) and
	// timeout(1) use 125.
	exitFailure = 125
	// exitNotExecutable: the executable exists but cannot be run, as in shells.
	exitNotExecutable = 126
	// exitNotFound: the executable does not exist, as in shells.
	exitNotFound = 127
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is w8y from parsed arguments to exit code. It is the only place that
// turns errors into exit codes and the one line on stderr that explains them.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == proc.GuardArg {
		if err := proc.RunGuard(args[1]); err != nil {
			return fail(stderr, err)
		}
		return exitOK
	}
	opts, err := parseOptions(args, stdout)
	if errors.Is(err, errHelp) {
		return exitOK
	}
	if err != nil {
		return fail(stderr, err)
	}
	// A lean build hands a run with --metrics-addr over to the build that
	// has metrics; it returns only if it could not.
	if err := handOffMetrics(opts); err != nil {
		return fail(stderr, err)
	}
	log, closeLog, err := newLogger(opts, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	defer closeLog()
	redisconn.SetLogger(log)

	var code int
	if opts.Status {
		err = showStatus(opts, stdout, log)
	} else {
		code, err = serve(opts, log)
	}
	if err != nil {
		if opts.LogFile != "" {
			log.Error().Err(err).Msg("w8y failed")
		}
		return fail(stderr, err)
	}
	return code
}

// fail prints err as one line on stderr and returns its exit code.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "w8y: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	return exitCode(err)
}

// exitCode maps an error from w8y to its documented exit code.
func exitCode(err error) int {
	switch {
	case errors.Is(err, ErrLockLost):
		return exitLockLost
	case errors.Is(err, ErrTimeout):
		return exitTimeout
	case errors.Is(err, proc.ErrNotExecutable):
		return exitNotExecutable
	case errors.Is(err, proc.ErrNotFound):
		return exitNotFound
	default:
		return exitFailure
	}
}

// serve sets up Redis, signals and the terminal, then runs the worker.
func serve(opts *Options, log zerolog.Logger) (int, error) {
	command, err := resolveCommand(opts.Command, opts.EnvVar, redisconn.WithoutSecrets(os.Environ()))
	if err != nil {
		return 0, err
	}
	command.Stdout, command.Stderr = os.Stdout, os.Stderr
	// Children that run at once cannot share one stdin or one terminal.
	if opts.Parallel == 1 {
		command.Stdin = os.Stdin
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
		return 0, err
	}
	defer client.Close()
	token, err := newToken()
	if err != nil {
		return 0, err
	}
	if opts.KeyPrefix == "" {
		log.Warn().Msg("no --key-prefix: using the keys 'list' and 'lock:<item>' at the top of the database")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, len(forwardedSignals))
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	router := newSignalRouter(log)
	routed := router.route(sigs, ctx.Done())
	defer func() {
		cancel()
		<-routed
	}()

	term := proc.TerminalOf(os.Stdin)
	if opts.Parallel > 1 {
		term = term.Kept()
	}
	if opts.Subreaper {
		if err := proc.BecomeSubreaper(); err != nil {
			return 0, fmt.Errorf("become a child subreaper: %w", err)
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
	spawn := proc.NewSpawner(term, reaper, holderVar+"="+token)
	defer spawn.Close()

	keys := Keys{Prefix: opts.KeyPrefix}
	var m *metrics
	var health *heartbeat
	if opts.MetricsAddr != "" {
		var stop func()
		m, health, stop, err = startMetrics(opts.MetricsAddr, client, keys, log)
		if err != nil {
			return 0, err
		}
		defer stop()
	}

	// One script may touch an item's lock, cooldown, backoff, state and
	// events keys together only where they live on one server.
	oneServer := redisconn.Colocated(client, keys.Prefix)
	record := &recorder{keys: keys, stateTTL: time.Duration(opts.StateTTL), oneScript: oneServer}
	if !opts.NoEvents {
		record.eventsMaxLen = opts.EventsMaxLen
	}
	finish := &finisher{
		client: client, record: record, jitter: jitterFactor,
		schedule: Schedule{Cooldown: time.Duration(opts.Cooldown), Backoff: opts.FailureBackoff},
	}
	w := &worker{
		opts: opts,
		rotator: &Rotator{
			Client: client, Keys: keys, Token: token, TTL: time.Duration(opts.KeyExpiry),
			MaxItemLen: command.maxItemLen(keys.Lock(""), proc.ArgMax()), Log: log,
			ServerScan: oneServer, Record: record, ReplicaAcks: opts.ReplicaAcks, Finisher: finish,
		},
		finisher: finish,
		command:  command,
		router:   router,
		spawn:    spawn,
		log:      log,
		metrics:  m,
		health:   health,
	}
	log.Debug().Str("list", keys.List()).Str("holder", token).Bool("continuous", opts.Continuous).Msg("w8y starting")
	return w.run(ctx)
}
