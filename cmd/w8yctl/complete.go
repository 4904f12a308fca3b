package main

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	flags "github.com/jessevdk/go-flags"
)

// completeArg, as w8yctl's first argument, asks for the completions of the
// words that follow it, the last of which is being typed: what
// scripts/w8yctl.bash-completion runs.
const completeArg = "__complete"

// complete prints, one a line, the completions of the last of words, the
// words of a w8yctl command line typed so far: an option's name, or the
// verb. It prints nothing for an option's value or an item, where bash
// completes file names itself.
func complete(parser *flags.Parser, words []string, w io.Writer) {
	if len(words) == 0 {
		words = []string{""}
	}
	typed, current := words[:len(words)-1], words[len(words)-1]
	verb := false
	for i := 0; i < len(typed); i++ {
		word := typed[i]
		switch {
		case word == "--":
			return
		case strings.HasPrefix(word, "-"):
			if opt := optionOf(parser, word); opt != nil && takesValue(opt) && !opt.OptionalArgument && !strings.Contains(word, "=") {
				if i == len(typed)-1 {
					return // current is the option's value
				}
				i++
			}
		default:
			verb = true
		}
	}
	var names []string
	switch {
	case strings.HasPrefix(current, "-"):
		for _, opt := range allOptions(parser.Command.Group) {
			if !opt.Hidden && opt.LongName != "" {
				names = append(names, "--"+opt.LongName)
			}
		}
	case !verb:
		for _, v := range verbs {
			names = append(names, v.name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasPrefix(name, current) {
			fmt.Fprintln(w, name)
		}
	}
}

// optionOf is the option that word (-k, --key-prefix, --for=1h) names, or
// nil.
func optionOf(parser *flags.Parser, word string) *flags.Option {
	if name, ok := strings.CutPrefix(word, "--"); ok {
		name, _, _ = strings.Cut(name, "=")
		return parser.FindOptionByLongName(name)
	}
	if len(word) == 2 {
		return parser.FindOptionByShortName(rune(word[1]))
	}
	return nil
}

// takesValue reports whether opt takes a value: every option but a switch.
func takesValue(opt *flags.Option) bool {
	return opt.Field().Type.Kind() != reflect.Bool
}
