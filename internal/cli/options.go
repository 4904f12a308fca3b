package cli

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	flags "github.com/jessevdk/go-flags"
)

// AllOptions lists every option of parser, in every group, hidden ones
// too.
func AllOptions(parser *flags.Parser) []*flags.Option {
	return groupOptions(parser.Command.Group, true)
}

// Groups lists the groups of a command's options, in order: go-flags puts
// the groups of the options struct under one of its own.
func Groups(parser *flags.Parser) []*flags.Group {
	var out []*flags.Group
	for _, top := range parser.Groups() {
		out = append(out, top.Groups()...)
	}
	return out
}

// Shown lists the options that group shows in --help and the man page,
// its subgroups' too: all but the hidden ones.
func Shown(group *flags.Group) []*flags.Option {
	return groupOptions(group, false)
}

// groupOptions lists the options of group and of its subgroups, the
// hidden ones only if asked.
func groupOptions(group *flags.Group, hidden bool) []*flags.Option {
	var out []*flags.Option
	for _, opt := range group.Options() {
		if hidden || !opt.Hidden {
			out = append(out, opt)
		}
	}
	for _, sub := range group.Groups() {
		out = append(out, groupOptions(sub, hidden)...)
	}
	return out
}

// TakesValue reports whether opt takes a value: every option but a switch.
func TakesValue(opt *flags.Option) bool {
	return opt.Field().Type.Kind() != reflect.Bool
}

// FlagNames is how an option is written: "-k, --key-prefix=PREFIX".
func FlagNames(opt *flags.Option) string {
	short := "    "
	if opt.ShortName != 0 {
		short = "-" + string(opt.ShortName) + ", "
	}
	return short + "--" + opt.LongName + ValueName(opt)
}

// ValueName is how an option's value is written after its name: "=N",
// "[=INTERVAL]" for an optional one, "=console|json" for choices, or "".
func ValueName(opt *flags.Option) string {
	name := opt.ValueName
	if len(opt.Choices) > 0 {
		name = strings.Join(opt.Choices, "|")
	}
	switch {
	case opt.OptionalArgument:
		return "[=" + name + "]"
	case TakesValue(opt):
		return "=" + name
	}
	return ""
}

// DefaultOf is an option's default as --help and the man page show it, or
// "" when it has none worth saying (a switch, an empty or zero value).
func DefaultOf(opt *flags.Option) string {
	switch {
	case opt.DefaultMask == "-":
		return ""
	case opt.DefaultMask != "":
		return opt.DefaultMask
	case len(opt.Default) == 0 || opt.Default[0] == "":
		return ""
	}
	return strings.Join(opt.Default, ",")
}

// optionList is how --help lays out options: flags, and the short
// description beside them from column 28, or below longer flags.
var optionList = List{Col: 28}

// WriteOptions writes parser's options as --help shows them: by group,
// each under its name, and then --help itself.
func WriteOptions(w io.Writer, parser *flags.Parser) {
	for _, group := range Groups(parser) {
		fmt.Fprintf(w, "\n%s:\n", group.ShortDescription)
		for _, opt := range Shown(group) {
			WriteOption(w, opt)
		}
	}
	optionList.Write(w, "-h, --help", "Show this help and exit")
}

// WriteOption writes opt's lines in --help: its flags, then its short
// description and default, wrapped beside them or below longer flags.
func WriteOption(w io.Writer, opt *flags.Option) {
	text := opt.Description
	if def := DefaultOf(opt); def != "" && len(opt.Choices) == 0 {
		text += " (default " + def + ")"
	}
	optionList.Write(w, FlagNames(opt), text)
}
