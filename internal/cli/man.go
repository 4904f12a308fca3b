package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	flags "github.com/jessevdk/go-flags"
)

// ManPage is what a command's man page says besides its options, which
// come from its parser, so that the page cannot drift from them.
type ManPage[C Code] struct {
	// Summary follows the name in NAME.
	Summary string
	// Description and Environment are DESCRIPTION and ENVIRONMENT (none
	// if empty), in paragraphs apart by blank lines.
	Description, Environment string
	// ExitCodes and ExitNote are EXIT STATUS: the command's table, and a
	// line below it.
	ExitCodes []ExitStatus[C]
	ExitNote  string
}

// Write writes the man page of parser's command. It is dated by
// SOURCE_DATE_EPOCH when set, so that the same source gives the same page.
func (m ManPage[C]) Write(w io.Writer, parser *flags.Parser) {
	date := time.Now()
	if epoch, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		date = time.Unix(epoch, 0)
	}
	fmt.Fprintf(w, ".TH %s 1 %q\n", parser.Name, date.UTC().Format("2 January 2006"))
	fmt.Fprintf(w, ".SH NAME\n%s \\- %s\n", parser.Name, Troff(m.Summary))
	fmt.Fprintf(w, ".SH SYNOPSIS\n\\fB%s\\fP %s\n", parser.Name, Troff(parser.Usage))
	fmt.Fprintln(w, ".SH DESCRIPTION")
	writeManParagraphs(w, m.Description)
	fmt.Fprintln(w, ".SH OPTIONS")
	for _, group := range Groups(parser) {
		fmt.Fprintf(w, ".SS %s\n", Troff(group.ShortDescription))
		for _, opt := range Shown(group) {
			writeManOption(w, opt)
		}
	}
	fmt.Fprintf(w, ".TP\n\\fB\\-h\\fP, \\fB\\-\\-help\\fP\nShow the help and exit.\n")
	if m.Environment != "" {
		fmt.Fprintln(w, ".SH ENVIRONMENT")
		writeManParagraphs(w, m.Environment)
	}
	writeManExitStatus(w, m.ExitCodes, m.ExitNote)
}

// writeManOption writes opt's entry in OPTIONS: its flags, its details (or
// its description), and its variable, default and choices.
func writeManOption(w io.Writer, opt *flags.Option) {
	fmt.Fprintln(w, ".TP")
	if opt.ShortName != 0 {
		fmt.Fprintf(w, "\\fB\\-%c\\fP, ", opt.ShortName)
	}
	fmt.Fprintf(w, "\\fB\\-\\-%s\\fP", Troff(opt.LongName))
	if value := ValueName(opt); value != "" {
		name, optional := strings.CutPrefix(strings.TrimSuffix(value, "]"), "[")
		name = strings.TrimPrefix(name, "=")
		if optional {
			fmt.Fprintf(w, "[=\\fI%s\\fP]", Troff(name))
		} else {
			fmt.Fprintf(w, "=\\fI%s\\fP", Troff(name))
		}
	}
	fmt.Fprintln(w)
	text := opt.Field().Tag.Get("details")
	if text == "" {
		text = opt.Description + "."
	}
	var facts []string
	if opt.EnvDefaultKey != "" {
		facts = append(facts, "Variable: "+opt.EnvDefaultKey+".")
	}
	if def := DefaultOf(opt); def != "" {
		facts = append(facts, "Default: "+def+".")
	}
	if len(opt.Choices) > 0 {
		facts = append(facts, "Choices: "+strings.Join(opt.Choices, ", ")+".")
	}
	fmt.Fprintln(w, Troff(text))
	if len(facts) > 0 {
		fmt.Fprintf(w, ".br\n%s\n", Troff(strings.Join(facts, " ")))
	}
}

// writeManParagraphs writes text, whose paragraphs are apart by blank
// lines, as the man page's paragraphs.
func writeManParagraphs(w io.Writer, text string) {
	for i, para := range strings.Split(text, "\n\n") {
		if i > 0 {
			fmt.Fprintln(w, ".PP")
		}
		fmt.Fprintln(w, Troff(para))
	}
}

// Troff escapes text for a man page: a hyphen is \- there, and a line
// that starts with a dot or a quote would be read as a request.
func Troff(text string) string {
	text = strings.ReplaceAll(text, `\`, `\e`)
	text = strings.ReplaceAll(text, "-", `\-`)
	if strings.HasPrefix(text, ".") || strings.HasPrefix(text, "'") {
		text = `\&` + text
	}
	return text
}
