package main

import (
	"context"

	"github.com/w8y/w8y/internal/control"
)

// verb is one of w8yctl's verbs.
type verb struct {
	name string
	// usage is the verb's command line, after "w8yctl".
	usage string
	// about says what the verb does, for --help.
	about string
	// example is a command line that uses the verb, for its --help.
	example string
	// takesItems says that the verb needs at least one ITEM, and
	// mayTakeItems that it takes ITEMs or none.
	takesItems, mayTakeItems bool
	run                      func(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error
}

// verbs are w8yctl's verbs, in the order --help shows them. Each runs in
// a file of its own.
var verbs = []*verb{
	{"add", "add [--create] ITEM...", "Append the items that the list does not hold yet; print how many were added", "w8yctl -k work add --create report-1 report-2", true, false, runAdd},
	{"remove", "remove [--cancel] ITEM...", "Remove every occurrence of the items, and their cooldown, backoff, pause, state and settings keys; a running item finishes its run, unless --cancel cancels it", "w8yctl -k work remove --cancel report-2", true, false, runRemove},
	{"pause", "pause [--for DURATION] [--reason TEXT] ITEM...", "Keep every worker from taking the items, until resumed or for DURATION; a running item finishes its run", "w8yctl -k work pause --for 2h --reason maintenance report-1", true, false, runPause},
	{"resume", "resume ITEM...", "End the items' pauses", "w8yctl -k work resume report-1", true, false, runResume},
	{"run-now", "run-now ITEM...", "Clear the items' cooldown, backoff and pause: an idle worker takes each within a second, unless it runs now", "w8yctl -k work run-now report-1", true, false, runRunNow},
	{"set", "set ITEM... --cooldown|--timeout|--failure-backoff|--schedule VALUE...", "Give the items settings of their own, which every worker applies when it takes them in place of its own options; a change applies from the item's next run", "w8yctl -k work set big-customer --schedule @hourly --timeout 2h", true, false, runSet},
	{"unset", "unset ITEM... [--cooldown] [--timeout] [--failure-backoff] [--schedule]", "Remove the items' own settings, those named or all: the workers' own options stand again from the item's next run", "w8yctl -k work unset big-customer --timeout", true, false, runUnset},
	{"cancel", "cancel [--reason TEXT] [--as-failure] ITEM...", "Stop the items' running children wherever they run, within a third of the lock's expiry; the runs are recorded as cancelled, not as failures unless --as-failure", "w8yctl -k work cancel --reason stuck --as-failure report-1", true, false, runCancel},
	{"status", "status [--watch[=INTERVAL]] [ITEM...]", "Show every item: its lock, pause, cooldown or backoff, and last run, as w8y --status does; or, for each ITEM, all there is to know: how often the list holds it, its lock, cooldown, backoff and pause, its fence, last run and counts, its latest events and its kept output", "w8yctl -k work status --watch=5s", false, true, runStatus},
	{"check", "check [--fix]", "Find what is wrong under the prefix (keys of the wrong type, locks without expiry, items held twice or that can never run, keys of items gone from the list); --fix repairs what is safe and says what it did", "w8yctl -k work check --fix", false, false, runCheck},
	{"events", "events [--follow] [--since TIME|ID] [--item ITEM] [-n N]", "Print the latest events (starts and ends of runs, and changes with who made them), or those since TIME, and with --follow each new one until Ctrl-C", "w8yctl -k work events --since 1h --item report-1", false, false, runEvents},
	{"workers", "workers", "List the live workers: holder (host:pid:random), idle or busy and for how long, the items each runs now, mode, version and start; a worker that stops leaves the list at once, one that dies within 15s (longer in a fleet of more than 500)", "w8yctl -k work workers --json", false, false, runWorkers},
	{"serve", "serve --addr HOST:PORT [--token-file FILE]", "Serve a live dashboard of the list in a browser until Ctrl-C; its pause, resume, run-now, cancel, add and remove buttons work only with the token of W8Y_DASHBOARD_TOKEN or --token-file", "w8yctl -k work serve --addr 127.0.0.1:8080", false, false, runServe},
}

// findVerb returns the verb called name, or nil.
func findVerb(name string) *verb {
	for _, v := range verbs {
		if v.name == name {
			return v
		}
	}
	return nil
}

// verbNames lists the verbs' names, in order.
func verbNames() []string {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.name
	}
	return names
}
