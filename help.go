package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/duration"
)

// This file renders what w8y says about itself from its options: --help,
// readable on an 80-column terminal (short descriptions, grouped by
// concern), and the man page, which adds each option's details, variable,
// default and choices. Both show the one table of exit codes.

// helpWidth is the width --help fits: an 80-column terminal.
const helpWidth = 80

// helpFlagWidth is the width of --help's first column, the flags; a
// description starts after it, or on a line of its own below longer flags.
const helpFlagWidth = 28

// durationsHelp says how every duration option is written (see
// internal/duration), in --help and the man page.
const durationsHelp = "A DURATION is a number of seconds (5, 0.5, 1e-3) or numbers with units, as in 1500ms, 2h45m or 30d; the units are " +
	duration.Units + ". inf, or anything longer than about 292 years, is forever: no limit at all for --timeout and --max-runtime. " +
	"Above 0, it is at least 1ns."

// helpIntro follows the usage line in --help.
const helpIntro = `w8y takes the first item of the circular Redis list <prefix>list whose lock
<prefix>lock:<item> it can take (rotating the list, never removing an item),
runs executable with {} replaced by the item, and exits with its code.
man w8y and the README say more.
`

// helpVariables follows the options in --help.
const helpVariables = `Every option can be set with a variable named after it: --key-prefix=jobs is
W8Y_KEY_PREFIX=jobs, and --continuous is W8Y_CONTINUOUS=true (true or false,
1 or 0). A flag on the command line beats its variable. The password has a
variable only, W8Y_REDIS_PASSWORD, so that ps never shows it.
`

// helpArguments follows the variables in --help.
const helpArguments = `Arguments:
  executable is run directly (no shell) with {} in any argument replaced by
  the item; W8Y_ITEM, W8Y_LOCK_KEY, W8Y_HOLDER and W8Y_FENCE are set in its
  environment.
`

// writeHelp writes --help: the usage, the options by group, the variables,
// durations and arguments, and the table of exit codes.
func writeHelp(parser *flags.Parser, w io.Writer) {
	fmt.Fprintf(w, "Usage: %s %s\n\n%s", parser.Name, parser.Usage, helpIntro)
	for _, group := range optionGroups(parser) {
		fmt.Fprintf(w, "\n%s:\n", group.ShortDescription)
		for _, opt := range groupOptions(group) {
			writeHelpOption(w, opt)
		}
	}
	fmt.Fprintf(w, "%-*sShow this help and exit\n", helpFlagWidth, "  -h, --help")
	fmt.Fprintf(w, "\n%s%s\n%s", helpVariables, wrapLines(durationsHelp, helpWidth), helpArguments)
	fmt.Fprint(w, "\nExit codes:\n")
	const indent = "           "
	for _, st := range exitStatuses {
		for i, line := range wrap(st.Meaning, helpWidth-len(indent)) {
			if i == 0 {
				fmt.Fprintf(w, "  %-8s %s\n", st.Code, line)
			} else {
				fmt.Fprintf(w, "%s%s\n", indent, line)
			}
		}
	}
	fmt.Fprintf(w, "  %s\n", statusExitNote)
}

// optionGroups lists the groups of Options, in order (go-flags puts them
// under one of its own, beside the group of its --help).
func optionGroups(parser *flags.Parser) []*flags.Group {
	var out []*flags.Group
	for _, top := range parser.Groups() {
		out = append(out, top.Groups()...)
	}
	return out
}

// groupOptions lists the options that group shows, its subgroups' too.
func groupOptions(group *flags.Group) []*flags.Option {
	var out []*flags.Option
	for _, opt := range group.Options() {
		if !opt.Hidden {
			out = append(out, opt)
		}
	}
	for _, sub := range group.Groups() {
		out = append(out, groupOptions(sub)...)
	}
	return out
}

// flagNames is how an option is written: "-k, --key-prefix=PREFIX".
func flagNames(opt *flags.Option) string {
	short := "    "
	if opt.ShortName != 0 {
		short = "-" + string(opt.ShortName) + ", "
	}
	return short + "--" + opt.LongName + valueName(opt)
}

// valueName is how an option's value is written after its name: "=N",
// "[=INTERVAL]" for an optional one, "=console|json" for choices, or "".
func valueName(opt *flags.Option) string {
	name := opt.ValueName
	if len(opt.Choices) > 0 {
		name = strings.Join(opt.Choices, "|")
	}
	switch {
	case opt.OptionalArgument:
		return "[=" + name + "]"
	case takesValue(opt):
		return "=" + name
	}
	return ""
}

// defaultOf is an option's default as --help and the man page show it, or
// "" when it has none worth saying (a switch, an empty or zero value).
func defaultOf(opt *flags.Option) string {
	switch {
	case opt.DefaultMask == "-":
		return ""
	case opt.DefaultMask != "":
		return opt.DefaultMask
	case len(opt.Default) == 0 || opt.Default[0] == "":
		return ""
	}
	return strings.Join(opt.Default, ",")
}

// writeHelpOption writes opt's lines in --help: its flags, then its short
// description and default, wrapped beside them or below longer flags.
func writeHelpOption(w io.Writer, opt *flags.Option) {
	names := "  " + flagNames(opt)
	text := opt.Description
	if def := defaultOf(opt); def != "" && len(opt.Choices) == 0 {
		text += " (default " + def + ")"
	}
	lines := wrap(text, helpWidth-helpFlagWidth)
	if len(names) > helpFlagWidth-2 {
		fmt.Fprintln(w, names)
	} else {
		fmt.Fprintf(w, "%-*s%s\n", helpFlagWidth, names, lines[0])
		lines = lines[1:]
	}
	for _, line := range lines {
		fmt.Fprintf(w, "%s%s\n", strings.Repeat(" ", helpFlagWidth), line)
	}
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

// wrapLines is wrap's lines joined, each ended by a newline.
func wrapLines(text string, width int) string {
	return strings.Join(wrap(text, width), "\n") + "\n"
}

// manDescription is the man page's DESCRIPTION.
const manDescription = `w8y takes one work item from the circular Redis list <prefix>list, rotating it (never removing an item) until it can take an item's lock <prefix>lock:<item>, runs the executable with {} in its arguments replaced by the item, keeps the lock alive while it runs, releases it and exits with the child's code. With --continuous it keeps going until stopped. Every option can also be given as a W8Y_* environment variable, named after it; a flag on the command line wins.

w8y --status shows every item with its lock holder, cooldown or backoff and last run, from the state hashes <prefix>state:<item> that runs leave behind; each start and end is also added to the stream <prefix>events.

With --cooldown and --failure-backoff, runs pause their items across the fleet with the keys <prefix>cooldown:<item> and <prefix>backoff:<item>, which every worker honours; --parallel runs several children at once. Redis may be one server (redis://, rediss://, unix://), a Cluster (--redis-cluster) or a Sentinel group (--sentinel-master); the password comes from W8Y_REDIS_PASSWORD or --redis-password-file.

` + durationsHelp + `

w8yctl, built beside w8y, changes what a fleet does: it adds and removes items, pauses and resumes them, makes them run now, and shows the status and the events.

See the README for the recipes (cron, systemd, Kubernetes, a container image), the key layout, the schedule, the Redis deployments and the ACL rule, the events' fields, the metrics and the probes.`

// manEnvironment is the man page's ENVIRONMENT, besides the options'
// variables, which OPTIONS names.
const manEnvironment = `W8Y_REDIS_PASSWORD and W8Y_SENTINEL_PASSWORD hold the passwords of the Redis data nodes and of the sentinels; they have no flags, so that ps never shows them, and the child does not get them (nor the password in W8Y_REDIS_URL).

The child gets W8Y_ITEM (the item), W8Y_LOCK_KEY (its lock's key), W8Y_HOLDER (this run's lock token, the lock's value while it runs), W8Y_FENCE (this take's fencing token, higher for every later take of the list) and, with --env-var NAME, NAME set to the item.`

// writeManPage writes the man page that make man installs, generated from
// the options so that it cannot drift from them. It is dated by
// SOURCE_DATE_EPOCH when set, so that the same source gives the same page.
func writeManPage(parser *flags.Parser, w io.Writer) {
	date := time.Now()
	if epoch, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		date = time.Unix(epoch, 0)
	}
	fmt.Fprintf(w, ".TH w8y 1 %q\n", date.UTC().Format("2 January 2006"))
	fmt.Fprintf(w, ".SH NAME\nw8y \\- %s\n", troff("run a command on items from a circular Redis list, one holder per item"))
	fmt.Fprintf(w, ".SH SYNOPSIS\n\\fBw8y\\fP %s\n", troff(parser.Usage))
	fmt.Fprintln(w, ".SH DESCRIPTION")
	writeManParagraphs(w, manDescription)
	fmt.Fprintln(w, ".SH OPTIONS")
	for _, group := range optionGroups(parser) {
		fmt.Fprintf(w, ".SS %s\n", troff(group.ShortDescription))
		for _, opt := range groupOptions(group) {
			writeManOption(w, opt)
		}
	}
	fmt.Fprintf(w, ".TP\n\\fB\\-h\\fP, \\fB\\-\\-help\\fP\nShow the help and exit.\n")
	fmt.Fprintln(w, ".SH ENVIRONMENT")
	writeManParagraphs(w, manEnvironment)
	writeManExitStatus(w)
}

// writeManOption writes opt's entry in OPTIONS: its flags, its details (or
// its description), and its variable, default and choices.
func writeManOption(w io.Writer, opt *flags.Option) {
	fmt.Fprintln(w, ".TP")
	if opt.ShortName != 0 {
		fmt.Fprintf(w, "\\fB\\-%c\\fP, ", opt.ShortName)
	}
	fmt.Fprintf(w, "\\fB\\-\\-%s\\fP", troff(opt.LongName))
	if value := valueName(opt); value != "" {
		name, optional := strings.CutPrefix(strings.TrimSuffix(value, "]"), "[")
		name = strings.TrimPrefix(name, "=")
		if optional {
			fmt.Fprintf(w, "[=\\fI%s\\fP]", troff(name))
		} else {
			fmt.Fprintf(w, "=\\fI%s\\fP", troff(name))
		}
	}
	fmt.Fprintln(w)
	text := opt.Field().Tag.Get("details")
	if text == "" {
		text = opt.Description + "."
	}
	var facts []string
	if opt.EnvDefaultKey != "" {
		facts = append(facts, "Variable: "+opt.EnvDefaultKey+".")
	}
	if def := defaultOf(opt); def != "" {
		facts = append(facts, "Default: "+def+".")
	}
	if len(opt.Choices) > 0 {
		facts = append(facts, "Choices: "+strings.Join(opt.Choices, ", ")+".")
	}
	fmt.Fprintln(w, troff(text))
	if len(facts) > 0 {
		fmt.Fprintf(w, ".br\n%s\n", troff(strings.Join(facts, " ")))
	}
}

// writeManParagraphs writes text, whose paragraphs are apart by blank
// lines, as the man page's paragraphs.
func writeManParagraphs(w io.Writer, text string) {
	for i, para := range strings.Split(text, "\n\n") {
		if i > 0 {
			fmt.Fprintln(w, ".PP")
		}
		fmt.Fprintln(w, troff(para))
	}
}

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
