package cli

import (
	"fmt"
	"io"
)

// Code is how a table writes an exit code: a number, or the form of a
// family of codes ("N", "128+N").
type Code interface{ ~int | ~string }

// ExitStatus is one row of a command's table of exit codes, the one table
// that --help, the man page and the docs' tests read.
type ExitStatus[C Code] struct {
	Code    C
	Meaning string
}

// WriteExitCodes writes the table of exit codes in --help, laid out by
// list, and note, if any, below it.
func WriteExitCodes[C Code](w io.Writer, table []ExitStatus[C], list List, note string) {
	fmt.Fprint(w, "\nExit codes:\n")
	for _, st := range table {
		list.Write(w, fmt.Sprint(st.Code), st.Meaning)
	}
	if note == "" {
		return
	}
	for _, line := range Wrap(note, Width-2) {
		fmt.Fprintf(w, "  %s\n", line)
	}
}

// writeManExitStatus writes a man page's EXIT STATUS from the table, and
// note, if any, below it.
func writeManExitStatus[C Code](w io.Writer, table []ExitStatus[C], note string) {
	fmt.Fprintln(w, ".SH EXIT STATUS")
	for _, st := range table {
		fmt.Fprintf(w, ".TP\n\\fB%s\\fP\n%s\n", Troff(fmt.Sprint(st.Code)), Troff(st.Meaning))
	}
	if note != "" {
		fmt.Fprintf(w, ".PP\n%s\n", Troff(note))
	}
}
