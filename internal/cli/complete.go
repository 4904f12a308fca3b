package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	flags "github.com/jessevdk/go-flags"
)

// CompleteArg, as a command's first argument, asks for the completions of
// the words that follow it, the last of which is being typed: what
// scripts/w8y.bash-completion and scripts/w8yctl.bash-completion run.
const CompleteArg = "__complete"

// Complete prints, one a line, the completions of the last of words, the
// words of a command line typed so far, by the grammar of parser's
// command: an option's name, a choice of the option before it, or, for a
// command with verbs, the verb. It prints nothing where bash should
// complete file names itself: an option's free value, and the arguments.
//
// verbs are the command's verbs, the first word that is not an option,
// after which its options go on (w8yctl). A command without verbs (w8y)
// takes its options up to its first other word (the executable), or an
// option it does not know: every word after is not its own.
func Complete(parser *flags.Parser, verbs []string, words []string, w io.Writer) {
	if len(words) == 0 {
		words = []string{""}
	}
	typed, current := words[:len(words)-1], words[len(words)-1]
	verbGiven := false
	for i := 0; i < len(typed); i++ {
		opt, ok := wantsNextWord(parser, typed[i])
		switch {
		case typed[i] == "--":
			return
		case !ok && (verbs == nil || strings.HasPrefix(typed[i], "-")):
			// w8y's executable, or a word a command does not know:
			// what follows is not the command's.
			if verbs == nil {
				return
			}
		case !ok:
			verbGiven = true
		case opt == nil:
		case i == len(typed)-1:
			printChoices(w, opt, "", current)
			return
		default:
			i++ // the option's value
		}
	}
	if !strings.HasPrefix(current, "-") {
		if verbs != nil && !verbGiven {
			printMatches(w, verbs, current)
		}
		return
	}
	if name, value, found := strings.Cut(strings.TrimPrefix(current, "--"), "="); found && strings.HasPrefix(current, "--") {
		if opt := parser.FindOptionByLongName(name); opt != nil {
			printChoices(w, opt, "--"+name+"=", value)
		}
		return
	}
	names := []string{"--help"}
	for _, opt := range AllOptions(parser) {
		if !opt.Hidden && opt.LongName != "" {
			names = append(names, "--"+opt.LongName)
		}
	}
	printMatches(w, names, current)
}

// printMatches prints, sorted, the names that start with prefix.
func printMatches(w io.Writer, names []string, prefix string) {
	names = slices.Sorted(slices.Values(names))
	for _, name := range names {
		if strings.HasPrefix(name, prefix) {
			fmt.Fprintln(w, name)
		}
	}
}

// wantsNextWord reads word, one of a command's options as typed
// ("--timeout", "--timeout=5s", "-cx"), and returns the option whose value
// is the next word, if any. ok is false when word is not one of the
// command's options.
func wantsNextWord(parser *flags.Parser, word string) (opt *flags.Option, ok bool) {
	if name, found := strings.CutPrefix(word, "--"); found && name != "" {
		name, _, hasValue := strings.Cut(name, "=")
		opt := parser.FindOptionByLongName(name)
		if opt == nil {
			return nil, false
		}
		if hasValue || !TakesValue(opt) || opt.OptionalArgument {
			return nil, true
		}
		return opt, true
	}
	if !strings.HasPrefix(word, "-") || len(word) < 2 || strings.HasPrefix(word, "--") {
		return nil, false
	}
	cluster := []rune(word[1:])
	for j, r := range cluster {
		opt := parser.FindOptionByShortName(r)
		if opt == nil {
			return nil, false
		}
		if TakesValue(opt) {
			if j == len(cluster)-1 {
				return opt, true
			}
			return nil, true
		}
	}
	return nil, true
}

// printChoices prints the choices of opt that start with value, each after
// prefix: its choices, or what its value's type completes (a
// flags.Completer, such as a signal's names, where the option takes more
// than a list of choices could say); none for an option with neither.
func printChoices(w io.Writer, opt *flags.Option, prefix, value string) {
	if completer, ok := opt.Value().(flags.Completer); ok && len(opt.Choices) == 0 {
		for _, c := range completer.Complete(value) {
			fmt.Fprintln(w, prefix+c.Item)
		}
		return
	}
	for _, choice := range opt.Choices {
		if strings.HasPrefix(choice, value) {
			fmt.Fprintln(w, prefix+choice)
		}
	}
}

// FirstArgument is the first word of args that is neither an option nor
// an option's value, before any "--": w8yctl's verb. It is "" if there is
// none.
func FirstArgument(parser *flags.Parser, args []string) string {
	for i := 0; i < len(args); i++ {
		opt, ok := wantsNextWord(parser, args[i])
		switch {
		case args[i] == "--":
			return ""
		case !ok && !strings.HasPrefix(args[i], "-"):
			return args[i]
		case opt != nil:
			i++
		}
	}
	return ""
}
