package main

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/doctest"
)

// goSpeak is what go-flags and strconv say in Go's words, which mean
// nothing to a user.
var goSpeak = regexp.MustCompile(`expected [a-z]+\.|strconv\.|main\.|invalid syntax|\(expected `)

// TestParseCommand: what a command line means, and the one line that a bad
// one gets, in the user's words.
func TestParseCommand(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string // the verb and items, or the error
	}{
		{[]string{"add", "a", "b"}, nil, "add [a b]"},
		{[]string{"-k", "work", "pause", "--for", "90m", "--reason", "disk full", "a"}, nil, "pause [a] for=1h30m0s"},
		{[]string{"pause", "--for", "inf", "a"}, nil, "pause [a]"},
		{[]string{"events", "--follow", "--item", "a", "-n", "3"}, nil, "events [] count=3"},
		{[]string{"remove", "--", "-dash"}, nil, "remove [-dash]"},
		{[]string{"status", "--watch"}, nil, "status [] watch=2s"},
		{[]string{"events", "--since", "1764064800000-3"}, nil, "events [] count=0 since=1764064800000-3"},
		{[]string{"events", "--since", "2026-11-25T10:00:00Z", "-n", "5"}, nil, "events [] count=5 since=1795600800000"},
		{[]string{"events", "--since", "yesterday"}, nil, `--since "yesterday": give a time`},
		{[]string{"pause", "--since", "1h", "a"}, nil, "--since goes with events, not pause"},
		{[]string{"status", "--watch=10ms"}, nil, `--watch "10ms": give an interval of at least 100ms`},
		{[]string{"add", "--watch", "a"}, nil, "--watch goes with status, not add"},
		{nil, nil, "missing verb"},
		{[]string{"frob", "a"}, nil, `unknown verb "frob"`},
		{[]string{"pause"}, nil, "pause needs at least one ITEM"},
		{[]string{"run-now", "a", "b", "a"}, nil, `item "a" is given twice`},
		{[]string{"events", "a"}, nil, "events takes no items"},
		{[]string{"pause", "--for", "soon", "a"}, nil, `--for "soon"`},
		{[]string{"pause", "--for=-5m", "a"}, nil, "cannot last a negative time"},
		{[]string{"pause", "--for", "-5m", "a"}, nil, "--for -5m: a value that starts with -"},
		{[]string{"pause", "--for", "0", "a"}, nil, "at least 1ms"},
		{[]string{"add", "--reason", "x", "a"}, nil, "--reason goes with pause or cancel, not add"},
		{[]string{"pause", "--as-failure", "a"}, nil, "--as-failure goes with cancel, not pause"},
		{[]string{"add", "--cancel", "a"}, nil, "--cancel goes with remove, not add"},
		{[]string{"cancel", "--reason", "disk full", "--as-failure", "a", "b"}, nil, "cancel [a b]"},
		{[]string{"remove", "--cancel", "a"}, nil, "remove [a]"},
		{[]string{"cancel"}, nil, "cancel needs at least one ITEM"},
		{[]string{"events", "-n", "0"}, nil, `--count "0": give a whole number`},
		{[]string{"add", "--bogus", "a"}, nil, "--bogus: no such option (see w8yctl --help); an ITEM that starts with - goes after --, as in: w8yctl add -- --bogus"},
		{[]string{"add", "-dash"}, nil, "-dash: no such option (see w8yctl --help); an ITEM that starts with - goes after --, as in: w8yctl add -- -dash"},
		{[]string{"-k", "w", "pause", "a", "-for", "1h"}, nil, "-for: long options take two dashes: did you mean --for? (an ITEM that starts with - goes after --)"},
		{[]string{"status", "-limit=5"}, nil, "-limit=5: long options take two dashes: did you mean --limit?"},
		{[]string{"pause", "--reason=-for", "-n", "5", "a"}, nil, "--count goes with events, not pause"},
		{[]string{"status", "--state", "failing,idle", "--match", "r*", "--limit", "3"}, nil, "status []"},
		{[]string{"status", "--state", "stuck"}, nil, `--state "stuck": "stuck" is not a state: give one or more of running, paused`},
		{[]string{"status", "--limit", "-1"}, nil, `--limit -1: a value that starts with -`},
		{[]string{"status", "--limit=x"}, nil, `--limit "x": give a whole number of rows`},
		{[]string{"status", "--limit", "3", "a"}, nil, "--state, --match and --limit choose the rows of the table of every item: give them without ITEMs"},
		{[]string{"add", "--state", "idle", "a"}, nil, "--state goes with status, not add"},
		{[]string{"add", "a"}, map[string]string{"W8Y_REDIS_CLUSTER": "maybe"}, `W8Y_REDIS_CLUSTER="maybe": not true or false`},
		{[]string{"add", "--json=yes", "a"}, nil, "cannot have an argument"},
		{[]string{"add", "-u", "http://x", "a"}, nil, "--redis-url"},
		{[]string{"serve", "--addr", "127.0.0.1:0"}, nil, "serve []"},
		{[]string{"serve"}, nil, "serve needs --addr HOST:PORT"},
		{[]string{"serve", "--addr", ":8080", "a"}, nil, "serve takes no items"},
		{[]string{"status", "--addr", ":8080"}, nil, "--addr goes with serve, not status"},
		{[]string{"serve", "--addr", ":8080", "--token-file", "/nonexistent/token"}, nil, "--token-file: open /nonexistent/token"},
		{[]string{"serve", "--addr", ":8080", "--token-file", "/dev/null"}, nil, `--token-file "/dev/null" is empty`},
		{[]string{"set", "big", "--schedule", "0 * * * *", "--timeout", "2h"}, nil, "set [big] settings=--timeout 2h0m0s --schedule '0 * * * *'"},
		{[]string{"-k", "w", "set", "a", "b", "--failure-backoff", "5s"}, nil, "set [a b] settings=--failure-backoff 5s,50s"},
		{[]string{"set", "a"}, nil, "set needs at least one setting"},
		{[]string{"set", "--cooldown", "1h"}, nil, "set needs at least one ITEM"},
		{[]string{"set", "a", "--cooldown", "1h", "--schedule", "@daily"}, nil, "--cooldown and --schedule are alternatives"},
		{[]string{"set", "a", "--timeout", "later"}, nil, `--timeout "later"`},
		{[]string{"unset", "a", "--cooldown", "--timeout"}, nil, "unset [a] settings=--cooldown '' --timeout ''"},
		{[]string{"unset", "--schedule", "a", "b"}, nil, "unset [a b] settings=--schedule ''"},
		{[]string{"unset", "a"}, nil, "unset [a]"},
		{[]string{"unset", "a", "--", "--cooldown"}, nil, "unset [a --cooldown]"},
		{[]string{"unset", "a", "--cooldown=1h"}, nil, "unset removes settings and takes no values: give --cooldown alone"},
		{[]string{"pause", "a", "--cooldown", "1h"}, nil, "--cooldown goes with set or unset, not pause"},
	}
	for _, tt := range tests {
		// go-flags reads the variables from the process' environment.
		for name, value := range tt.env {
			t.Setenv(name, value)
		}
		c, err := parseCommand(tt.args, os.Getenv, io.Discard)
		for name := range tt.env {
			os.Unsetenv(name)
		}
		var got string
		if err != nil {
			got = err.Error()
			if goSpeak.MatchString(got) || strings.Contains(got, "\n") {
				t.Errorf("%q: %q is not one line in the user's words", tt.args, got)
			}
		} else {
			got = c.verb.name + " " + strings.Join(strings.Fields("["+strings.Join(c.items, " ")+"]"), " ")
			if c.pauseFor > 0 {
				got += " for=" + c.pauseFor.String()
			}
			if c.watch > 0 {
				got += " watch=" + c.watch.String()
			}
			if c.count != 10 {
				got += " count=" + strconv.FormatInt(c.count, 10)
			}
			if c.since != "" {
				got += " since=" + c.since
			}
			if len(c.settings) > 0 {
				got += " settings=" + c.settings.String()
			}
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestHelpShowsEveryVerbAndExitCode: --help exits 0 and names every verb
// and exit code.
func TestHelpShowsEveryVerbAndExitCode(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"--help"}, func(string) string { return "" }, &out, io.Discard); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	for _, v := range verbs {
		if !strings.Contains(out.String(), "\n  "+v.usage+"\n") {
			t.Errorf("--help lacks %q", v.usage)
		}
	}
	for _, st := range exitStatuses {
		if !strings.Contains(out.String(), "\n  "+strconv.Itoa(st.Code)+"\n") {
			t.Errorf("--help lacks exit code %d", st.Code)
		}
	}
}

// TestHelpPrintsOnce: --help says each thing once (go-flags' own help
// used to repeat the introduction, the verbs and the exit codes).
func TestHelpPrintsOnce(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"--help"}, func(string) string { return "" }, &out, io.Discard); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	for _, once := range []string{"w8yctl changes", "Verbs:", "Exit codes:", "--key-prefix"} {
		if n := strings.Count(out.String(), once); n != 1 {
			t.Errorf("--help says %q %d times, want once", once, n)
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if len(line) > 80 {
			t.Errorf("a %d-column line: %q", len(line), line)
		}
	}
}

// TestVerbHelp: w8yctl VERB --help prints the verb's own usage, its
// options and its example, not the whole help; its example is a command
// line that w8yctl takes.
func TestVerbHelp(t *testing.T) {
	for _, v := range verbs {
		for _, args := range [][]string{{v.name, "--help"}, {"-k", "work", v.name, "a", "-h"}} {
			var out strings.Builder
			if code := run(args, func(string) string { return "" }, &out, io.Discard); code != 0 {
				t.Fatalf("%q exited %d", args, code)
			}
			help := out.String()
			if !strings.HasPrefix(help, "Usage: w8yctl [OPTIONS] "+v.usage+"\n") {
				t.Errorf("%q does not start with the verb's usage:\n%s", args, help)
			}
			if !strings.Contains(help, "\nExample:\n  "+v.example+"\n") {
				t.Errorf("%q lacks the verb's example:\n%s", args, help)
			}
			if strings.Contains(help, "Verbs:") || strings.Contains(help, "w8yctl changes") {
				t.Errorf("%q prints the whole help:\n%s", args, help)
			}
			for _, name := range verbSpecific {
				takers, _ := optionTakers(parserOf(t).FindOptionByLongName(name))
				if got, want := strings.Contains(help, "--"+name), slices.Contains(takers, v.name); got != want {
					t.Errorf("%q shows --%s: %v, want %v", args, name, got, want)
				}
			}
		}
		words := strings.Fields(v.example)
		if words[0] != "w8yctl" {
			t.Errorf("%s's example %q is not a w8yctl command", v.name, v.example)
			continue
		}
		c, err := parseCommand(words[1:], func(string) string { return "" }, io.Discard)
		if err != nil || c.verb != v {
			t.Errorf("%s's example %q: %v", v.name, v.example, err)
		}
	}
}

// parserOf is the parser of w8yctl's options, for reading them.
func parserOf(t *testing.T) *flags.Parser {
	t.Helper()
	return flags.NewParser(&Options{}, flags.None)
}

// TestDocsExitCodes: the reference's table of w8yctl's exit codes lists
// the codes of the one table, in its order.
func TestDocsExitCodes(t *testing.T) {
	section := doctest.Section(t, "docs/reference.md", "## w8yctl")
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^\| ([0-9]+) \|`).FindAllStringSubmatch(section, -1) {
		got = append(got, m[1])
	}
	var want []string
	for _, st := range exitStatuses {
		want = append(want, strconv.Itoa(st.Code))
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/reference.md's exit codes of w8yctl %q, want %q as in exitStatuses", got, want)
	}
}
