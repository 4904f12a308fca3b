// Command w8y runs an executable on one item of a circular Redis list at a
// time, holding the item's lock while the executable runs.
package main

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/w8y/w8y/internal/cli"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/logging"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/take"
)

// exitStatuses is the one table of w8y's exit codes, which --help, the man
// page and (checked by a test) docs/reference.md show. A code is the code, or the
// form of a family of codes ("N", "128+N").
var exitStatuses = []cli.ExitStatus[string]{
	{Code: "N", Meaning: "the child's exit code (with --parallel, the first child to end with a code other than 0)"},
	{Code: "128+N", Meaning: "the child was killed by signal N; in one-shot mode also: w8y got stop signal N before any child started"},
	{Code: strconv.Itoa(exitOK), Meaning: "no item could be taken (see --no-work-exit-code; also after --until-idle that took none), --continuous drained after a stop signal or ended after --max-items/--max-runtime/--until-idle, or every --parallel child exited 0"},
	{Code: strconv.Itoa(exitNoList), Meaning: "the list does not exist (or is empty: Redis keeps no empty list), in a one-shot run, a --continuous --until-idle one that took no item, or --status; --continuous waits for it"},
	{Code: strconv.Itoa(exitHeld), Meaning: "with --item, the lock, a --fleet-max-running place or a --fleet-rate start stayed unavailable for all of --wait; the command did not run"},
	{Code: strconv.Itoa(exitLockLost), Meaning: "the lock was lost while the child ran; the child was stopped"},
	{Code: strconv.Itoa(exitCancelled), Meaning: "a cancel request (w8yctl cancel) stopped the child (one-shot mode)"},
	{Code: strconv.Itoa(exitTimeout), Meaning: "the child ran past --timeout; it was stopped"},
	{Code: strconv.Itoa(exitFailure), Meaning: "w8y itself failed: bad option, bad URL, Redis unreachable or erroring, wrong password or certificate, lock not confirmed by --replica-acks replicas, wrong key type, a newer w8y's schema"},
	{Code: strconv.Itoa(exitNotExecutable), Meaning: "the executable was found but cannot be run (nor can its #! interpreter)"},
	{Code: strconv.Itoa(exitNotFound), Meaning: "the executable was not found (or its #! interpreter was not)"},
}

// statusExitNote follows the table: --status has codes of its own.
const statusExitNote = "With --status: 0, 120 when the list does not exist (but not with --watch), or 125 when it cannot be read."

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is w8y from its arguments and standard streams to its exit code. It is
// the only place that turns how w8y ended into an exit code (see exitCode)
// and into the one line on stderr that explains a failure.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		code, _ := exitCode(err, 0)
		return cli.Fail(stderr, "w8y", err, code)
	}
	if len(args) == 2 && args[0] == proc.GuardArg {
		if err := proc.RunGuard(args[1]); err != nil {
			return fail(err)
		}
		return exitOK
	}
	if len(args) == 1 && args[0] == proc.RelayArg {
		if err := proc.RunRelay(); err != nil {
			return fail(err)
		}
		return exitOK
	}
	// A write to a pipe whose reader has gone (w8y ... | head, a journald
	// that restarted) raises SIGPIPE, which would kill w8y mid-run and leave
	// its item's lock behind. Caught, it only makes the write fail with
	// EPIPE, which w8y's logs take as "logs gone" (see internal/logging). Caught
	// rather than ignored, because children inherit an ignored SIGPIPE and
	// expect to die of one; a caught one is reset for them. This is the
	// only place that sets it, once for the whole process: the channel is
	// never read, and os/signal drops what does not fit.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)

	opts, err := parseOptions(args, stdout)
	if errors.Is(err, errHelp) {
		return exitOK
	}
	if err != nil {
		return fail(err)
	}
	// A lean build hands a run with --metrics-addr over to the build that
	// has metrics; it returns only if it could not.
	if err := handOffMetrics(opts, args); err != nil {
		return fail(err)
	}
	log, closeLog, err := logging.New(opts.logging(), stderr)
	if err != nil {
		return fail(err)
	}
	defer closeLog()
	redisconn.SetLogger(log)

	if opts.Status {
		err = showStatus(opts, stdout, log)
	} else {
		err = runWorker(opts, stdin, stdout, stderr, log)
	}
	code, explain := exitCode(err, opts.NoWorkExitCode)
	if explain {
		if opts.LogFile != "" {
			log.Error().Err(err).Msg("w8y failed")
		}
		cli.PrintLine(stderr, "w8y", err)
	}
	return code
}

// exitCode maps how w8y ended to its exit code (see exitStatuses), and says
// whether err is a failure to explain on stderr: not so for a child's own
// code, a stop signal or an empty pass, which the child or the log tell of.
// noWork is --no-work-exit-code.
func exitCode(err error, noWork int) (code int, explain bool) {
	var child *childExitError
	var stop jobctl.StopError
	switch {
	case err == nil:
		return exitOK, false
	case errors.As(err, &child):
		return child.end.Exit.Code, false
	case errors.As(err, &stop):
		return 128 + int(stop.Signal), false
	case errors.Is(err, take.ErrNoWork):
		return noWork, false
	case errors.Is(err, schema.ErrNoList):
		return exitNoList, true
	// A run that timed out, lost its lock or was cancelled was told of
	// when it ended (see reportedFailure), as every failed run is.
	case errors.Is(err, take.ErrHeld):
		return exitHeld, true
	case errors.Is(err, lease.ErrLost):
		return exitLockLost, false
	case errors.Is(err, ErrTimeout):
		return exitTimeout, false
	case errors.Is(err, ErrCancelled):
		return exitCancelled, false
	case errors.Is(err, proc.ErrNotExecutable):
		return exitNotExecutable, true
	case errors.Is(err, proc.ErrNotFound):
		return exitNotFound, true
	}
	return exitFailure, true
}
