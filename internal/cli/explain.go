package cli

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/clip"
)

// Explainer turns what go-flags says about a bad command line or variable
// into one line in the user's words: the option or variable as they wrote
// it, the value, and what is accepted. go-flags names Go types ("expected
// duration.Flag", "strconv.ParseBool") and blames a flag for its
// variable's value.
type Explainer struct {
	// Parser is the command's parser, which parsed the command line.
	Parser *flags.Parser
	// NewParser returns a fresh parser of the command's options, on which
	// a value is tried alone.
	NewParser func() *flags.Parser
	// LookupEnv reads the command's variables.
	LookupEnv func(string) (string, bool)
	// Usage makes the command's error for a bad command line.
	Usage func(format string, args ...any) error
}

// Given is one option as it appears on the command line, before the
// command's arguments.
type Given struct {
	Option *flags.Option
	// As is how the user wrote it: "-x" or "--key-expiry".
	As string
	// Value is its value, if it has one.
	Value string
}

// CommandLine reads the options part of args as go-flags does (stopping
// at "--" or the first argument that is not an option: the executable),
// and returns the options given, in order. An unknown flag ends the
// reading: go-flags reports it. A long option written with one dash, such
// as -continuous, is an error: go-flags would read it as -c -o -n ..., and
// either reject the 'o' or, for -key-prefix, quietly take "ey-prefix" as
// -k's value.
func (e Explainer) CommandLine(args []string) ([]Given, error) {
	var out []Given
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || arg == "-" || !strings.HasPrefix(arg, "-") {
			return out, nil
		}
		if name, ok := strings.CutPrefix(arg, "--"); ok {
			name, value, hasValue := strings.Cut(name, "=")
			opt := e.Parser.FindOptionByLongName(name)
			if opt == nil {
				return out, nil
			}
			if !hasValue && TakesValue(opt) && !opt.OptionalArgument && i+1 < len(args) {
				i++
				value = args[i]
			}
			out = append(out, Given{Option: opt, As: "--" + name, Value: value})
			continue
		}
		if name, _, _ := strings.Cut(arg[1:], "="); len(name) > 1 {
			if opt := e.Parser.FindOptionByLongName(name); opt != nil {
				return out, e.Usage("%s", oneDash(arg, opt))
			}
		}
		// A cluster of short flags, as in -cq or -x5; the first one that
		// takes a value takes the rest of the cluster, or the next
		// argument.
		cluster := []rune(arg[1:])
		for j, r := range cluster {
			opt := e.Parser.FindOptionByShortName(r)
			if opt == nil {
				return out, nil
			}
			g := Given{Option: opt, As: "-" + string(r)}
			if TakesValue(opt) {
				if rest := string(cluster[j+1:]); rest != "" {
					g.Value = strings.TrimPrefix(rest, "=")
				} else if i+1 < len(args) {
					i++
					g.Value = args[i]
				}
				out = append(out, g)
				break
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// given is CommandLine without its error, for reading a command line that
// has been checked already.
func (e Explainer) given(args []string) []Given {
	out, _ := e.CommandLine(args)
	return out
}

// ParseError turns go-flags' error err for args into a line in the user's
// words.
func (e Explainer) ParseError(args []string, err error) error {
	see := " (see " + e.Parser.Name + " --help)"
	var ferr *flags.Error
	if !errors.As(err, &ferr) {
		return e.Usage("%s"+see, clip.OneLine(err.Error()))
	}
	switch ferr.Type {
	case flags.ErrMarshal, flags.ErrInvalidChoice:
		// go-flags reads the variables after the command line, so a
		// command line that parsed means a variable's value failed.
		if bad := e.badVariable(args); bad != nil {
			return bad
		}
		if bad := e.badFlag(args); bad != nil {
			return bad
		}
	case flags.ErrNoArgumentForBool:
		for _, g := range e.given(args) {
			if !TakesValue(g.Option) && strings.Contains(ferr.Message, g.Option.LongName) {
				return e.Usage("%s takes no value: it is on when given (for a variable, %s=true)", g.As, g.Option.EnvDefaultKey)
			}
		}
	case flags.ErrExpectedArgument:
		return e.Usage("%s"+see, clip.OneLine(strings.ReplaceAll(strings.ReplaceAll(ferr.Message, "`", ""), "'", "")))
	}
	return e.Usage("%s"+see, clip.OneLine(strings.ReplaceAll(ferr.Message, "`", "'")))
}

// badVariable finds the variable whose value go-flags could not take,
// among those of options that the command line does not give, by giving
// each to a fresh parser. It returns nil if none fails.
func (e Explainer) badVariable(args []string) error {
	onCommandLine := map[*flags.Option]bool{}
	for _, g := range e.given(args) {
		onCommandLine[g.Option] = true
	}
	scratch := e.NewParser()
	for _, opt := range AllOptions(e.Parser) {
		value, set := e.LookupEnv(opt.EnvDefaultKey)
		if opt.EnvDefaultKey == "" || !set || onCommandLine[opt] {
			continue
		}
		parts := []string{value}
		if opt.EnvDefaultDelim != "" {
			parts = strings.Split(value, opt.EnvDefaultDelim)
		}
		for _, part := range parts {
			if err := scratch.FindOptionByLongName(opt.LongName).Set(&part); err != nil {
				return e.Usage("%s=%q: %s", opt.EnvDefaultKey, value, Accepted(opt, err))
			}
		}
	}
	return nil
}

// badFlag finds the option on the command line whose value go-flags could
// not take, by giving each to a fresh parser. It returns nil if none
// fails.
func (e Explainer) badFlag(args []string) error {
	scratch := e.NewParser()
	for _, g := range e.given(args) {
		if err := scratch.FindOptionByLongName(g.Option.LongName).Set(&g.Value); err != nil {
			return e.Usage("%s %q: %s", g.As, g.Value, Accepted(g.Option, err))
		}
	}
	return nil
}

// Accepted says why a value is not a value of opt, and what is, from err,
// the error of go-flags' conversion. The option's own parser (a duration,
// a backoff, an exit code) says it in words already; for Go's own types,
// strconv would name a function.
func Accepted(opt *flags.Option, err error) string {
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

// SetBy says which variable set the option that msg, a message of the
// command's own checks, names first ("--parallel must be ..."), if a
// variable did and the command line does not give it: the command's checks
// name options as flags, and a user who set W8Y_PARALLEL should hear of it.
func (e Explainer) SetBy(args []string, msg string) (variable, value string, ok bool) {
	_, after, found := strings.Cut(msg, "--")
	if !found {
		return "", "", false
	}
	name := after[:strings.IndexFunc(after+" ", func(r rune) bool { return !(r == '-' || r >= 'a' && r <= 'z') })]
	opt := e.Parser.FindOptionByLongName(name)
	if opt == nil || opt.EnvDefaultKey == "" {
		return "", "", false
	}
	for _, g := range e.given(args) {
		if g.Option == opt {
			return "", "", false
		}
	}
	value, set := e.LookupEnv(opt.EnvDefaultKey)
	if !set {
		return "", "", false
	}
	return opt.EnvDefaultKey, value, true
}
