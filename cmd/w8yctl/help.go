package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/cli"
)

// helpIntro follows the usage line in --help.
const helpIntro = `w8yctl changes what a fleet of w8y workers does, through the Redis they share.
It connects as w8y does, with the same options and W8Y_* variables (-u, -k,
--redis-cluster, --sentinel-master, TLS, W8Y_REDIS_PASSWORD). Each verb that
changes something is one atomic step where the prefix's keys are on one server;
a command that is refused changes nothing. Put ITEMs that start with - after --.
`

// docsNote ends the man page: where the rest is said.
const docsNote = "The full documentation is in the docs/ folder of w8y's source: docs/reference.md for w8yctl's verbs, options, output and exit codes, docs/operating.md for running a fleet with it."

// helpList lays out the verbs and the exit codes in --help: each on a line
// of its own, what it means below it.
var helpList = cli.List{Col: 6, TermAlone: true}

// writeHelp writes --help: for a command line that names a verb, that
// verb's help; otherwise the usage, the verbs, the options and the exit
// codes.
func writeHelp(parser *flags.Parser, args []string, w io.Writer) {
	if v := findVerb(cli.FirstArgument(parser, args)); v != nil {
		writeVerbHelp(parser, v, w)
		return
	}
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\nVerbs:\n", parser.Name, parser.Usage, helpIntro)
	for _, v := range verbs {
		helpList.Write(w, v.usage, v.about)
	}
	cli.WriteOptions(w, parser)
	cli.WriteExitCodes(w, exitStatuses, helpList, "")
}

// writeVerbHelp writes w8yctl VERB --help: the verb's usage, what it does,
// its own options and an example.
func writeVerbHelp(parser *flags.Parser, v *verb, w io.Writer) {
	fmt.Fprintf(w, "Usage: %s [OPTIONS] %s\n\n%s", parser.Name, v.usage, cli.WrapLines(v.about+".", cli.Width))
	fmt.Fprintf(w, "\nOptions of %s:\n", v.name)
	for _, opt := range verbOptions(parser, v) {
		cli.WriteOption(w, opt)
	}
	fmt.Fprintf(w, "\nExample:\n  %s\n\n%s", v.example,
		cli.WrapLines("The Redis options (-u, -k, --redis-cluster, TLS...) and the exit codes are those of w8yctl --help.", cli.Width))
}

// verbOptions are the options that v takes besides the Redis ones: those
// of the verbs that name v, and those that every verb takes.
func verbOptions(parser *flags.Parser, v *verb) []*flags.Option {
	var out []*flags.Option
	for _, group := range cli.Groups(parser) {
		if group.ShortDescription != verbGroup {
			continue
		}
		for _, opt := range cli.Shown(group) {
			if takers, ok := optionTakers(opt); !ok || slices.Contains(takers, v.name) {
				out = append(out, opt)
			}
		}
	}
	return out
}

// optionTakers lists the verbs that take opt, an option of the verbs
// whose description starts with them ("pause, cancel: why..."); ok is
// false for one that every verb takes (--json).
func optionTakers(opt *flags.Option) (takers []string, ok bool) {
	if !slices.Contains(verbSpecific, opt.LongName) {
		return nil, false
	}
	before, _, _ := strings.Cut(opt.Description, ":")
	return strings.Split(before, ", "), true
}

// writeManPage writes the man page that make man installs: the
// introduction and the verbs, the options, and the exit codes.
func writeManPage(parser *flags.Parser, w io.Writer) {
	var description strings.Builder
	description.WriteString(strings.ReplaceAll(strings.TrimSuffix(helpIntro, "\n"), "\n", " "))
	for _, v := range verbs {
		fmt.Fprintf(&description, "\n\nw8yctl %s: %s. Example: %s", v.usage, v.about, v.example)
	}
	description.WriteString("\n\n" + docsNote)
	cli.ManPage[int]{
		Summary:     parser.ShortDescription,
		Description: description.String(),
		ExitCodes:   exitStatuses,
	}.Write(w, parser)
}
