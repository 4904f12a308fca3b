package cli

import (
	"fmt"
	"io"
	"strings"
)

// Width is the width that --help fits: an 80-column terminal.
const Width = 80

// Wrap breaks text into lines of at most width bytes at spaces (a longer
// word gets a line of its own).
func Wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// WrapLines is Wrap's lines joined, each ended by a newline.
func WrapLines(text string, width int) string {
	return strings.Join(Wrap(text, width), "\n") + "\n"
}

// List lays out terms and what they mean, as --help lists options, verbs
// and exit codes: each term indented by two spaces, and its text wrapped in
// a column that starts at Col, beside the term where the term leaves room
// for it, below it otherwise.
type List struct {
	// Col is where the text's column starts.
	Col int
	// TermAlone puts every term on a line of its own, its text below.
	TermAlone bool
}

// Write writes term and its text.
func (l List) Write(w io.Writer, term, text string) {
	term = "  " + term
	lines := Wrap(text, Width-l.Col)
	if l.TermAlone || len(term) > l.Col-2 {
		fmt.Fprintln(w, term)
	} else {
		fmt.Fprintf(w, "%-*s%s\n", l.Col, term, lines[0])
		lines = lines[1:]
	}
	for _, line := range lines {
		fmt.Fprintf(w, "%s%s\n", strings.Repeat(" ", l.Col), line)
	}
}
