package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	flags "github.com/jessevdk/go-flags"
)

// testOptions is a command's options, as go-flags reads them, in groups.
type testOptions struct {
	First struct {
		Prefix string `short:"k" long:"key-prefix" env:"T_KEY_PREFIX" value-name:"PREFIX" description:"Prefix of the keys"`
		Go     bool   `short:"c" long:"continuous" env:"T_CONTINUOUS" description:"Keep going"`
		Format string `long:"log-format" default:"console" choice:"console" choice:"json" description:"Log format"`
		N      int    `long:"parallel" env:"T_PARALLEL" default:"1" value-name:"N" description:"Run up to N children at once, which is a description long enough to wrap"`
	} `group:"First"`
	Second struct {
		Watch  string `long:"watch" optional:"true" optional-value:"2s" value-name:"INTERVAL" description:"Show it again"`
		Secret bool   `long:"man-page" hidden:"true" description:"Print the man page"`
	} `group:"Second"`
}

func testParser() *flags.Parser {
	parser := flags.NewParser(&testOptions{}, flags.HelpFlag|flags.PassDoubleDash|flags.PassAfterNonOption)
	parser.Name = "t"
	parser.Usage = "[OPTIONS] executable"
	return parser
}

func TestWrap(t *testing.T) {
	tests := []struct {
		text  string
		width int
		want  []string
	}{
		{"", 10, []string{""}},
		{"one two three", 80, []string{"one two three"}},
		{"one two three", 7, []string{"one two", "three"}},
		{"one  two\nthree", 8, []string{"one two", "three"}},
		{"a verylongword b", 5, []string{"a", "verylongword", "b"}},
	}
	for _, tt := range tests {
		if got := Wrap(tt.text, tt.width); !slices.Equal(got, tt.want) {
			t.Errorf("Wrap(%q, %d) = %q, want %q", tt.text, tt.width, got, tt.want)
		}
	}
	if got := WrapLines("one two three", 7); got != "one two\nthree\n" {
		t.Errorf("WrapLines: %q", got)
	}
}

func TestList(t *testing.T) {
	long := strings.Repeat("word ", 20)
	tests := []struct {
		list       List
		term, text string
		want       string
	}{
		{List{Col: 11}, "125", "failed", "  125      failed\n"},
		{List{Col: 6}, "longterm", "text", "  longterm\n      text\n"},
		{List{Col: 6, TermAlone: true}, "0", "done", "  0\n      done\n"},
		{List{Col: 60}, "x", long, "  x" + strings.Repeat(" ", 57) + "word word word word\n" + strings.Repeat(strings.Repeat(" ", 60)+"word word word word\n", 4)},
	}
	for _, tt := range tests {
		var out strings.Builder
		tt.list.Write(&out, tt.term, tt.text)
		if out.String() != tt.want {
			t.Errorf("%+v.Write(%q, %q) =\n%q, want\n%q", tt.list, tt.term, tt.text, out.String(), tt.want)
		}
	}
}

func TestOptionListing(t *testing.T) {
	parser := testParser()
	var names []string
	for _, opt := range AllOptions(parser) {
		names = append(names, opt.LongName)
	}
	if want := []string{"key-prefix", "continuous", "log-format", "parallel", "watch", "man-page"}; !slices.Equal(names, want) {
		t.Errorf("AllOptions: %q, want %q", names, want)
	}
	tests := []struct{ name, flags, def string }{
		{"key-prefix", "-k, --key-prefix=PREFIX", ""},
		{"continuous", "-c, --continuous", ""},
		{"log-format", "    --log-format=console|json", "console"},
		{"parallel", "    --parallel=N", "1"},
		{"watch", "    --watch[=INTERVAL]", ""},
	}
	for _, tt := range tests {
		opt := parser.FindOptionByLongName(tt.name)
		if got := FlagNames(opt); got != tt.flags {
			t.Errorf("FlagNames(--%s) = %q, want %q", tt.name, got, tt.flags)
		}
		if got := DefaultOf(opt); got != tt.def {
			t.Errorf("DefaultOf(--%s) = %q, want %q", tt.name, got, tt.def)
		}
	}
	var out strings.Builder
	WriteOptions(&out, parser)
	want := `
First:
  -k, --key-prefix=PREFIX   Prefix of the keys
  -c, --continuous          Keep going
      --log-format=console|json
                            Log format
      --parallel=N          Run up to N children at once, which is a description
                            long enough to wrap (default 1)

Second:
      --watch[=INTERVAL]    Show it again
  -h, --help                Show this help and exit
`
	if out.String() != want {
		t.Errorf("WriteOptions:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestExitCodes(t *testing.T) {
	var out strings.Builder
	WriteExitCodes(&out, []ExitStatus[string]{{Code: "N", Meaning: "the child's code"}, {Code: "125", Meaning: "failed"}}, List{Col: 11}, "With --status: 0.")
	if want := "\nExit codes:\n  N        the child's code\n  125      failed\n  With --status: 0.\n"; out.String() != want {
		t.Errorf("w8y's layout:\n%q, want\n%q", out.String(), want)
	}
	out.Reset()
	WriteExitCodes(&out, []ExitStatus[int]{{Code: 0, Meaning: "done"}, {Code: 1, Meaning: "found"}}, List{Col: 6, TermAlone: true}, "")
	if want := "\nExit codes:\n  0\n      done\n  1\n      found\n"; out.String() != want {
		t.Errorf("w8yctl's layout:\n%q, want\n%q", out.String(), want)
	}
}

func TestManPage(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "0")
	var out strings.Builder
	ManPage[int]{Summary: "test it", Description: "One -k.\n\n.Two", ExitCodes: []ExitStatus[int]{{Code: 125, Meaning: "it-failed"}}}.Write(&out, testParser())
	page := out.String()
	for _, want := range []string{
		".TH t 1 \"1 January 1970\"\n.SH NAME\nt \\- test it\n.SH SYNOPSIS\n\\fBt\\fP [OPTIONS] executable\n",
		".SH DESCRIPTION\nOne \\-k.\n.PP\n\\&.Two\n",
		".SS First\n.TP\n\\fB\\-k\\fP, \\fB\\-\\-key\\-prefix\\fP=\\fIPREFIX\\fP\nPrefix of the keys.\n.br\nVariable: T_KEY_PREFIX.\n",
		"\\fB\\-\\-log\\-format\\fP=\\fIconsole|json\\fP\nLog format.\n.br\nDefault: console. Choices: console, json.\n",
		"\\fB\\-\\-watch\\fP[=\\fIINTERVAL\\fP]\n",
		".SH EXIT STATUS\n.TP\n\\fB125\\fP\nit\\-failed\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "man\\-page") || strings.Contains(page, ".SH ENVIRONMENT") {
		t.Errorf("the page shows a hidden option or an empty ENVIRONMENT:\n%s", page)
	}
}

func TestComplete(t *testing.T) {
	verbs := []string{"pause", "resume", "run-now"}
	tests := []struct {
		verbs []string
		words []string
		want  []string
	}{
		// Without verbs, as w8y: options up to the executable.
		{nil, []string{"--co"}, []string{"--continuous"}},
		{nil, []string{"--"}, []string{"--continuous", "--help", "--key-prefix", "--log-format", "--parallel", "--watch"}},
		{nil, []string{"-ck", "x", "--wa"}, []string{"--watch"}},
		{nil, []string{"--log-format", ""}, []string{"console", "json"}},
		{nil, []string{"--log-format=j"}, []string{"--log-format=json"}},
		{nil, []string{"-k", ""}, nil},
		{nil, []string{"sh", "--co"}, nil},
		{nil, []string{"--", "--co"}, nil},
		{nil, []string{"--bogus", "--co"}, nil},
		{nil, []string{"r"}, nil},
		// With verbs, as w8yctl: the verb, and options after it.
		{verbs, []string{"r"}, []string{"resume", "run-now"}},
		{verbs, []string{"-k", "x", ""}, verbs},
		{verbs, []string{"pause", "a", "--co"}, []string{"--continuous"}},
		{verbs, []string{"pause", "r"}, nil},
		{verbs, []string{"--bogus", "p"}, []string{"pause"}},
		{verbs, []string{"pause", "-k", ""}, nil},
		{verbs, []string{"pause", "--", "--co"}, nil},
		{verbs, nil, verbs},
	}
	for _, tt := range tests {
		var out strings.Builder
		Complete(testParser(), tt.verbs, tt.words, &out)
		if got := strings.Fields(out.String()); !slices.Equal(got, tt.want) {
			t.Errorf("verbs %q, %q completed to %q, want %q", tt.verbs, tt.words, got, tt.want)
		}
	}
}

func TestFirstArgument(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"pause", "--help"}, "pause"},
		{[]string{"-k", "pause", "resume", "-h"}, "resume"},
		{[]string{"-ck", "x", "--watch", "status"}, "status"},
		{[]string{"--key-prefix=x", "--", "pause"}, ""},
		{[]string{"--help"}, ""},
	}
	for _, tt := range tests {
		if got := FirstArgument(testParser(), tt.args); got != tt.want {
			t.Errorf("FirstArgument(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// usage is a command's error for a bad command line.
type usage struct{ msg string }

func (u usage) Error() string { return u.msg }

func TestExplainer(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--bogus", "x"}, nil, "unknown flag 'bogus' (see t --help)"},
		{[]string{"--parallel", "two", "x"}, nil, `--parallel "two": not a whole number such as 3`},
		{[]string{"--log-format", "xml", "x"}, nil, `--log-format "xml": not one of console, json`},
		{[]string{"x"}, map[string]string{"T_CONTINUOUS": "yes"}, `T_CONTINUOUS="yes": not true or false (nor 1 or 0)`},
		{[]string{"--continuous=yes", "x"}, nil, "--continuous takes no value: it is on when given (for a variable, T_CONTINUOUS=true)"},
		{[]string{"-continuous", "x"}, nil, "-continuous: long options take two dashes: did you mean --continuous?"},
		{[]string{"--key-prefix"}, nil, "expected argument for flag -k, --key-prefix (see t --help)"},
	}
	for _, tt := range tests {
		parser := testParser()
		e := Explainer{
			Parser:    parser,
			NewParser: testParser,
			LookupEnv: func(name string) (string, bool) { v, ok := tt.env[name]; return v, ok },
			Usage:     func(format string, args ...any) error { return usage{fmt.Sprintf(format, args...)} },
		}
		err := func() error {
			if _, err := e.CommandLine(tt.args); err != nil {
				return err
			}
			for name, value := range tt.env {
				t.Setenv(name, value)
			}
			if _, err := parser.ParseArgs(tt.args); err != nil {
				return e.ParseError(tt.args, err)
			}
			return nil
		}()
		var u usage
		if !errors.As(err, &u) || u.msg != tt.want {
			t.Errorf("%q: %v, want the usage error %q", tt.args, err, tt.want)
		}
	}
}

func TestSetBy(t *testing.T) {
	env := map[string]string{"T_PARALLEL": "0"}
	e := Explainer{Parser: testParser(), LookupEnv: func(name string) (string, bool) { v, ok := env[name]; return v, ok }}
	tests := []struct {
		args, msg       string
		variable, value string
		ok              bool
	}{
		{"x", "--parallel must be at least 1, got 0", "T_PARALLEL", "0", true},
		{"--parallel 0 x", "--parallel must be at least 1, got 0", "", "", false},
		{"x", "--key-prefix is bad", "", "", false},
		{"x", "no option named", "", "", false},
	}
	for _, tt := range tests {
		variable, value, ok := e.SetBy(strings.Fields(tt.args), tt.msg)
		if variable != tt.variable || value != tt.value || ok != tt.ok {
			t.Errorf("SetBy(%q, %q) = %q, %q, %v; want %q, %q, %v", tt.args, tt.msg, variable, value, ok, tt.variable, tt.value, tt.ok)
		}
	}
}

// lines is an error that is a list of lines.
type lines []string

func (l lines) Error() string   { return strings.Join(l, "\n") }
func (l lines) Lines() []string { return l }

func TestFailureLine(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{errors.New("Redis is down"), "w8y: Redis is down\n"},
		{errors.New("two\nlines"), "w8y: two lines\n"},
		{fmt.Errorf("add: %w", lines{"item 1 is empty", "item 2 is too long"}), "w8y: item 1 is empty\nw8y: item 2 is too long\n"},
	}
	for _, tt := range tests {
		var out strings.Builder
		if code := Fail(&out, "w8y", tt.err, 125); code != 125 {
			t.Errorf("Fail returned %d, want the code it was given", code)
		}
		if out.String() != tt.want {
			t.Errorf("%v printed %q, want %q", tt.err, out.String(), tt.want)
		}
	}
}
