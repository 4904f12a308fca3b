package main

import (
	"fmt"
	"io"
	"strings"

	flags "github.com/jessevdk/go-flags"
)

// helpIntro follows the usage line in --help.
const helpIntro = `w8yctl changes what a fleet of w8y workers does, through the Redis they share.
It connects as w8y does, with the same options and W8Y_* variables (-u, -k,
--redis-cluster, --sentinel-master, TLS, W8Y_REDIS_PASSWORD). Each verb that
changes something is one atomic step where the prefix's keys are on one server;
a command that is refused changes nothing. Put ITEMs that start with - after --.
`

// writeHelp writes --help: the usage, the verbs, the options and the exit
// codes.
func writeHelp(parser *flags.Parser, w io.Writer) {
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\nVerbs:\n", parser.Name, parser.Usage, helpIntro)
	for _, v := range verbs {
		fmt.Fprintf(w, "  %s\n", v.usage)
		writeWrapped(w, "      ", v.about)
	}
	fmt.Fprintln(w)
	// go-flags' own help lists the options by group; its usage line is
	// the one above.
	var options strings.Builder
	parser.WriteHelp(&options)
	_, after, _ := strings.Cut(options.String(), "\n\n")
	fmt.Fprint(w, after)
	fmt.Fprint(w, "\nExit codes:\n")
	for _, st := range exitStatuses {
		fmt.Fprintf(w, "  %d\n", st.Code)
		writeWrapped(w, "      ", st.Meaning)
	}
}

// helpWidth is the width --help fits: an 80-column terminal.
const helpWidth = 80

// writeWrapped writes text in lines of at most helpWidth bytes, each
// starting with indent, broken at spaces.
func writeWrapped(w io.Writer, indent, text string) {
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len(line)+1+len(word) > helpWidth {
			fmt.Fprintln(w, line)
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}

// manDescription is the man page's DESCRIPTION: the introduction, the
// verbs and the exit codes, which go-flags' man page does not know of.
func manDescription() string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(helpIntro, "\n", " "))
	for _, v := range verbs {
		fmt.Fprintf(&b, "\n\nw8yctl %s: %s.", v.usage, v.about)
	}
	b.WriteString("\n\nExit codes:")
	for _, st := range exitStatuses {
		fmt.Fprintf(&b, "\n\n%d: %s.", st.Code, st.Meaning)
	}
	return b.String()
}
