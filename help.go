package main

import (
	"fmt"
	"io"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/cli"
	"github.com/w8y/w8y/internal/duration"
)

// This file holds what w8y says about itself besides its options: the
// texts of --help and the man page, which internal/cli renders from the
// options (--help readable on an 80-column terminal, with short
// descriptions grouped by concern; the man page with each option's
// details, variable, default and choices). Both show the one table of exit
// codes.

// durationsHelp says how every duration option is written (see
// internal/duration), in --help and the man page.
const durationsHelp = "A DURATION is a number of seconds (5, 0.5, 1e-3) or numbers with units, as in 1500ms, 2h45m or 30d; the units are " +
	duration.Units + ". inf, or anything longer than about 292 years, is forever: no limit at all for --timeout and --max-runtime. " +
	"Above 0, it is at least 1ns."

// helpIntro follows the usage line in --help.
const helpIntro = `w8y takes the first item of the circular Redis list <prefix>list whose lock
<prefix>lock:<item> it can take (rotating the list, never removing an item),
runs executable with {} replaced by the item, and exits with its code.
man w8y and the docs/ folder of w8y's source say more.
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

// helpList lays out w8y's exit codes in --help: the code, and its meaning
// beside it.
var helpList = cli.List{Col: 11}

// writeHelp writes --help: the usage, the options by group, the variables,
// durations and arguments, and the table of exit codes.
func writeHelp(parser *flags.Parser, w io.Writer) {
	fmt.Fprintf(w, "Usage: %s %s\n\n%s", parser.Name, parser.Usage, helpIntro)
	cli.WriteOptions(w, parser)
	fmt.Fprintf(w, "\n%s%s\n%s", helpVariables, cli.WrapLines(durationsHelp, cli.Width), helpArguments)
	cli.WriteExitCodes(w, exitStatuses, helpList, statusExitNote)
}

// manDescription is the man page's DESCRIPTION.
const manDescription = `w8y takes one work item from the circular Redis list <prefix>list, rotating it (never removing an item) until it can take an item's lock <prefix>lock:<item>, runs the executable with {} in its arguments replaced by the item, keeps the lock alive while it runs, releases it and exits with the child's code. With --continuous it keeps going until stopped. Every option can also be given as a W8Y_* environment variable, named after it; a flag on the command line wins.

w8y --status shows every item with its lock holder, cooldown or backoff and last run, from the state hashes <prefix>state:<item> that runs leave behind; each start and end is also added to the stream <prefix>events.

With --cooldown and --failure-backoff, runs pause their items across the fleet with the keys <prefix>cooldown:<item> and <prefix>backoff:<item>, which every worker honours; --parallel runs several children at once. Redis may be one server (redis://, rediss://, unix://), a Cluster (--redis-cluster) or a Sentinel group (--sentinel-master); the password comes from W8Y_REDIS_PASSWORD or --redis-password-file.

` + durationsHelp + `

w8yctl, built beside w8y, changes what a fleet does: it adds and removes items, pauses and resumes them, makes them run now, and shows the status and the events.

The full documentation is in the docs/ folder of w8y's source: docs/reference.md for every option, the keys, the child, continuous mode, the exit codes, logging and w8yctl; docs/recipes.md for cron, systemd, Kubernetes and a container image; docs/scheduling.md for cooldowns, backoffs and pauses; docs/operating.md for the Redis deployments, the ACL rule, the events, the metrics and the probes; docs/how-it-works.md for the design.`

// manEnvironment is the man page's ENVIRONMENT, besides the options'
// variables, which OPTIONS names.
const manEnvironment = `W8Y_REDIS_PASSWORD and W8Y_SENTINEL_PASSWORD hold the passwords of the Redis data nodes and of the sentinels; they have no flags, so that ps never shows them, and the child does not get them (nor the password in W8Y_REDIS_URL).

The child gets W8Y_ITEM (the item), W8Y_LOCK_KEY (its lock's key), W8Y_HOLDER (this run's lock token, the lock's value while it runs), W8Y_FENCE (this take's fencing token, higher for every later take of the list) and, with --env-var NAME, NAME set to the item.`

// writeManPage writes the man page that make man installs, generated from
// the options so that it cannot drift from them.
func writeManPage(parser *flags.Parser, w io.Writer) {
	cli.ManPage[string]{
		Summary:     "run a command on items from a circular Redis list, one holder per item",
		Description: manDescription,
		Environment: manEnvironment,
		ExitCodes:   exitStatuses,
		ExitNote:    statusExitNote,
	}.Write(w, parser)
}
