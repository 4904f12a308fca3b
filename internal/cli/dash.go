package cli

import (
	"fmt"
	"strings"

	flags "github.com/jessevdk/go-flags"
)

// This file is what w8y and w8yctl say of an option written wrong: a long
// option with one dash (-continuous, -for), which go-flags would read as a
// cluster of short flags, and an option that does not exist, which for
// w8yctl is often an item that starts with "-".

// oneDash is the message for arg, a long option written with one dash.
func oneDash(arg string, opt *flags.Option) string {
	return fmt.Sprintf("%s: long options take two dashes: did you mean --%s?", arg, opt.LongName)
}

// options walks the options of args as go-flags reads them, interspersed
// with other arguments, up to "--": it calls each with every argument that
// is an option (or a cluster of short ones), skipping the values that
// options take from the next argument, and stops when each returns false.
func options(parser *flags.Parser, args []string, each func(arg string) bool) {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return
		}
		if arg == "-" || !strings.HasPrefix(arg, "-") {
			continue
		}
		if !each(arg) {
			return
		}
		if name, ok := strings.CutPrefix(arg, "--"); ok {
			if opt := parser.FindOptionByLongName(name); opt != nil && TakesValue(opt) && !opt.OptionalArgument {
				i++
			}
			continue
		}
		cluster := []rune(arg[1:])
		if opt := parser.FindOptionByShortName(cluster[len(cluster)-1]); opt != nil && TakesValue(opt) && !opt.OptionalArgument {
			i++
		}
	}
}

// OneDashLong finds, among the options of args (interspersed with the
// verb and items, up to "--"), a long option written with one dash, such
// as -for, and says which was meant; "" when there is none. A cluster of
// short flags that names a long option is read as the long option: no
// w8y option's short flags spell one.
func OneDashLong(parser *flags.Parser, args []string) string {
	msg := ""
	options(parser, args, func(arg string) bool {
		if strings.HasPrefix(arg, "--") {
			return true
		}
		name, _, _ := strings.Cut(arg[1:], "=")
		if len(name) > 1 {
			if opt := parser.FindOptionByLongName(name); opt != nil {
				msg = oneDash(arg, opt)
				return false
			}
		}
		return true
	})
	return msg
}

// UnknownOption is the first argument of args (up to "--") that names an
// option the parser lacks, as written: "--dash", or "-dash" for a cluster
// with a letter that is no short flag; "" when there is none.
func UnknownOption(parser *flags.Parser, args []string) string {
	unknown := ""
	options(parser, args, func(arg string) bool {
		if name, ok := strings.CutPrefix(arg, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if parser.FindOptionByLongName(name) == nil {
				unknown = arg
			}
			return unknown == ""
		}
		for _, r := range arg[1:] {
			opt := parser.FindOptionByShortName(r)
			if opt == nil {
				unknown = arg
				return false
			}
			if TakesValue(opt) {
				break // the rest of the cluster is its value
			}
		}
		return true
	})
	return unknown
}
