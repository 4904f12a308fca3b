package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	flags "github.com/jessevdk/go-flags"
)

// Options holds everything w8y can be told on its command line or through
// W8Y_* environment variables. A flag on the command line beats the variable.
type Options struct {
	RedisURL        string   `short:"u" long:"redis-url" env:"W8Y_REDIS_URL" default:"redis://localhost:6379" value-name:"URL" description:"Redis URL to connect to: redis://[user:password@]host:port[/db]"`
	KeyPrefix       string   `short:"k" long:"key-prefix" env:"W8Y_KEY_PREFIX" value-name:"PREFIX" description:"Prefix for all keys, forced to end in ':'; the list is <prefix>list, locks are <prefix>lock:<item>"`
	KeyExpiry       Duration `short:"x" long:"key-expiry" env:"W8Y_KEY_EXPIRY" default:"5" value-name:"EXPIRY" description:"Lock expiry: seconds, or a Go duration such as 1500ms; the lock is refreshed about every third of it"`
	EnvVar          string   `short:"e" long:"env-var" env:"W8Y_ENV_VAR" value-name:"NAME" description:"Environment variable to set to the work item, besides W8Y_ITEM"`
	Continuous      bool     `short:"c" long:"continuous" env:"W8Y_CONTINUOUS" description:"Keep taking items until stopped, instead of running one item"`
	ExitCodes       []int    `short:"i" long:"exit-codes" env:"W8Y_EXIT_CODES" env-delim:"," default:"0" value-name:"CODE" description:"Child exit code that lets --continuous go on to the next item (repeatable)"`
	Quiet           bool     `short:"q" long:"quiet" env:"W8Y_QUIET" description:"Silence w8y's own logs, leaving the child's stdout and stderr alone"`
	LogFile         string   `short:"f" long:"log-file" env:"W8Y_LOG_FILE" value-name:"PATH" description:"Append w8y's logs to this file instead of stderr"`
	NoLogTimestamps bool     `short:"t" long:"no-log-timestamps" env:"W8Y_NO_LOG_TIMESTAMPS" description:"Leave timestamps out of log lines"`
	LogFormat       string   `long:"log-format" env:"W8Y_LOG_FORMAT" default:"console" choice:"console" choice:"json" description:"Log format"`
	LogLevel        string   `long:"log-level" env:"W8Y_LOG_LEVEL" default:"info" choice:"debug" choice:"info" choice:"warn" choice:"error" description:"Least severe log level written"`
	Timeout         Duration `long:"timeout" env:"W8Y_TIMEOUT" value-name:"DURATION" description:"Stop a child still running after DURATION (SIGTERM to its group, SIGKILL after --kill-after) and exit 124; 0 means never"`
	KillAfter       Duration `long:"kill-after" env:"W8Y_KILL_AFTER" value-name:"DURATION" description:"Grace between SIGTERM and SIGKILL when w8y stops a child's group itself (timeout, lock lost, processes left behind); at most a third of --key-expiry, so a group whose lock is being lost is gone before the lock could expire (default: 10s, or a third of --key-expiry if less)"`
	Subreaper       bool     `long:"subreaper" env:"W8Y_SUBREAPER" description:"Become a child subreaper: processes that a child orphans are re-parented to w8y, which reaps them (always on when w8y is PID 1)"`
	NoWorkExitCode  int      `long:"no-work-exit-code" env:"W8Y_NO_WORK_EXIT_CODE" default:"0" value-name:"CODE" description:"Exit code when no item could be taken"`
	IdleWait        Duration `long:"idle-wait" env:"W8Y_IDLE_WAIT" default:"1s" value-name:"DURATION" description:"With --continuous, the pause (with jitter) after a pass that found nothing"`
	Cooldown        Duration `long:"cooldown" env:"W8Y_COOLDOWN" value-name:"DURATION" description:"After a successful run, the item is not run anywhere until DURATION has passed (the key <prefix>cooldown:<item>); 0 means no cooldown"`
	FailureBackoff  Backoff  `long:"failure-backoff" env:"W8Y_FAILURE_BACKOFF" value-name:"MIN[,MAX]" description:"After a failed run (exit code not in --exit-codes, timeout, lost lock), the item waits MIN, doubling with each consecutive failure up to MAX (default 10 x MIN), less up to a quarter of jitter (the key <prefix>backoff:<item>)"`
	StopOnFailure   bool     `long:"stop-on-failure" env:"W8Y_STOP_ON_FAILURE" description:"With --continuous, exit after a failed run (the default, unless --failure-backoff is given)"`
	Parallel        int      `long:"parallel" env:"W8Y_PARALLEL" default:"1" value-name:"N" description:"Run up to N children at once, each on its own item; in one-shot mode, take up to N items from one pass"`
	MaxItems        int      `long:"max-items" env:"W8Y_MAX_ITEMS" value-name:"N" description:"With --continuous, stop taking items after N, let the running ones finish and exit 0; 0 means no limit"`
	MaxRuntime      Duration `long:"max-runtime" env:"W8Y_MAX_RUNTIME" value-name:"DURATION" description:"With --continuous, stop taking items after DURATION, let the running ones finish and exit 0; 0 means no limit"`
	Version         bool     `long:"version" description:"Print the version and exit"`

	// Command is the executable followed by its arguments.
	Command []string `no-flag:"true"`
}

// Duration is a flag value given in seconds ("5", "0.5") or as a Go
// duration ("1500ms"). Plain numbers are seconds because the first w8y took
// --key-expiry in whole seconds.
type Duration time.Duration

// UnmarshalFlag implements flags.Unmarshaler.
func (d *Duration) UnmarshalFlag(value string) error {
	if secs, err := strconv.ParseFloat(value, 64); err == nil {
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	parsed, err := time.ParseDuration(value)
	if err != nil {
		return fmt.Errorf("%q is neither seconds nor a duration such as 1500ms", value)
	}
	*d = Duration(parsed)
	return nil
}

// MarshalFlag implements flags.Marshaler, so --help shows defaults readably.
func (d Duration) MarshalFlag() (string, error) { return time.Duration(d).String(), nil }

// Backoff is --failure-backoff: MIN[,MAX], each a Duration. Its zero value
// means no backoff.
type Backoff struct {
	Min, Max time.Duration
}

// backoffMaxFactor makes the default MAX of --failure-backoff: ten times MIN
// is four doublings and a bit, so a broken item settles at a retry every
// few minutes for a MIN of seconds, without being forgotten for hours.
const backoffMaxFactor = 10

// UnmarshalFlag implements flags.Unmarshaler.
func (b *Backoff) UnmarshalFlag(value string) error {
	minText, maxText, hasMax := strings.Cut(value, ",")
	var lo, hi Duration
	if err := lo.UnmarshalFlag(strings.TrimSpace(minText)); err != nil {
		return err
	}
	hi = lo * backoffMaxFactor
	if hasMax {
		if err := hi.UnmarshalFlag(strings.TrimSpace(maxText)); err != nil {
			return err
		}
	}
	*b = Backoff{Min: time.Duration(lo), Max: time.Duration(hi)}
	return nil
}

// MarshalFlag implements flags.Marshaler.
func (b Backoff) MarshalFlag() (string, error) {
	if b == (Backoff{}) {
		return "", nil
	}
	return b.Min.String() + "," + b.Max.String(), nil
}

// minKeyExpiry is the shortest lock expiry accepted: below it, a refresh every
// third of the expiry would compete with ordinary network latency.
const minKeyExpiry = 100 * time.Millisecond

// defaultKillAfter is --kill-after when it is not given and the key expiry
// allows it: time for a child to save its work, not for it to dawdle.
const defaultKillAfter = 10 * time.Second

// unsetDuration marks a Duration option that was not given at all.
const unsetDuration = Duration(math.MinInt64)

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

// errHelp is returned by parseOptions after --help or --version was served.
var errHelp = errors.New("help shown")

// parseOptions reads options from args and the W8Y_* environment. Parsing
// stops at the first argument that is not an option (the executable), so the
// executable's own flags reach it untouched; "--" works too. Help and version
// output go to stdout, and errHelp reports that nothing else should run.
func parseOptions(args []string, stdout io.Writer) (*Options, error) {
	opts := Options{KillAfter: unsetDuration}
	parser := flags.NewParser(&opts, flags.HelpFlag|flags.PassDoubleDash|flags.PassAfterNonOption)
	parser.Name = "w8y"
	parser.Usage = "[OPTIONS] [--] executable [args...]"
	rest, err := parser.ParseArgs(args)
	if err != nil {
		var ferr *flags.Error
		if errors.As(err, &ferr) && ferr.Type == flags.ErrHelp {
			parser.WriteHelp(stdout)
			fmt.Fprint(stdout, helpFooter)
			return nil, errHelp
		}
		return nil, usageError("%s (see w8y --help)", strings.ReplaceAll(err.Error(), "`", "'"))
	}
	if opts.Version {
		fmt.Fprintf(stdout, "w8y %s\n", version)
		return nil, errHelp
	}
	opts.Command = rest
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &opts, nil
}

// helpFooter follows the generated option list in --help.
const helpFooter = `
Arguments:
  executable is run directly (no shell) with {} in any argument replaced by
  the item; W8Y_ITEM and W8Y_LOCK_KEY are set in its environment.

Exit codes:
  N        the child's exit code (with --parallel, the first child to end with a code other than 0)
  128+N    the child was killed by signal N
  0        no item could be taken (see --no-work-exit-code), --continuous drained after SIGTERM/SIGINT
           or ended after --max-items/--max-runtime, or every --parallel child exited 0
  122      the lock was lost while the child ran; the child was stopped
  124      the child ran past --timeout; it was stopped
  125      w8y itself failed: bad option, bad URL, Redis unreachable or erroring, wrong key type
  126      the executable was found but cannot be run
  127      the executable was not found
`

// validate checks the options that go-flags cannot check by itself. It
// normalises KeyPrefix as a side effect.
func (o *Options) validate() error {
	if len(o.Command) == 0 {
		return usageError("missing executable (usage: w8y [OPTIONS] [--] executable [args...])")
	}
	if o.Command[0] == "" {
		return usageError("the executable name is empty")
	}
	if time.Duration(o.KeyExpiry) < minKeyExpiry {
		return usageError("--key-expiry must be at least %s, got %s", minKeyExpiry, time.Duration(o.KeyExpiry))
	}
	if o.Timeout < 0 {
		return usageError("--timeout must not be negative, got %s", time.Duration(o.Timeout))
	}
	// A child whose lock is being lost gets SIGTERM, then SIGKILL after
	// --kill-after, and must be gone before the server could expire the lock
	// and let another host take the item. Refreshes every third of the
	// expiry leave about two thirds to notice the loss and stop the child;
	// a third keeps room for the refresh retries and the margin.
	maxKillAfter := Duration(time.Duration(o.KeyExpiry) / 3)
	switch {
	case o.KillAfter == unsetDuration:
		o.KillAfter = min(Duration(defaultKillAfter), maxKillAfter)
	case o.KillAfter < 0:
		return usageError("--kill-after must not be negative, got %s", time.Duration(o.KillAfter))
	case o.KillAfter > maxKillAfter:
		return usageError("--kill-after %s cannot fit in --key-expiry %s: a child whose lock is lost must be killed before the lock expires, so --kill-after may be at most a third of --key-expiry (%s); lower --kill-after or raise --key-expiry to %s or more",
			time.Duration(o.KillAfter), time.Duration(o.KeyExpiry), time.Duration(maxKillAfter), 3*time.Duration(o.KillAfter))
	}
	if time.Duration(o.IdleWait) < minIdleWait {
		return usageError("--idle-wait must be at least %s, got %s", minIdleWait, time.Duration(o.IdleWait))
	}
	if o.Cooldown < 0 {
		return usageError("--cooldown must not be negative, got %s", time.Duration(o.Cooldown))
	}
	if o.Cooldown > 0 && time.Duration(o.Cooldown) < time.Millisecond {
		return usageError("--cooldown must be 0 or at least 1ms, got %s: Redis keeps expiries in milliseconds", time.Duration(o.Cooldown))
	}
	if b := o.FailureBackoff; b != (Backoff{}) {
		if b.Min < minBackoff {
			return usageError("--failure-backoff MIN must be at least %s, got %s", minBackoff, b.Min)
		}
		if b.Max < b.Min {
			return usageError("--failure-backoff MAX %s is less than MIN %s", b.Max, b.Min)
		}
	}
	if o.Parallel < 1 {
		return usageError("--parallel must be at least 1, got %d", o.Parallel)
	}
	if o.MaxItems < 0 {
		return usageError("--max-items must not be negative, got %d", o.MaxItems)
	}
	if o.MaxRuntime < 0 {
		return usageError("--max-runtime must not be negative, got %s", time.Duration(o.MaxRuntime))
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
	o.KeyPrefix = normalizePrefix(o.KeyPrefix)
	return nil
}

// stopsOnFailure reports whether a --continuous worker exits after a failed
// run: asked for, or the old behaviour where no --failure-backoff keeps a
// failing item from being retried in a tight loop.
func (o *Options) stopsOnFailure() bool {
	return o.StopOnFailure || o.FailureBackoff == (Backoff{})
}

// normalizePrefix forces a non-empty prefix to end in ':', as the first w8y
// did, so "-k work" and "-k work:" name the same keys.
func normalizePrefix(prefix string) string {
	if prefix == "" || strings.HasSuffix(prefix, ":") {
		return prefix
	}
	return prefix + ":"
}
