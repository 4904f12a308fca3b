package main

import (
	"errors"
	"io"
	"os"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/cli"
	"github.com/w8y/w8y/internal/redisconn"
)

// This file is what w8y's command line takes from internal/cli: the
// completion of its options, and the one line in the user's words that a
// bad command line or W8Y_* variable gets.

// completeArg, as w8y's first argument, asks for the completions of the
// words that follow it: what scripts/w8y.bash-completion runs.
const completeArg = cli.CompleteArg

// complete prints the completions of the last of words, a w8y command line
// typed so far: w8y has no verbs, and every word from the executable on
// is the executable's.
func complete(parser *flags.Parser, words []string, stdout io.Writer) {
	cli.Complete(parser, nil, words, stdout)
}

// explainer explains w8y's bad command lines; lookupEnv reads the W8Y_*
// variables.
func explainer(parser *flags.Parser, lookupEnv func(string) (string, bool)) cli.Explainer {
	return cli.Explainer{
		Parser:    parser,
		NewParser: func() *flags.Parser { return newParser(&Options{}) },
		LookupEnv: lookupEnv,
		Usage:     usageError,
	}
}

// commandLine refuses a long option written with one dash (see
// cli.Explainer.CommandLine).
func commandLine(parser *flags.Parser, args []string) ([]cli.Given, error) {
	return explainer(parser, os.LookupEnv).CommandLine(args)
}

// explainParseError turns go-flags' error for args into a line in the
// user's words.
func explainParseError(parser *flags.Parser, args []string, err error, lookupEnv func(string) (string, bool)) error {
	return explainer(parser, lookupEnv).ParseError(args, err)
}

// fromVariable says which variable set the option that a validation error
// names first, if a variable did: the messages of validate name options as
// flags, and a user who set W8Y_KILL_AFTER should hear of it.
func fromVariable(parser *flags.Parser, args []string, err error, lookupEnv func(string) (string, bool)) error {
	var uerr usageErr
	if !errors.As(err, &uerr) {
		return err
	}
	variable, value, ok := explainer(parser, lookupEnv).SetBy(args, uerr.msg)
	if !ok {
		return err
	}
	// A URL's password stays out of the message, as it does everywhere.
	return usageError("%s (from %s=%q)", uerr.msg, variable, redisconn.RedactURL(value))
}
