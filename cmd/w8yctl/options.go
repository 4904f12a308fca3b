package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/cli"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/settings"
	"github.com/w8y/w8y/internal/status"
)

// Options are w8yctl's options: w8y's connection options and prefix, with
// the same W8Y_* variables, and the options of the verbs, each of which
// says which verb takes it.
type Options struct {
	ConnectionOptions `group:"Redis"`
	VerbOptions       `group:"Options of the verbs"`
	OtherOptions      `group:"Other"`
}

// verbGroup is the name of the group of VerbOptions, which a verb's --help
// lists.
const verbGroup = "Options of the verbs"

type OtherOptions struct {
	Version bool `long:"version" description:"Print the version and commit, and exit"`
	ManPage bool `long:"man-page" hidden:"true" description:"Print w8yctl's man page in troff and exit"`
}

type ConnectionOptions struct {
	redisconn.Options
	KeyPrefix string `short:"k" long:"key-prefix" env:"W8Y_KEY_PREFIX" value-name:"PREFIX" description:"Prefix of the fleet's keys, as w8y's: <prefix>list, <prefix>lock:<item>"`
}

// VerbOptions are strings where they hold numbers or durations, so that
// w8yctl, not go-flags, says what is wrong with a value, in a user's words.
type VerbOptions struct {
	JSON   bool   `long:"json" description:"Print JSON instead of lines (events: one object a line)"`
	Create bool   `long:"create" description:"add: start the list if it does not exist"`
	For    string `long:"for" value-name:"DURATION" description:"pause: end the pause by itself after DURATION (default: until resumed)"`
	Reason string `long:"reason" value-name:"TEXT" description:"pause, cancel: why, kept with the pause or the cancelled run"`
	// AsFailure and Cancel are cancel's and remove's.
	AsFailure bool   `long:"as-failure" description:"cancel: count the cancelled run as a failure of its item (backoff, consecutive failures)"`
	Cancel    bool   `long:"cancel" description:"remove: also cancel the run of an item that runs now, instead of letting it finish"`
	Follow    bool   `long:"follow" description:"events: then print each new event as it comes, until Ctrl-C"`
	Item      string `long:"item" value-name:"ITEM" description:"events: only this item's events"`
	Count     string `short:"n" long:"count" value-name:"N" default:"10" description:"events: how many of the latest events to print (with --since: all, unless given)"`
	Fix       bool   `long:"fix" description:"check: repair what is safe to repair (never a lock), and say what was done"`
	Since     string `long:"since" value-name:"TIME|ID" description:"events: those from TIME on (2026-11-25T10:00:00Z, or a DURATION ago such as 1h) or from the stream ID on"`
	Addr      string `long:"addr" value-name:"HOST:PORT" description:"serve: where the dashboard listens, such as 127.0.0.1:8080 (port 0: any free port, printed)"`
	TokenFile string `long:"token-file" value-name:"FILE" description:"serve: turn the dashboard's actions on with the token that FILE holds (or W8Y_DASHBOARD_TOKEN)"`
	Watch     string `long:"watch" optional:"true" optional-value:"2s" value-name:"INTERVAL" description:"status: show it again every INTERVAL (2s), until Ctrl-C"`
	State     string `long:"state" value-name:"STATE[,STATE]" description:"status: only the rows of items in these states (running, paused, failing, cooling, backoff, idle, blocked, invalid)"`
	Match     string `long:"match" value-name:"GLOB" description:"status: only the rows of items that GLOB matches (* any characters, ? one)"`
	Limit     string `long:"limit" value-name:"N" description:"status: at most N rows (0: the summary alone)"`
	// The settings of set and unset: strings, which settings.Check reads;
	// unset gives them no value (see unsetSwitches).
	Cooldown       string `long:"cooldown" value-name:"DURATION" description:"set, unset: the item's own --cooldown after a success, in place of the workers' (0: none)"`
	Timeout        string `long:"timeout" value-name:"DURATION" description:"set, unset: the item's own --timeout for its child, in place of the workers' (0: none)"`
	FailureBackoff string `long:"failure-backoff" value-name:"MIN[,MAX]" description:"set, unset: the item's own --failure-backoff after a failure, in place of the workers' (0: none)"`
	Schedule       string `long:"schedule" value-name:"CRON" description:"set, unset: the item's own --schedule, in place of the workers' --schedule or --cooldown, read in each worker's --schedule-timezone"`
}

// command is a parsed command line: the verb, its items and the options.
type command struct {
	verb  *verb
	items []string
	opts  *Options
	// pauseFor, count, watch and since are --for, --count, --watch and
	// --since, parsed.
	pauseFor time.Duration
	count    int64
	watch    time.Duration
	since    string
	// filter is --state, --match and --limit, parsed.
	filter status.Filter
	// settings are set's settings, each as settings.Check reads it, or
	// the fields that unset removes (none: all of them).
	settings settings.Stored
	// by is who gives the command (control.Who), as pauses and cancels
	// record it.
	by string
	// token is the dashboard's token, from W8Y_DASHBOARD_TOKEN or
	// --token-file: "" leaves its actions off.
	token string
	// now is when the command was given, which --since counts back from.
	now time.Time
}

// minWatch is the shortest --watch interval, as w8y --status's: each
// refresh reads every item.
const minWatch = 100 * time.Millisecond

// errHelp is returned by parseCommand after --help, --version or the man
// page.
var errHelp = errors.New("help shown")

// parseCommand reads the verb, its items and the options from args and the
// W8Y_* variables that getenv reads, and checks them.
func parseCommand(args []string, getenv func(string) string, stdout io.Writer) (*command, error) {
	var opts Options
	parser := flags.NewParser(&opts, flags.HelpFlag|flags.PassDoubleDash)
	parser.Name = "w8yctl"
	parser.Usage = "[OPTIONS] VERB [ITEM...]"
	parser.ShortDescription = "operate a fleet of w8y workers: add, remove, pause, resume, run now, cancel, status, events, check, dashboard"
	if len(args) > 0 && args[0] == cli.CompleteArg {
		cli.Complete(parser, verbNames(), args[1:], stdout)
		return nil, errHelp
	}
	// Before go-flags, which reads -for as -f -o -r.
	if msg := cli.OneDashLong(parser, args); msg != "" {
		return nil, fmt.Errorf("%s (an ITEM that starts with - goes after --)", msg)
	}
	rest, err := parser.ParseArgs(unsetSwitches(parser, args))
	if err != nil {
		var ferr *flags.Error
		if errors.As(err, &ferr) && ferr.Type == flags.ErrHelp {
			writeHelp(parser, args, stdout)
			return nil, errHelp
		}
		return nil, explain(parser, args, err, getenv)
	}
	switch {
	case opts.Version:
		cli.PrintVersion(stdout, parser.Name, buildVersion)
		return nil, errHelp
	case opts.ManPage:
		writeManPage(parser, stdout)
		return nil, errHelp
	}
	opts.ReadSecrets(getenv)
	if err := opts.Options.Validate(); err != nil {
		return nil, err
	}
	opts.KeyPrefix = schema.NormalizePrefix(opts.KeyPrefix)
	if len(rest) == 0 {
		return nil, fmt.Errorf("missing verb: give one of %s (see w8yctl --help)", strings.Join(verbNames(), ", "))
	}
	c := &command{verb: findVerb(rest[0]), items: rest[1:], opts: &opts, by: control.Who(getenv), now: time.Now(), token: getenv(tokenVar)}
	if c.verb == nil {
		return nil, fmt.Errorf("unknown verb %q: give one of %s (see w8yctl --help)", rest[0], strings.Join(verbNames(), ", "))
	}
	if err := c.check(parser, args); err != nil {
		return nil, err
	}
	return c, nil
}

// verbSpecific are the options that some verbs take and others refuse:
// each one's description starts with the verbs that take it.
var verbSpecific = []string{"create", "for", "reason", "as-failure", "cancel", "follow", "item", "count", "watch", "since", "fix", "addr", "token-file", "state", "match", "limit", "cooldown", "timeout", "failure-backoff", "schedule"}

// check refuses what the verb cannot take: options of other verbs, missing
// or repeated items, and values that do not parse.
func (c *command) check(parser *flags.Parser, args []string) error {
	for _, name := range verbSpecific {
		opt := parser.FindOptionByLongName(name)
		takers, _ := optionTakers(opt)
		if opt.IsSet() && !opt.IsSetDefault() && !slices.Contains(takers, c.verb.name) {
			return fmt.Errorf("--%s goes with %s, not %s", name, strings.Join(takers, " or "), c.verb.name)
		}
	}
	if c.verb.takesItems || (c.verb.mayTakeItems && len(c.items) > 0) {
		if len(c.items) == 0 {
			return fmt.Errorf("%s needs at least one ITEM (usage: w8yctl %s)", c.verb.name, c.verb.usage)
		}
		seen := make(map[string]bool, len(c.items))
		for _, item := range c.items {
			if seen[item] {
				return fmt.Errorf("item %s is given twice: give each once", quote(item))
			}
			seen[item] = true
		}
	} else if len(c.items) > 0 {
		return fmt.Errorf("%s takes no items, got %s (usage: w8yctl %s)", c.verb.name, quote(c.items[0]), c.verb.usage)
	}
	if c.opts.For != "" {
		d, err := duration.Parse(c.opts.For)
		switch {
		case err != nil:
			return fmt.Errorf("--for %q: %s", c.opts.For, err)
		case d < 0:
			return fmt.Errorf("--for %q: a pause cannot last a negative time (leave --for out to pause until resumed)", c.opts.For)
		case d < time.Millisecond:
			return fmt.Errorf("--for %q: a pause lasts at least 1ms (leave --for out to pause until resumed)", c.opts.For)
		case d >= duration.Forever:
			// Forever is no expiry at all: Redis would refuse one so long.
			d = 0
		}
		c.pauseFor = d
	}
	if c.opts.Watch != "" && len(c.items) > 0 {
		return fmt.Errorf("--watch shows the table of every item: give it without ITEMs")
	}
	if (c.opts.State != "" || c.opts.Match != "" || c.opts.Limit != "") && len(c.items) > 0 {
		return fmt.Errorf("--state, --match and --limit choose the rows of the table of every item: give them without ITEMs")
	}
	filter, err := status.ParseFilter(c.opts.State, c.opts.Match, c.opts.Limit)
	if err != nil {
		return err
	}
	c.filter = filter
	if c.opts.Watch != "" {
		d, err := duration.Parse(c.opts.Watch)
		if err != nil || d < minWatch {
			return fmt.Errorf("--watch %q: give an interval of at least %s, such as 2s", c.opts.Watch, minWatch)
		}
		c.watch = d
	}
	if err := c.checkServe(); err != nil {
		return err
	}
	if err := c.checkSettings(parser); err != nil {
		return err
	}
	n, err := strconv.ParseInt(c.opts.Count, 10, 64)
	if err != nil || n < 1 {
		return fmt.Errorf("--count %q: give a whole number of 1 or more", c.opts.Count)
	}
	c.count = n
	if c.opts.Since != "" {
		since, err := streamID(c.opts.Since, c.now)
		if err != nil {
			return err
		}
		c.since = since
		if opt := parser.FindOptionByLongName("count"); opt.IsSetDefault() {
			c.count = 0
		}
	}
	return nil
}

// streamIDForm is a stream entry's ID, or the Unix millisecond time alone.
var streamIDForm = regexp.MustCompile(`^[0-9]+(-[0-9]+)?$`)

// streamID is --since as the ID that XRANGE starts from: an ID as given, a
// time as its millisecond, a duration as that long before now.
func streamID(since string, now time.Time) (string, error) {
	if streamIDForm.MatchString(since) {
		return since, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, since); err == nil {
		return strconv.FormatInt(t.UnixMilli(), 10), nil
	}
	if d, err := duration.Parse(since); err == nil && d >= 0 {
		return strconv.FormatInt(now.Add(-d).UnixMilli(), 10), nil
	}
	return "", fmt.Errorf("--since %q: give a time such as 2026-11-25T10:00:00Z, a duration ago such as 1h, or a stream ID such as 1795600800000-0", since)
}

// explain turns go-flags' error into one line in the user's words: go-flags
// names Go types ("expected bool", "strconv.ParseBool").
func explain(parser *flags.Parser, args []string, err error, getenv func(string) string) error {
	var ferr *flags.Error
	if !errors.As(err, &ferr) {
		return fmt.Errorf("%s (see w8yctl --help)", err)
	}
	if ferr.Type == flags.ErrUnknownFlag {
		if arg := cli.UnknownOption(parser, args); arg != "" {
			return fmt.Errorf("%s: no such option (see w8yctl --help); an ITEM that starts with - goes after --, as in: w8yctl %s -- %s",
				arg, verbOf(parser, args), shellWord(arg))
		}
	}
	if ferr.Type == flags.ErrMarshal {
		// Only the switches can fail to parse (the other values are
		// strings), and go-flags reads their variables after the
		// command line.
		for _, opt := range cli.AllOptions(parser) {
			if value := getenv(opt.EnvDefaultKey); opt.EnvDefaultKey != "" && value != "" {
				if _, err := strconv.ParseBool(value); err != nil {
					return fmt.Errorf("%s=%q: not true or false (nor 1 or 0)", opt.EnvDefaultKey, value)
				}
			}
		}
	}
	msg := strings.NewReplacer("`", "", "'", "").Replace(ferr.Message)
	// "--for -1s": go-flags takes -1s for an option, not for a value.
	if flag, value, found := strings.Cut(msg, ", but got option "); found && ferr.Type == flags.ErrExpectedArgument {
		flag = strings.TrimPrefix(flag, "expected argument for flag ")
		return fmt.Errorf("%s %s: a value that starts with - reads as an option; a negative value is not accepted anyway (see w8yctl --help)", flag, value)
	}
	return fmt.Errorf("%s (see w8yctl --help)", msg)
}

// verbOf is the verb of args as far as it can be told before they parse:
// the first argument that is no option nor an option's value, or VERB.
func verbOf(parser *flags.Parser, args []string) string {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			return "VERB"
		case strings.HasPrefix(arg, "--"):
			if opt := parser.FindOptionByLongName(strings.TrimPrefix(arg, "--")); opt != nil && cli.TakesValue(opt) && !opt.OptionalArgument {
				i++
			}
		case strings.HasPrefix(arg, "-") && len(arg) == 2:
			if opt := parser.FindOptionByShortName(rune(arg[1])); opt != nil && cli.TakesValue(opt) {
				i++
			}
		case !strings.HasPrefix(arg, "-") && findVerb(arg) != nil:
			return arg
		}
	}
	return "VERB"
}

// unsetSwitches makes the settings' options switches after the verb unset,
// which removes settings and so takes no values: "unset b --cooldown
// --timeout" reads as "--cooldown= --timeout=". Arguments after -- are
// items, and stay as they are.
func unsetSwitches(parser *flags.Parser, args []string) []string {
	if verbOf(parser, args) != "unset" {
		return args
	}
	out := slices.Clone(args)
	after := false
	for i, arg := range out {
		switch {
		case arg == "--":
			return out
		case arg == "unset":
			after = true
		case after && slices.Contains(settings.Fields, strings.ReplaceAll(strings.TrimPrefix(arg, "--"), "-", "_")) && strings.HasPrefix(arg, "--"):
			out[i] = arg + "="
		}
	}
	return out
}

// checkSettings reads the settings that set gives, each with
// settings.Check, and the ones that unset names.
func (c *command) checkSettings(parser *flags.Parser) error {
	if c.verb.name != "set" && c.verb.name != "unset" {
		return nil
	}
	given := settings.Stored{}
	for _, field := range settings.Fields {
		opt := parser.FindOptionByLongName(strings.TrimPrefix(settings.Option(field), "--"))
		if !opt.IsSet() {
			continue
		}
		value := fmt.Sprint(opt.Value())
		if c.verb.name == "unset" {
			if value != "" {
				return fmt.Errorf("unset removes settings and takes no values: give %s alone", settings.Option(field))
			}
			given[field] = ""
			continue
		}
		checked, err := settings.Check(field, value)
		if err != nil {
			return err
		}
		given[field] = checked
	}
	if c.verb.name == "set" {
		if len(given) == 0 {
			return fmt.Errorf("set needs at least one setting: --cooldown, --timeout, --failure-backoff or --schedule (usage: w8yctl %s)", c.verb.usage)
		}
		if _, cools := given[settings.Cooldown]; cools {
			if _, scheduled := given[settings.Schedule]; scheduled {
				return fmt.Errorf("--cooldown and --schedule are alternatives: give one")
			}
		}
	}
	c.settings = given
	return nil
}
