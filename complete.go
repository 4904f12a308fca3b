package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	flags "github.com/jessevdk/go-flags"
)

// completeArg, as w8y's first argument, asks for the completions of the
// words that follow it, the last of which is being typed: what
// scripts/w8y.bash-completion runs.
const completeArg = "__complete"

// complete prints, one a line, the completions of the last of words, the
// words of a w8y command line typed so far: an option's name, or a choice
// of the option before it. It prints nothing where bash should complete
// file names itself: an option's file or other free value, the
// executable, and every word after it, which are the executable's own.
func complete(parser *flags.Parser, words []string, stdout io.Writer) {
	if len(words) == 0 {
		words = []string{""}
	}
	typed, current := words[:len(words)-1], words[len(words)-1]
	for i := 0; i < len(typed); i++ {
		opt, ok := wantsNextWord(parser, typed[i])
		switch {
		case !ok:
			// The executable, "--", or a word w8y does not know: what
			// follows is not w8y's.
			return
		case opt == nil:
		case i == len(typed)-1:
			printChoices(stdout, opt, "", current)
			return
		default:
			i++ // the option's value
		}
	}
	if !strings.HasPrefix(current, "-") {
		return
	}
	if name, value, found := strings.Cut(strings.TrimPrefix(current, "--"), "="); found && strings.HasPrefix(current, "--") {
		if opt := parser.FindOptionByLongName(name); opt != nil {
			printChoices(stdout, opt, "--"+name+"=", value)
		}
		return
	}
	var names []string
	for _, opt := range allOptions(parser) {
		if !opt.Hidden && strings.HasPrefix("--"+opt.LongName, current) {
			names = append(names, "--"+opt.LongName)
		}
	}
	if strings.HasPrefix("--help", current) {
		names = append(names, "--help")
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintln(stdout, name)
	}
}

// wantsNextWord reads word, one of w8y's options as typed ("--timeout",
// "--timeout=5s", "-cx"), and returns the option whose value is the next
// word, if any. ok is false when word is not one of w8y's options.
func wantsNextWord(parser *flags.Parser, word string) (opt *flags.Option, ok bool) {
	if name, found := strings.CutPrefix(word, "--"); found && name != "" {
		name, _, hasValue := strings.Cut(name, "=")
		opt := parser.FindOptionByLongName(name)
		if opt == nil {
			return nil, false
		}
		if hasValue || !takesValue(opt) || opt.OptionalArgument {
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
		if takesValue(opt) {
			if j == len(cluster)-1 {
				return opt, true
			}
			return nil, true
		}
	}
	return nil, true
}

// printChoices prints the choices of opt that start with value, each after
// prefix; none for an option without choices.
func printChoices(w io.Writer, opt *flags.Option, prefix, value string) {
	for _, choice := range opt.Choices {
		if strings.HasPrefix(choice, value) {
			fmt.Fprintln(w, prefix+choice)
		}
	}
}
