package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/logging"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/settings"
	"github.com/w8y/w8y/internal/status"
	"github.com/w8y/w8y/internal/take"
)

// Options holds everything w8y can be told on its command line or through
// W8Y_* environment variables. A flag on the command line beats the
// variable. The options come in groups, by concern, which --help and the
// man page show as they are here; each has a short description for --help
// and, in the tag details, what the man page adds.
type Options struct {
	RedisOptions      `group:"Redis"`
	ItemOptions       `group:"Items and locks"`
	ChildOptions      `group:"The child"`
	ContinuousOptions `group:"Continuous mode"`
	ScheduleOptions   `group:"Scheduling across the fleet"`
	RecordOptions     `group:"Records and metrics"`
	LogOptions        `group:"Logging"`
	StatusOptions     `group:"Status"`
	OtherOptions      `group:"Other"`

	// Command is the executable followed by its arguments.
	Command []string `no-flag:"true"`
}

type RedisOptions struct {
	redisconn.Options
	AllowEviction bool `long:"allow-eviction" env:"W8Y_ALLOW_EVICTION" description:"Run on a Redis that may evict keys (risky)" details:"Run even where Redis may evict keys when it is full (a maxmemory with a maxmemory-policy other than noeviction), which w8y otherwise refuses: an evicted lock lets a second worker run the same item at once, and the list itself may be evicted. w8y logs each rise of Redis' evicted_keys while it runs."`
	ReplicaAcks   int  `long:"replica-acks" env:"W8Y_REPLICA_ACKS" default:"0" value-name:"N" description:"Run only on locks that N replicas have (WAIT)" details:"Run a child only once N replicas have confirmed its lock (WAIT), and count a refresh only once N confirm it, so that a failover cannot lose a lock. Not with --redis-cluster."`
}

type ItemOptions struct {
	KeyPrefix      string        `short:"k" long:"key-prefix" env:"W8Y_KEY_PREFIX" value-name:"PREFIX" description:"Prefix of all keys: <prefix>list, <prefix>lock:<item>" details:"Prefix of all keys, forced to end in ':'. The list is <prefix>list, the locks <prefix>lock:<item>. Without it, or with a blank one, the keys are list and lock:<item> at the top of the database (or nearly), and w8y warns once at start, naming them."`
	KeyExpiry      duration.Flag `short:"x" long:"key-expiry" env:"W8Y_KEY_EXPIRY" default:"5s" value-name:"DURATION" description:"Lock expiry, refreshed each third of it" details:"How long a lock lives unless refreshed; at least 100ms. The lock is refreshed about every third of it while the child runs (so a cancel request is noticed within a third of it), and expires by itself this long after w8y dies."`
	Parallel       int           `long:"parallel" env:"W8Y_PARALLEL" default:"1" value-name:"N" description:"Run up to N children at once" details:"Run up to N children at once, each on its own item under its own lock. In one-shot mode, take up to N items from one pass over the list."`
	NoWorkExitCode int           `long:"no-work-exit-code" env:"W8Y_NO_WORK_EXIT_CODE" default:"0" value-name:"CODE" description:"Exit code when no item could be taken" details:"Exit code when no item could be taken: in one-shot mode, and with --continuous --until-idle when the worker took none. A list that does not exist is not \"no work\" but a mistake (a mistyped --key-prefix): w8y exits 120 then, with one line on stderr."`
	OneItemOptions
}

// OneItemOptions are w8y --item: run the command for one named item under
// its lock, as flock -w runs one under a file's. They sit in the "Items
// and locks" group of --help (ItemOptions embeds them). --item has no
// variable: W8Y_ITEM is what every child is given.
type OneItemOptions struct {
	Item        itemName      `long:"item" value-name:"NAME" description:"Run the command for item NAME alone, under its lock" details:"Run the command once for the item NAME, under the lock the fleet uses for it (<prefix>lock:NAME), recording its state, events, fencing token, timeout and cooldown or backoff as a run of the list would. The list is neither read nor changed, and NAME need not be in it. A cooldown or backoff does not hold it back; a pause does (exit 125), unless --ignore-pause. Not with --continuous or --parallel. An empty NAME is refused (exit 125)."`
	Wait        duration.Flag `long:"wait" env:"W8Y_WAIT" value-name:"DURATION" description:"With --item, wait up to DURATION for its lock (0: not at all)" details:"With --item, wait up to DURATION for a held lock, trying it every 250ms; still held then, w8y exits 121 without running the command. 0 (the default) does not wait."`
	IgnorePause bool          `long:"ignore-pause" env:"W8Y_IGNORE_PAUSE" description:"With --item, run it even if it is paused" details:"With --item, run the item even while an operator has paused it (w8yctl pause); the pause stays."`
}

// itemName is --item's NAME. An empty one is refused rather than read as no
// --item at all: `w8y --item "$NAME"` with NAME unset would otherwise run
// the list's next item, not the one meant, where flock refuses an empty
// file name.
type itemName string

// UnmarshalFlag implements flags.Unmarshaler.
func (n *itemName) UnmarshalFlag(value string) error {
	if value == "" {
		return errors.New("an empty name is no item: give the name of the item to run")
	}
	*n = itemName(value)
	return nil
}

// validateOneItem checks --item, --wait and --ignore-pause.
func (o *Options) validateOneItem() error {
	switch {
	case o.Item == "" && (o.Wait != 0 || o.IgnorePause):
		return usageError("--wait and --ignore-pause go with --item")
	case o.Item != "" && (o.Continuous || o.Parallel > 1):
		return usageError("--item runs one named item once: it does not go with --continuous or --parallel")
	case o.Wait < 0:
		return usageError("--wait must not be negative, got %s", o.Wait)
	}
	return nil
}

type ChildOptions struct {
	EnvVar     string        `short:"e" long:"env-var" env:"W8Y_ENV_VAR" value-name:"NAME" description:"Also set the variable NAME to the item" details:"Also set the environment variable NAME to the item in the child's environment, besides W8Y_ITEM."`
	Timeout    duration.Flag `long:"timeout" env:"W8Y_TIMEOUT" value-name:"DURATION" description:"Stop a child still running after DURATION; exit 124" details:"Stop a child still running after DURATION: SIGTERM to its process group, SIGKILL after --kill-after. w8y releases the lock and exits 124, as timeout(1) does. 0 means never."`
	KillAfter  killAfterFlag `long:"kill-after" env:"W8Y_KILL_AFTER" value-name:"DURATION" default-mask:"10s, or a third of --key-expiry if less" description:"Grace between SIGTERM and SIGKILL" details:"Grace between SIGTERM and SIGKILL when w8y stops a child's process group itself (a timeout, a lost lock, processes left behind). At most a third of --key-expiry, so that a group whose lock is being lost is gone before the lock could expire; a larger value is refused. A forwarded stop signal is not limited by it."`
	KeepOutput *int          `long:"keep-output" env:"W8Y_KEEP_OUTPUT" value-name:"BYTES" default-mask:"4096 if failed" description:"Keep the last BYTES of the child's output (it then writes to pipes)" details:"Pass the child's stdout and stderr on to w8y's own, byte for byte and unbuffered, and keep the last BYTES of each in the item's state hash (last_stdout, last_stderr) at the end of every run, and the last 512 of each in the end event of a run that did not succeed; at most 1048576 (1 MiB). The child then writes to pipes, not to w8y's own stdout and stderr: a child that asks whether its output is a terminal is told it is not. Without it, w8y keeps the last 4096 bytes of a run that did not succeed (and nothing of a success), unless its stdout or stderr is a terminal, where the child keeps them; 0 leaves them untouched."`
	// UnsafeItemInScript lets {} stand inside a shell's -c script (see
	// validateItemInScript).
	UnsafeItemInScript bool `long:"unsafe-item-in-script" env:"W8Y_UNSAFE_ITEM_IN_SCRIPT" description:"Allow {} in a shell's -c script (items run as code)" details:"Allow {} inside the script of a shell's -c (sh -c 'echo {}'), where the item is read as shell code: whoever may add an item to the list can then run any command on this host, and an item with a space or a quote breaks the script. Without it, w8y refuses such a command (exit 125); pass the item as an argument instead (sh -c '... \"$1\" ...' sh {}) or read it from W8Y_ITEM."`
	Subreaper          bool `long:"subreaper" env:"W8Y_SUBREAPER" description:"Reap the processes that children orphan" details:"Make w8y a child subreaper: processes that a child orphans are re-parented to w8y, which reaps them. Always on when w8y is PID 1, as in a container."`
	StopOptions
}

type ContinuousOptions struct {
	Continuous    bool          `short:"c" long:"continuous" env:"W8Y_CONTINUOUS" description:"Keep taking items until stopped" details:"Keep taking items until stopped (SIGTERM, SIGINT, SIGHUP or SIGQUIT drains: the running children finish and w8y exits 0), instead of running one."`
	ExitCodes     codeList      `short:"i" long:"exit-codes" env:"W8Y_EXIT_CODES" env-delim:"," default:"0" value-name:"CODE" description:"Child exit codes that count as success" details:"Child exit codes that count as a success, which lets --continuous go on to the next item. Repeat the flag (-i 0 -i 3) or give a list apart by commas (-i 0,3, W8Y_EXIT_CODES=0,3)."`
	IdleWait      duration.Flag `long:"idle-wait" env:"W8Y_IDLE_WAIT" default:"1.5s" value-name:"DURATION" description:"Idle wait before a look, ±25%" details:"How long an idle worker waits for a wake before it looks again, give or take a quarter (jitter); at least 10ms. What w8y writes (run-now, add, resume, a finish) wakes a worker at once, and a wait ends when the next item comes due; this look finds what no w8y wrote (an outside RPUSH), and makes the step of the fleet's sweep that is due. 1.5s keeps a lone idle worker under 2 commands a second (a wait and a probe each look, a beat every 5s) and finds an outside RPUSH in about 0.75s on average. In a fleet of more than one worker that looks, their number times 50ms, so that the whole fleet looks about every 50ms. Where the list's keys are not on one server, and with --until-idle, the pause after a pass that found nothing."`
	StopOnFailure bool          `long:"stop-on-failure" env:"W8Y_STOP_ON_FAILURE" description:"Exit after a failed run (default without --failure-backoff)" details:"Exit after a failed run, with its code. This is the default without --failure-backoff, so that a failing item is not retried in a tight loop."`
	UntilIdle     bool          `long:"until-idle" env:"W8Y_UNTIL_IDLE" description:"Exit 0 once nothing is left to run" details:"Exit 0 once a pass finds nothing to take and nothing is left to run: every item cools down or can never run, and none is locked or backs off after a failure; if the worker took no item at all, exit --no-work-exit-code instead, or 120 if the list does not exist. With --cooldown longer than the batch, a fleet of such workers runs every item once (a Kubernetes Job)."`
	MaxItems      int           `long:"max-items" env:"W8Y_MAX_ITEMS" value-name:"N" description:"Take no new item after N, then exit 0" details:"Take no new item after N, let the running children finish and exit 0. 0 means no limit."`
	MaxRuntime    duration.Flag `long:"max-runtime" env:"W8Y_MAX_RUNTIME" value-name:"DURATION" description:"Take no new item after DURATION, then exit 0" details:"Take no new item after DURATION from the start, let the running children finish (they keep their locks) and exit 0. 0 means no limit."`
}

type ScheduleOptions struct {
	Cooldown duration.Flag `long:"cooldown" env:"W8Y_COOLDOWN" value-name:"DURATION" description:"After a success, run the item nowhere for DURATION" details:"After a successful run, the item is not run anywhere in the fleet until DURATION has passed (the key <prefix>cooldown:<item>). 0 means no cooldown."`
	// --schedule, --schedule-timezone and --jitter: read into cron by
	// validateSchedule.
	Schedule         string        `long:"schedule" env:"W8Y_SCHEDULE" value-name:"CRON" description:"Run each item once per slot of CRON, fleet-wide" details:"Run each item at most once per slot of the cron expression CRON, anywhere in the fleet: an item is eligible once its last successful start was before the latest slot, and one that never ran waits for its first slot (see --first-run-now). Five fields (minute hour day-of-month month day-of-week) or six with seconds first, or @hourly, @daily and the like. After a success the item's cooldown key lasts until its next slot; a failed run is retried under --failure-backoff within the slot; slots missed while the fleet was down make one run, not one per slot. The alternative to --cooldown."`
	ScheduleTimezone string        `long:"schedule-timezone" env:"W8Y_SCHEDULE_TIMEZONE" default:"UTC" value-name:"ZONE" description:"Read --schedule in this IANA time zone" details:"Read --schedule's fields in this time zone, an IANA name such as Europe/Paris or America/New_York."`
	Jitter           duration.Flag `long:"jitter" env:"W8Y_JITTER" value-name:"DURATION" description:"Spread each item's --schedule slot over DURATION" details:"Start each item up to DURATION after each --schedule slot, by an amount fixed per item (a hash of it), so that the items of a list do not all start at once. 0 means none."`
	cron             finish.Cron
	FirstRunNow      bool           `long:"first-run-now" env:"W8Y_FIRST_RUN_NOW" description:"Under a schedule, run an item that never ran at once, not at its first slot" details:"Under --schedule (or an item's own schedule, see w8yctl set), an item that has never run (a new one, or any on a list that no w8y has run yet) waits for its first slot, as cron and a Kubernetes CronJob wait; with this option it runs at once, then from its next slot on. An item named with --item always runs at once."`
	FleetMaxRunning  take.Places    `long:"fleet-max-running" env:"W8Y_FLEET_MAX_RUNNING" value-name:"N" description:"At most N children of the list at once, fleet-wide" details:"Run at most N children of the list at once across every worker and host, whatever their --parallel: a take checks the places in use (<prefix>running) and takes one in the same atomic step as the lock, and a worker that finds them all in use waits as an idle one does. A place is freed with its run's lock: when the run ends, or, if its worker dies, when the lock expires. Give every worker of the list the same N. Needs the list's keys on one server: on Redis Cluster, a hash tag in --key-prefix (else exit 125)."`
	FleetRate        schema.Rate    `long:"fleet-rate" env:"W8Y_FLEET_RATE" value-name:"N/DURATION" description:"At most N item starts per DURATION, fleet-wide" details:"Start at most N of the list's items in any window of DURATION across every worker and host, whatever their number and --parallel (100/1h, 5/2s): a take checks the fleet's latest starts (<prefix>starts, on Redis' clock) and counts its own in the same atomic step as the lock, and a worker that the rate refuses waits as an idle one does. N from 1 to 1000000; DURATION at least 1ms. Every take counts, a run given back before its child started too. Give every worker of the list the same rate (each take holds to its own). Needs the list's keys on one server: on Redis Cluster, a hash tag in --key-prefix (else exit 125)."`
	FailureBackoff   finish.Backoff `long:"failure-backoff" env:"W8Y_FAILURE_BACKOFF" value-name:"MIN[,MAX]" description:"After a failure, wait MIN, doubling up to MAX" details:"After a failed run (an exit code not in --exit-codes, a timeout, a lost lock), the item waits MIN, doubling with each consecutive failure up to MAX (by default 10 x MIN), less up to a quarter of jitter (the key <prefix>backoff:<item>). MIN is at least 10ms. A --continuous worker then goes on to the next item."`
}

type RecordOptions struct {
	StateTTL     duration.Flag `long:"state-ttl" env:"W8Y_STATE_TTL" default:"168h" value-name:"DURATION" description:"How long item states and events are kept" details:"How long an item's state hash (<prefix>state:<item>: last start and end, exit code, runs, failures, consecutive failures) and the events stream live after their last write; at least 1m, and at least --failure-backoff's MAX."`
	NoEvents     bool          `long:"no-events" env:"W8Y_NO_EVENTS" description:"Add nothing to the events stream <prefix>events"`
	EventsMaxLen int64         `long:"events-max-len" env:"W8Y_EVENTS_MAX_LEN" default:"10000" value-name:"N" description:"Keep about N entries in the events stream" details:"Keep about N entries in the events stream (XADD MAXLEN ~ N)."`
	MetricsAddr  string        `long:"metrics-addr" env:"W8Y_METRICS_ADDR" value-name:"HOST:PORT" description:"Serve /metrics and the probes here" details:"Serve Prometheus metrics on /metrics, and the probes /livez (the worker loop makes progress), /readyz (Redis answers) and /healthz (both), at this address; :9100 for all interfaces."`
}

type LogOptions struct {
	Quiet           bool   `short:"q" long:"quiet" env:"W8Y_QUIET" description:"Silence w8y's logs and its lines about failed runs" details:"Silence w8y's logs and the lines that tell of failed runs; the child's output is untouched. With --log-file, w8y still logs to the file. The one line that explains w8y's own failure (exit 125, 126, 127) is still printed."`
	LogFile         string `short:"f" long:"log-file" env:"W8Y_LOG_FILE" value-name:"PATH" description:"Append w8y's logs to this file, not stderr" details:"Append w8y's logs to this file (created if missing) instead of stderr. A failed run still gets one line on stderr, for cron to mail."`
	NoLogTimestamps bool   `short:"t" long:"no-log-timestamps" env:"W8Y_NO_LOG_TIMESTAMPS" description:"Leave timestamps out of log lines"`
	LogFormat       string `long:"log-format" env:"W8Y_LOG_FORMAT" default:"console" choice:"console" choice:"json" description:"Log format: console or json"`
	LogLevel        string `long:"log-level" env:"W8Y_LOG_LEVEL" default:"info" choice:"debug" choice:"info" choice:"warn" choice:"error" description:"Least severe level logged" details:"Least severe level logged: debug, info, warn or error. Failed runs are warnings."`
}

type StatusOptions struct {
	Status bool          `long:"status" description:"Show every item's lock, schedule and last run" details:"Show every item in list order with its lock, cooldown or backoff, and last run, then exit; needs no executable."`
	JSON   bool          `long:"json" env:"W8Y_JSON" description:"With --status, JSON instead of a table"`
	Watch  duration.Flag `long:"watch" env:"W8Y_WATCH" optional:"true" optional-value:"2s" value-name:"INTERVAL" description:"With --status, show it every INTERVAL (2s)" details:"With --status, show it again every INTERVAL (2s when given without one; at least 100ms) until SIGINT or SIGTERM, then exit 0."`
	State  string        `long:"state" value-name:"STATES" description:"With --status, rows in these states only" details:"With --status, show only the rows of items in one of these STATES, apart by commas: running, paused, failing (its last run failed), cooling, backoff, idle, blocked, invalid. The summary still counts every item."`
	Match  string        `long:"match" value-name:"GLOB" description:"With --status, rows of items GLOB matches" details:"With --status, show only the rows of items that GLOB matches whole: * stands for any characters (slashes too), ? for one."`
	Limit  string        `long:"limit" value-name:"N" description:"With --status, at most N rows (0: none)" details:"With --status, show at most N rows, the first in list order that the other filters leave; 0 shows the summary alone. Without it, every row."`
	// filter is --state, --match and --limit, checked.
	filter status.Filter
}

type OtherOptions struct {
	Version bool `long:"version" description:"Print the version and commit, and exit"`
	ManPage bool `long:"man-page" hidden:"true" description:"Print w8y's man page in troff and exit (make man)"`
}

// codeList is --exit-codes: exit codes from repeated flags, or from one
// value with codes apart by commas (W8Y_EXIT_CODES=0,3), with or without
// spaces around them.
type codeList []int

// UnmarshalFlag implements flags.Unmarshaler: go-flags calls it for each
// flag and for each part of the variable, and it appends.
func (c *codeList) UnmarshalFlag(value string) error {
	for part := range strings.SplitSeq(value, ",") {
		part = strings.TrimSpace(part)
		code, err := strconv.Atoi(part)
		if err != nil || code < 0 || code > 255 {
			return fmt.Errorf("%q is not an exit code: give numbers from 0 to 255, apart by commas", part)
		}
		*c = append(*c, code)
	}
	return nil
}

// MarshalFlag implements flags.Marshaler, for --help's defaults.
func (c codeList) MarshalFlag() (string, error) {
	parts := make([]string, len(c))
	for i, code := range c {
		parts[i] = strconv.Itoa(code)
	}
	return strings.Join(parts, ","), nil
}

// minKeyExpiry is the shortest lock expiry accepted: below it, a refresh every
// third of the expiry would compete with ordinary network latency.
const minKeyExpiry = 100 * time.Millisecond

// defaultKillAfter is --kill-after when it is not given and the key expiry
// allows it: time for a child to save its work, not for it to dawdle.
const defaultKillAfter = 10 * time.Second

// killAfterFlag is --kill-after, whose default depends on --key-expiry: it
// must know whether it was given at all, whatever value it was given.
type killAfterFlag = duration.Optional

// minIdleWait is the shortest --idle-wait accepted, so that an idle
// --continuous worker can never spin on Redis.
const minIdleWait = 10 * time.Millisecond

// minBackoff is the shortest MIN of --failure-backoff: below it, a failing
// item would be retried about as fast as without a backoff.
const minBackoff = settings.MinBackoff

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
	var opts Options
	parser := newParser(&opts)
	if len(args) > 0 && args[0] == completeArg {
		complete(parser, args[1:], stdout)
		return nil, errHelp
	}
	// go-flags completes its arguments instead of parsing them whenever
	// GO_FLAGS_COMPLETION is set; w8y's completion (above) does not use it,
	// so a stray one would make a real run do nothing and exit 0.
	completed := false
	parser.CompletionHandler = func([]flags.Completion) { completed = true }
	if _, err := commandLine(parser, args); err != nil {
		return nil, err
	}
	rest, err := parser.ParseArgs(args)
	if completed {
		return nil, usageError("GO_FLAGS_COMPLETION is set in the environment, which would make w8y complete its arguments instead of running: unset it (w8y's bash completion does not need it)")
	}
	if err != nil {
		var ferr *flags.Error
		if errors.As(err, &ferr) && ferr.Type == flags.ErrHelp {
			writeHelp(parser, stdout)
			return nil, errHelp
		}
		return nil, explainParseError(parser, args, err, os.LookupEnv)
	}
	if opts.Version {
		v, c := buildVersion()
		fmt.Fprintf(stdout, "w8y %s (commit %s)\n", v, c)
		return nil, errHelp
	}
	if opts.ManPage {
		writeManPage(parser, stdout)
		return nil, errHelp
	}
	opts.Command = rest
	opts.ReadSecrets(os.Getenv)
	if err := opts.validate(); err != nil {
		return nil, fromVariable(parser, args, err, os.LookupEnv)
	}
	return &opts, nil
}

// newParser returns the parser of w8y's options into opts.
func newParser(opts *Options) *flags.Parser {
	parser := flags.NewParser(opts, flags.HelpFlag|flags.PassDoubleDash|flags.PassAfterNonOption)
	parser.Name = "w8y"
	parser.Usage = "[OPTIONS] [--] executable [args...]"
	return parser
}

// logging is the log that the options ask for.
func (o *Options) logging() logging.Config {
	return logging.Config{File: o.LogFile, Quiet: o.Quiet, Format: o.LogFormat, Level: o.LogLevel, NoTimestamps: o.NoLogTimestamps}
}

// stopsOnFailure reports whether a --continuous worker exits after a failed
// run: asked for, or the old behaviour where no --failure-backoff keeps a
// failing item from being retried in a tight loop.
func (o *Options) stopsOnFailure() bool {
	return o.stopsAfter(o.FailureBackoff)
}

// stopsAfter is stopsOnFailure for a run under backoff, its item's own
// (w8yctl set --failure-backoff) or --failure-backoff: an item whose own
// backoff is none stops the worker as a worker without one stops, and one
// that backs off by itself lets a worker without one go on.
func (o *Options) stopsAfter(backoff finish.Backoff) bool {
	return o.StopOnFailure || backoff == (finish.Backoff{})
}
