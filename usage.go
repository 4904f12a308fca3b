package main

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/redisconn"
)

// This file turns what go-flags says about a bad command line or W8Y_*
// variable into one line in the user's words: the option or variable as
// they wrote it, the value, and what is accepted. go-flags names Go types
// ("expected duration.Flag", "strconv.ParseBool") and blames a flag for
// its variable's value.

// given is one option as it appears on the command line, before the
// executable.
type given struct {
	option *flags.Option
	// as is how the user wrote it: "-x" or "--key-expiry".
	as string
	// value is its value, if it has one.
	value string
}

// commandLine reads the options part of args as go-flags does (stopping at
// "--" or the first argument that is not an option: the executable), and
// returns the options given, in order. An unknown flag ends the reading:
// go-flags reports it. A long option written with one dash, such as
// -continuous, is an error: go-flags would read it as -c -o -n ..., and
// either reject the 'o' or, for -key-prefix, quietly take "ey-prefix" as
// -k's value.
func commandLine(parser *flags.Parser, args []string) ([]given, error) {
	var out []given
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || arg == "-" || !strings.HasPrefix(arg, "-") {
			return out, nil
		}
		if name, ok := strings.CutPrefix(arg, "--"); ok {
			name, value, hasValue := strings.Cut(name, "=")
			opt := parser.FindOptionByLongName(name)
			if opt == nil {
				return out, nil
			}
			if !hasValue && takesValue(opt) && !opt.OptionalArgument && i+1 < len(args) {
				i++
				value = args[i]
			}
			out = append(out, given{option: opt, as: "--" + name, value: value})
			continue
		}
		if name, _, _ := strings.Cut(arg[1:], "="); len(name) > 1 {
			if opt := parser.FindOptionByLongName(name); opt != nil {
				return out, usageError("%s: long options take two dashes: did you mean --%s?", arg, opt.LongName)
			}
		}
		// A cluster of short flags, as in -cq or -x5; the first one that
		// takes a value takes the rest of the cluster, or the next
		// argument.
		cluster := []rune(arg[1:])
		for j, r := range cluster {
			opt := parser.FindOptionByShortName(r)
			if opt == nil {
				return out, nil
			}
			g := given{option: opt, as: "-" + string(r)}
			if takesValue(opt) {
				if rest := string(cluster[j+1:]); rest != "" {
					g.value = strings.TrimPrefix(rest, "=")
				} else if i+1 < len(args) {
					i++
					g.value = args[i]
				}
				out = append(out, g)
				break
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// takesValue reports whether opt takes a value: every option but a switch.
func takesValue(opt *flags.Option) bool {
	return opt.Field().Type.Kind() != reflect.Bool
}

// explainParseError turns go-flags' error for args into a line in the
// user's words. lookupEnv reads the W8Y_* variables.
func explainParseError(parser *flags.Parser, args []string, err error, lookupEnv func(string) (string, bool)) error {
	var ferr *flags.Error
	if !errors.As(err, &ferr) {
		return usageError("%s (see w8y --help)", err)
	}
	switch ferr.Type {
	case flags.ErrMarshal, flags.ErrInvalidChoice:
		// go-flags reads the variables after the command line, so a
		// command line that parsed means a variable's value failed.
		if bad := badVariable(parser, args, lookupEnv); bad != nil {
			return bad
		}
		if bad := badFlag(parser, args); bad != nil {
			return bad
		}
	case flags.ErrNoArgumentForBool:
		for _, g := range commandLineOptions(parser, args) {
			if !takesValue(g.option) && strings.Contains(ferr.Message, g.option.LongName) {
				return usageError("%s takes no value: it is on when given (for a variable, %s=true)", g.as, g.option.EnvDefaultKey)
			}
		}
	case flags.ErrExpectedArgument:
		return usageError("%s (see w8y --help)", strings.ReplaceAll(strings.ReplaceAll(ferr.Message, "`", ""), "'", ""))
	}
	return usageError("%s (see w8y --help)", strings.ReplaceAll(ferr.Message, "`", "'"))
}

// badVariable finds the W8Y_* variable whose value go-flags could not
// take, among those of options that the command line does not give, by
// giving each to a fresh parser. It returns nil if none fails.
func badVariable(parser *flags.Parser, args []string, lookupEnv func(string) (string, bool)) error {
	onCommandLine := map[*flags.Option]bool{}
	for _, g := range commandLineOptions(parser, args) {
		onCommandLine[g.option] = true
	}
	scratch := newParser(&Options{})
	for _, opt := range allOptions(parser) {
		value, set := lookupEnv(opt.EnvDefaultKey)
		if opt.EnvDefaultKey == "" || !set || onCommandLine[opt] {
			continue
		}
		parts := []string{value}
		if opt.EnvDefaultDelim != "" {
			parts = strings.Split(value, opt.EnvDefaultDelim)
		}
		for _, part := range parts {
			if err := scratch.FindOptionByLongName(opt.LongName).Set(&part); err != nil {
				return usageError("%s=%q: %s", opt.EnvDefaultKey, value, accepted(opt, part, err))
			}
		}
	}
	return nil
}

// badFlag finds the option on the command line whose value go-flags could
// not take, by giving each to a fresh parser. It returns nil if none fails.
func badFlag(parser *flags.Parser, args []string) error {
	scratch := newParser(&Options{})
	for _, g := range commandLineOptions(parser, args) {
		if err := scratch.FindOptionByLongName(g.option.LongName).Set(&g.value); err != nil {
			return usageError("%s %q: %s", g.as, g.value, accepted(g.option, g.value, err))
		}
	}
	return nil
}

// accepted says why value is not a value of opt, and what is, from err,
// the error of go-flags' conversion. The option's own parser (a duration,
// a backoff, an exit code) says it in words already; for Go's own types,
// strconv would name a function.
func accepted(opt *flags.Option, value string, err error) string {
	if len(opt.Choices) > 0 {
		return fmt.Sprintf("not one of %s", strings.Join(opt.Choices, ", "))
	}
	if reflect.PointerTo(opt.Field().Type).Implements(unmarshaler) {
		return err.Error()
	}
	switch opt.Field().Type.Kind() {
	case reflect.Bool:
		return "not true or false (nor 1 or 0)"
	case reflect.Int, reflect.Int64:
		return "not a whole number such as 3"
	}
	return err.Error()
}

// unmarshaler is the interface of option types that parse their own
// values, and say in words what they accept.
var unmarshaler = reflect.TypeFor[flags.Unmarshaler]()

// commandLineOptions is commandLine without its error, for reading a
// command line that parseOptions has checked already.
func commandLineOptions(parser *flags.Parser, args []string) []given {
	out, _ := commandLine(parser, args)
	return out
}

// allOptions lists every option of parser, in every group.
func allOptions(parser *flags.Parser) []*flags.Option {
	var out []*flags.Option
	var walk func(g *flags.Group)
	walk = func(g *flags.Group) {
		out = append(out, g.Options()...)
		for _, sub := range g.Groups() {
			walk(sub)
		}
	}
	walk(parser.Command.Group)
	return out
}

// fromVariable says which variable set the option that a validation error
// names first, if a variable did: the messages of validate name options as
// flags, and a user who set W8Y_KILL_AFTER should hear of it.
func fromVariable(parser *flags.Parser, args []string, err error, lookupEnv func(string) (string, bool)) error {
	var uerr usageErr
	if !errors.As(err, &uerr) {
		return err
	}
	_, after, found := strings.Cut(uerr.msg, "--")
	if !found {
		return err
	}
	name := after[:strings.IndexFunc(after+" ", func(r rune) bool { return !(r == '-' || r >= 'a' && r <= 'z') })]
	opt := parser.FindOptionByLongName(name)
	if opt == nil || opt.EnvDefaultKey == "" {
		return err
	}
	for _, g := range commandLineOptions(parser, args) {
		if g.option == opt {
			return err
		}
	}
	value, set := lookupEnv(opt.EnvDefaultKey)
	if !set {
		return err
	}
	// A URL's password stays out of the message, as it does everywhere.
	return usageError("%s (from %s=%q)", uerr.msg, opt.EnvDefaultKey, redisconn.RedactURL(value))
}
