package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/runs"
	"github.com/w8y/w8y/internal/schema"
)

// Options holds everything w8y can be told on its command line or through
// W8Y_* environment variables. A flag on the command line beats the variable.
type Options struct {
	redisconn.Options
	ReplicaAcks     int           `long:"replica-acks" env:"W8Y_REPLICA_ACKS" default:"0" value-name:"N" description:"Run a child only once N replicas have its lock, and count a refresh only once N have it (WAIT), so that a failover cannot lose a lock; not with --redis-cluster"`
	KeyPrefix       string        `short:"k" long:"key-prefix" env:"W8Y_KEY_PREFIX" value-name:"PREFIX" description:"Prefix for all keys, forced to end in ':'; the list is <prefix>list, locks are <prefix>lock:<item>"`
	KeyExpiry       duration.Flag `short:"x" long:"key-expiry" env:"W8Y_KEY_EXPIRY" default:"5" value-name:"EXPIRY" description:"Lock expiry: seconds, or a Go duration such as 1500ms; the lock is refreshed about every third of it"`
	EnvVar          string        `short:"e" long:"env-var" env:"W8Y_ENV_VAR" value-name:"NAME" description:"Environment variable to set to the work item, besides W8Y_ITEM"`
	Continuous      bool          `short:"c" long:"continuous" env:"W8Y_CONTINUOUS" description:"Keep taking items until stopped, instead of running one item"`
	ExitCodes       []int         `short:"i" long:"exit-codes" env:"W8Y_EXIT_CODES" env-delim:"," default:"0" value-name:"CODE" description:"Child exit code that lets --continuous go on to the next item (repeatable)"`
	Quiet           bool          `short:"q" long:"quiet" env:"W8Y_QUIET" description:"Silence w8y's own logs, leaving the child's stdout and stderr alone"`
	LogFile         string        `short:"f" long:"log-file" env:"W8Y_LOG_FILE" value-name:"PATH" description:"Append w8y's logs to this file instead of stderr"`
	NoLogTimestamps bool          `short:"t" long:"no-log-timestamps" env:"W8Y_NO_LOG_TIMESTAMPS" description:"Leave timestamps out of log lines"`
	LogFormat       string        `long:"log-format" env:"W8Y_LOG_FORMAT" default:"console" choice:"console" choice:"json" description:"Log format"`
	LogLevel        string        `long:"log-level" env:"W8Y_LOG_LEVEL" default:"info" choice:"debug" choice:"info" choice:"warn" choice:"error" description:"Least severe log level written"`
	Timeout         duration.Flag `long:"timeout" env:"W8Y_TIMEOUT" value-name:"DURATION" description:"Stop a child still running after DURATION (SIGTERM to its group, SIGKILL after --kill-after) and exit 124; 0 means never"`
	KillAfter       killAfterFlag `long:"kill-after" env:"W8Y_KILL_AFTER" value-name:"DURATION" default-mask:"-" description:"Grace between SIGTERM and SIGKILL when w8y stops a child's group itself (timeout, lock lost, processes left behind); at most a third of --key-expiry, so a group whose lock is being lost is gone before the lock could expire (default: 10s, or a third of --key-expiry if less)"`
	Subreaper       bool          `long:"subreaper" env:"W8Y_SUBREAPER" description:"Become a child subreaper: processes that a child orphans are re-parented to w8y, which reaps them (always on when w8y is PID 1)"`
	NoWorkExitCode  int           `long:"no-work-exit-code" env:"W8Y_NO_WORK_EXIT_CODE" default:"0" value-name:"CODE" description:"Exit code when no item could be taken"`
	IdleWait        duration.Flag `long:"idle-wait" env:"W8Y_IDLE_WAIT" default:"1s" value-name:"DURATION" description:"With --continuous, the pause (with jitter) after a pass that found nothing"`
	Cooldown        duration.Flag `long:"cooldown" env:"W8Y_COOLDOWN" value-name:"DURATION" description:"After a successful run, the item is not run anywhere until DURATION has passed (the key <prefix>cooldown:<item>); 0 means no cooldown"`
	FailureBackoff  runs.Backoff  `long:"failure-backoff" env:"W8Y_FAILURE_BACKOFF" value-name:"MIN[,MAX]" description:"After a failed run (exit code not in --exit-codes, timeout, lost lock), the item waits MIN, doubling with each consecutive failure up to MAX (default 10 x MIN), less up to a quarter of jitter (the key <prefix>backoff:<item>)"`
	StopOnFailure   bool          `long:"stop-on-failure" env:"W8Y_STOP_ON_FAILURE" description:"With --continuous, exit after a failed run (the default, unless --failure-backoff is given)"`
	Parallel        int           `long:"parallel" env:"W8Y_PARALLEL" default:"1" value-name:"N" description:"Run up to N children at once, each on its own item; in one-shot mode, take up to N items from one pass"`
	MaxItems        int           `long:"max-items" env:"W8Y_MAX_ITEMS" value-name:"N" description:"With --continuous, stop taking items after N, let the running ones finish and exit 0; 0 means no limit"`
	MaxRuntime      duration.Flag `long:"max-runtime" env:"W8Y_MAX_RUNTIME" value-name:"DURATION" description:"With --continuous, stop taking items after DURATION, let the running ones finish and exit 0; 0 means no limit"`
	StateTTL        duration.Flag `long:"state-ttl" env:"W8Y_STATE_TTL" default:"168h" value-name:"DURATION" description:"How long an item's state hash (<prefix>state:<item>: last start and end, exit code, runs, failures, consecutive failures) and the events stream live after their last write"`
	NoEvents        bool          `long:"no-events" env:"W8Y_NO_EVENTS" description:"Add no entries to the events stream <prefix>events"`
	EventsMaxLen    int64         `long:"events-max-len" env:"W8Y_EVENTS_MAX_LEN" default:"10000" value-name:"N" description:"Keep about this many entries in the events stream (XADD MAXLEN ~ N)"`
	MetricsAddr     string        `long:"metrics-addr" env:"W8Y_METRICS_ADDR" value-name:"HOST:PORT" description:"Serve Prometheus metrics on /metrics and a health check on /healthz at this address"`
	Status          bool          `long:"status" description:"Show every item in list order with its lock, cooldown or backoff, and last run, then exit; needs no executable"`
	JSON            bool          `long:"json" env:"W8Y_JSON" description:"With --status, print JSON instead of a table"`
	Watch           duration.Flag `long:"watch" env:"W8Y_WATCH" optional:"true" optional-value:"2s" value-name:"INTERVAL" description:"With --status, show it again every INTERVAL (default 2s) until interrupted"`
	Version         bool          `long:"version" description:"Print the version and commit, and exit"`
	ManPage         bool          `long:"man-page" hidden:"true" description:"Print w8y's man page in troff and exit (make man)"`

	// Command is the executable followed by its arguments.
	Command []string `no-flag:"true"`
}

// killAfterFlag is --kill-after, whose default depends on --key-expiry: it
// must know whether it was given at all, whatever value it was given.
type killAfterFlag = duration.Optional

// minKeyExpiry is the shortest lock expiry accepted: below it, a refresh every
// third of the expiry would compete with ordinary network latency.
const minKeyExpiry = 100 * time.Millisecond

// defaultKillAfter is --kill-after when it is not given and the key expiry
// allows it: time for a child to save its work, not for it to dawdle.
const defaultKillAfter = 10 * time.Second

// minIdleWait is the shortest --idle-wait accepted, so that an idle
// --continuous worker can never spin on Redis.
const minIdleWait = 10 * time.Millisecond

// minBackoff is the shortest MIN of --failure-backoff: below it, a failing
// item would be retried about as fast as without a backoff.
const minBackoff = 10 * time.Millisecond

// errUsage marks a problem with the command line or environment options.
var errUsage = errors.New("usage")

// usageErr is an errUsage whose message needs no "usage" prefix.
type usageErr struct{ msg string }

func (e usageErr) Error() string        { return e.msg }
func (e usageErr) Is(target error) bool { return target == errUsage }

// usageError returns an errUsage with a formatted message.
func usageError(format string, args ...any) error {
	return usageErr{msg: fmt.Sprintf(format, args...)}
}

// errHelp is returned by parseOptions after --help, --version, the man page
// or shell completions were served.
var errHelp = errors.New("help shown")

// parseOptions reads options from args and the W8Y_* environment. Parsing
// stops at the first argument that is not an option (the executable), so the
// executable's own flags reach it untouched; "--" works too. Help and version
// output go to stdout, and errHelp reports that nothing else should run.
func parseOptions(args []string, stdout io.Writer) (*Options, error) {
	opts := Options{}
	parser := flags.NewParser(&opts, flags.HelpFlag|flags.PassDoubleDash|flags.PassAfterNonOption)
	parser.Name = "w8y"
	parser.Usage = "[OPTIONS] [--] executable [args...]"
	// Shell completion (see README): with GO_FLAGS_COMPLETION set, go-flags
	// completes args instead of parsing them. Its own handler would exit
	// the process, which only main may do.
	completed := false
	parser.CompletionHandler = func(items []flags.Completion) {
		for _, item := range items {
			fmt.Fprintln(stdout, item.Item)
		}
		completed = true
	}
	rest, err := parser.ParseArgs(args)
	if completed {
		return nil, errHelp
	}
	if err != nil {
		var ferr *flags.Error
		if errors.As(err, &ferr) && ferr.Type == flags.ErrHelp {
			parser.WriteHelp(stdout)
			writeHelpFooter(stdout)
			return nil, errHelp
		}
		return nil, usageError("%s (see w8y --help)", strings.ReplaceAll(err.Error(), "`", "'"))
	}
	if opts.Version {
		fmt.Fprintf(stdout, "w8y %s (commit %s)\n", version, commit)
		return nil, errHelp
	}
	if opts.ManPage {
		writeManPage(parser, stdout)
		return nil, errHelp
	}
	opts.Command = rest
	opts.ReadSecrets(os.Getenv)
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &opts, nil
}

// helpArguments follows the generated option list in --help, before the
// exit codes.
const helpArguments = `
Arguments:
  executable is run directly (no shell) with {} in any argument replaced by
  the item; W8Y_ITEM and W8Y_LOCK_KEY are set in its environment.
`

// durationsHelp says how every duration option is written (see
// internal/duration), in --help and the man page.
const durationsHelp = "A DURATION is a number of seconds (5, 0.5, 1e-3) or numbers with units, as in 1500ms, 2h45m or 30d; the units are " +
	duration.Units + ". inf, or anything longer than about 292 years, is forever: no limit at all for --timeout and --max-runtime. " +
	"A duration shorter than a nanosecond but not zero is a nanosecond."

// writeHelpFooter writes what follows the option list in --help: the
// arguments and the table of exit codes, each meaning wrapped to fit 80
// columns beside its code.
func writeHelpFooter(w io.Writer) {
	fmt.Fprint(w, helpArguments)
	fmt.Fprint(w, "\nDurations:\n")
	for _, line := range wrap(durationsHelp, 78) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	fmt.Fprint(w, "\nExit codes:\n")
	const indent = "           "
	for _, st := range exitStatuses {
		for i, line := range wrap(st.Meaning, 80-len(indent)) {
			if i == 0 {
				fmt.Fprintf(w, "  %-8s %s\n", st.Code, line)
			} else {
				fmt.Fprintf(w, "%s%s\n", indent, line)
			}
		}
	}
	fmt.Fprintf(w, "  %s\n", statusExitNote)
}

// wrap breaks text into lines of at most width bytes at spaces (a longer
// word gets a line of its own).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// validate checks the options that go-flags cannot check by itself. It
// normalises KeyPrefix as a side effect.
func (o *Options) validate() error {
	if err := o.validateRecord(); err != nil {
		return err
	}
	if o.Status {
		if len(o.Command) > 0 {
			return usageError("--status takes no executable, got %q", o.Command[0])
		}
		if o.Watch < 0 || (o.Watch > 0 && time.Duration(o.Watch) < minWatch) {
			return usageError("--watch must be at least %s, got %s", minWatch, o.Watch)
		}
		o.KeyPrefix = schema.NormalizePrefix(o.KeyPrefix)
		return nil
	}
	if o.JSON || o.Watch != 0 {
		return usageError("--json and --watch go with --status")
	}
	if len(o.Command) == 0 {
		return usageError("missing executable (usage: w8y [OPTIONS] [--] executable [args...])")
	}
	if o.Command[0] == "" {
		return usageError("the executable name is empty")
	}
	if time.Duration(o.KeyExpiry) < minKeyExpiry {
		return usageError("--key-expiry must be at least %s, got %s", minKeyExpiry, o.KeyExpiry)
	}
	if o.Timeout < 0 {
		return usageError("--timeout must not be negative, got %s", o.Timeout)
	}
	// A child whose lock is being lost gets SIGTERM, then SIGKILL after
	// --kill-after, and must be gone before the server could expire the lock
	// and let another host take the item. Refreshes every third of the
	// expiry leave about two thirds to notice the loss and stop the child;
	// a third keeps room for the refresh retries and the margin.
	maxKillAfter := duration.Flag(time.Duration(o.KeyExpiry) / 3)
	switch {
	case !o.KillAfter.Given:
		o.KillAfter.Flag = min(duration.Flag(defaultKillAfter), maxKillAfter)
	case o.KillAfter.Flag < 0:
		return usageError("--kill-after must not be negative, got %s", o.KillAfter)
	case o.KillAfter.Flag > maxKillAfter:
		fix := "lower --kill-after"
		// An expiry three times as long exists only for a --kill-after
		// that can be counted three times over.
		if time.Duration(o.KillAfter.Flag) <= duration.Forever/3 {
			fix += fmt.Sprintf(" or raise --key-expiry to %s or more", 3*time.Duration(o.KillAfter.Flag))
		}
		return usageError("--kill-after %s cannot fit in --key-expiry %s: a child whose lock is lost must be killed before the lock expires, so --kill-after may be at most a third of --key-expiry (%s); %s",
			o.KillAfter, o.KeyExpiry, maxKillAfter, fix)
	}
	if time.Duration(o.IdleWait) < minIdleWait {
		return usageError("--idle-wait must be at least %s, got %s", minIdleWait, o.IdleWait)
	}
	if o.Cooldown < 0 {
		return usageError("--cooldown must not be negative, got %s", o.Cooldown)
	}
	if o.Cooldown > 0 && time.Duration(o.Cooldown) < time.Millisecond {
		return usageError("--cooldown must be 0 or at least 1ms, got %s: Redis keeps expiries in milliseconds", o.Cooldown)
	}
	if b := o.FailureBackoff; b != (runs.Backoff{}) {
		if b.Min < minBackoff {
			return usageError("--failure-backoff MIN must be at least %s, got %s", minBackoff, duration.Format(b.Min))
		}
		if b.Max < b.Min {
			return usageError("--failure-backoff MAX %s is less than MIN %s", duration.Format(b.Max), duration.Format(b.Min))
		}
		// The count that doubles the delay lives in the state hash: were it
		// to expire while the item waits, the next failure would start over
		// at MIN.
		if b.Max > time.Duration(o.StateTTL) {
			return usageError("--failure-backoff MAX %s is longer than --state-ttl %s, which would forget the consecutive failures that the delay doubles with", duration.Format(b.Max), o.StateTTL)
		}
	}
	if o.Parallel < 1 {
		return usageError("--parallel must be at least 1, got %d", o.Parallel)
	}
	if o.MaxItems < 0 {
		return usageError("--max-items must not be negative, got %d", o.MaxItems)
	}
	if o.MaxRuntime < 0 {
		return usageError("--max-runtime must not be negative, got %s", o.MaxRuntime)
	}
	if !o.Continuous && (o.MaxItems > 0 || o.MaxRuntime > 0) {
		return usageError("--max-items and --max-runtime bound a --continuous worker; a one-shot run takes at most --parallel items")
	}
	if o.NoWorkExitCode < 0 || o.NoWorkExitCode > 255 {
		return usageError("--no-work-exit-code must be 0-255, got %d", o.NoWorkExitCode)
	}
	for _, code := range o.ExitCodes {
		if code < 0 || code > 255 {
			return usageError("--exit-codes must be 0-255, got %d", code)
		}
	}
	if o.EnvVar != "" && (strings.ContainsAny(o.EnvVar, "=\x00") || o.EnvVar != strings.TrimSpace(o.EnvVar)) {
		return usageError("--env-var %q is not a valid environment variable name", o.EnvVar)
	}
	if err := o.Options.Validate(); err != nil {
		return usageError("%s", err)
	}
	if o.ReplicaAcks < 0 {
		return usageError("--replica-acks must not be negative, got %d", o.ReplicaAcks)
	}
	// WAIT counts the replicas of the writes made on its own connection,
	// and a Cluster client cannot send it on the connection that took a
	// lock: it would count nothing, and promise what it cannot keep.
	if o.ReplicaAcks > 0 && o.Cluster {
		return usageError("--replica-acks does not work with --redis-cluster")
	}
	o.KeyPrefix = schema.NormalizePrefix(o.KeyPrefix)
	return nil
}

// stopsOnFailure reports whether a --continuous worker exits after a failed
// run: asked for, or the old behaviour where no --failure-backoff keeps a
// failing item from being retried in a tight loop.
func (o *Options) stopsOnFailure() bool {
	return o.StopOnFailure || o.FailureBackoff == (runs.Backoff{})
}

// validateRecord checks the options of the state hash and events stream.
func (o *Options) validateRecord() error {
	if time.Duration(o.StateTTL) < minStateTTL {
		return usageError("--state-ttl must be at least %s, got %s", minStateTTL, o.StateTTL)
	}
	if o.EventsMaxLen < 1 {
		return usageError("--events-max-len must be at least 1, got %d (--no-events turns events off)", o.EventsMaxLen)
	}
	return nil
}

// minStateTTL is the shortest --state-ttl accepted: a state hash that
// expires sooner would vanish between an item's start and its end.
const minStateTTL = time.Minute

// minWatch is the shortest --watch interval: each refresh reads every item,
// and a status screen needs no more than a few a second.
const minWatch = 100 * time.Millisecond

// writeManPage writes the man page that make man installs, generated from
// the options so that it cannot drift from them.
func writeManPage(parser *flags.Parser, w io.Writer) {
	parser.ShortDescription = "run a command on items from a circular Redis list, one holder per item"
	parser.LongDescription = manDescription + "\n\n" + durationsHelp
	parser.WriteManPage(w)
	writeManExitStatus(w)
}

// manDescription is the man page's DESCRIPTION.
const manDescription = `w8y takes one work item from the circular Redis list <prefix>list, rotating it (never removing an item) until it can take an item's lock <prefix>lock:<item>, runs the executable with {} in its arguments replaced by the item, keeps the lock alive while it runs, releases it and exits with the child's code. With --continuous it keeps going until stopped. Every option can also be given as a W8Y_* environment variable; a flag on the command line wins.

w8y --status shows every item with its lock holder, cooldown or backoff and last run, from the state hashes <prefix>state:<item> that runs leave behind; each start and end is also added to the stream <prefix>events.

With --cooldown and --failure-backoff, runs pause their items across the fleet with the keys <prefix>cooldown:<item> and <prefix>backoff:<item>, which every worker honours; --parallel runs several children at once. Redis may be one server (redis://, rediss://, unix://), a Cluster (--redis-cluster) or a Sentinel group (--sentinel-master); the password comes from W8Y_REDIS_PASSWORD or --redis-password-file.

See the README for the key layout, the schedule, the Redis deployments and the ACL rule, the events' fields, the metrics and the service files.`

// writeManExitStatus writes the man page's EXIT STATUS from the table.
func writeManExitStatus(w io.Writer) {
	fmt.Fprintln(w, ".SH EXIT STATUS")
	for _, st := range exitStatuses {
		fmt.Fprintf(w, ".TP\n\\fB%s\\fP\n%s\n", st.Code, troff(st.Meaning))
	}
	fmt.Fprintf(w, ".PP\n%s\n", troff(statusExitNote))
}

// troff escapes text for a man page: a hyphen is \- there, and a line
// that starts with a dot or a quote would be read as a request.
func troff(text string) string {
	text = strings.ReplaceAll(text, `\`, `\e`)
	text = strings.ReplaceAll(text, "-", `\-`)
	if strings.HasPrefix(text, ".") || strings.HasPrefix(text, "'") {
		text = `\&` + text
	}
	return text
}
