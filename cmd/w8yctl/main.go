// Command w8yctl changes what a fleet of w8y workers does, through the
// Redis they share: it adds and removes items, pauses and resumes them,
// makes them run now, shows the status and the events stream, and finds and
// repairs what is inconsistent (check). It connects as w8y does,
// with the same options and W8Y_* variables.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/cli"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
)

// Exit codes: w8yctl's are w8y's own, so that scripts read both alike.
const (
	exitOK = 0
	// exitFound is check's when it finds problems, as fsck(8) and diff(1)
	// say "found" with a code of their own below the failures.
	exitFound = 1
	// exitNoList is w8y's code for a list that does not exist.
	exitNoList = 120
	// exitFailure is what env(1), timeout(1) and w8y use for their own
	// failures.
	exitFailure = 125
)

// exitStatuses is the one table of w8yctl's exit codes, which --help, the
// man page and (checked by a test) docs/reference.md show.
var exitStatuses = []cli.ExitStatus[int]{
	{Code: exitOK, Meaning: "done, as the lines printed say (an item already in the list, one that was not paused, or one that runs now and is not started twice is no failure)"},
	{Code: exitFound, Meaning: "check found problems, each printed on a line (with --fix: problems that it left for an operator; 0 if it repaired all it found)"},
	{Code: exitNoList, Meaning: "the list does not exist (or is empty: Redis keeps no empty list), as with w8y; nothing was changed (add --create starts one; workers and serve only warn)"},
	{Code: exitFailure, Meaning: "w8yctl itself failed and changed nothing: bad verb, option or item, an item given twice, a list of another type, an item that the list lacks (status, events and cancel still show or stop what is left of one), Redis unreachable or refusing (a wrong password, say); check --fix keeps what it repaired before it failed, and can be run again"},
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is w8yctl from its arguments, environment and standard streams to its
// exit code: the only place that makes one.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd, err := parseCommand(args, getenv, stdout)
	if errors.Is(err, errHelp) {
		return exitOK
	}
	if err == nil {
		err = cmd.run(stdout, stderr)
	}
	switch {
	case errors.Is(err, errFound):
		return exitFound
	case errors.Is(err, schema.ErrNoList):
		cli.PrintLine(stderr, "w8yctl", err)
		return exitNoList
	case err != nil:
		cli.PrintLine(stderr, "w8yctl", err)
		return exitFailure
	}
	return exitOK
}

// run connects to Redis and runs the verb.
func (c *command) run(stdout, stderr io.Writer) error {
	// go-redis' own messages, and the warning about a TLS connection that
	// verifies nothing, go to stderr; w8yctl has no other log.
	log := zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}}).Level(zerolog.WarnLevel)
	redisconn.SetLogger(log)
	conns := 1
	if c.verb.name == "serve" {
		// The dashboard logs each action it takes, for the record.
		log = log.Level(zerolog.InfoLevel)
		conns = serveConns
	}
	client, err := redisconn.Connect(&c.opts.Options, conns, log)
	if err != nil {
		return err
	}
	defer client.Close()
	// An operator's command waits out a reshard of the list's slot, as
	// the workers' takes do.
	redisconn.RideOutSlotMoves(client)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// A PING first, so that an unreachable Redis or a refused password is
	// told as such, before any command that would change something.
	if err := client.Ping(ctx).Err(); err != nil {
		return redisconn.Wrap("connect to Redis", err)
	}
	keys := schema.Keys{Prefix: c.opts.KeyPrefix, Colocated: redisconn.Colocated(client, c.opts.KeyPrefix)}
	if blank := keys.BlankPrefix(); blank != "" {
		log.Warn().Msg(blank)
	}
	fleet := &control.Fleet{Client: client, Keys: keys, By: c.by, Remedies: remedies(&c.opts.ConnectionOptions)}
	out := &printer{w: stdout, json: c.opts.JSON, list: keys.List(), log: log}
	return c.verb.run(ctx, c, fleet, out)
}
