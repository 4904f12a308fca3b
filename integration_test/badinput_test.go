package integration_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// goSpeak finds what go-flags, go-redis and strconv say in Go's words:
// type and function names, which mean nothing to a user.
var goSpeak = regexp.MustCompile(`expected [a-z]+\.|strconv\.|main\.|duration\.Flag|\[\]int|invalid syntax|context deadline exceeded`)

// TestBadInput: every kind of bad input gets its documented exit code and
// one clear line on stderr, and leaves the list exactly as it was. Items
// that cannot be run are skipped with a one-line warning, and the pass goes
// on to the next item, which is run.
func TestBadInput(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	secured := startRedis(t, redistest.Password("right-horse-battery"))
	secured.seed(t, "auth:list", "a", "good")

	// A server that accepts connections but never answers: the kernel
	// completes the handshake into the backlog, and nothing ever reads.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })

	// A web server where Redis should be.
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "<!DOCTYPE HTML>\n<html></html>\n")
	}))
	t.Cleanup(web.Close)

	dir := t.TempDir()
	noRunBit := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(noRunBit, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badInterpreter := filepath.Join(dir, "job.py")
	writeExecutable(t, badInterpreter, []byte("#!/nonexistent/python3 -u\nprint('hi')\n"))
	megabyte := strings.Repeat("m", 1<<20)
	printItem := []string{"printf", "%s", "{}"}

	tests := []struct {
		name  string
		url   string   // the server's URL unless set
		args  []string // before the command
		env   []string // added to w8y's environment
		cmd   []string // printItem unless set
		items []string // []string{"bad", "good"} unless set
		setup func(t *testing.T, s *server, list string)
		code  int
		line  string // what the one line on stderr says; "" for no line
		ran   string // the item the child was run on, if any
		after func(t *testing.T, s *server, list string, took time.Duration)
	}{
		{name: "malformed URL", url: "redis://127.0.0.1:port", code: 125, line: "invalid --redis-url"},
		{name: "unknown scheme", url: "http://127.0.0.1:6379", code: 125, line: "invalid URL scheme"},
		{name: "URL without a scheme", url: "127.0.0.1:6379", code: 125, line: "it has no scheme: give redis://host:port"},
		{name: "URL without its slashes", url: "redis:127.0.0.1:1", code: 125, line: "such as redis://127.0.0.1:1"},
		{name: "empty URL", args: []string{"-u", ""}, code: 125, line: "--redis-url is empty"},
		{name: "negative database", url: "redis://127.0.0.1:1/-1", code: 125, line: `the database "-1" is not a number from 0 up`},
		{name: "TLS to a plain-text Redis", url: "rediss://127.0.0.1:" + itoa(s.Port), code: 125, line: "the server seems to speak plain text; a rediss:// URL needs a Redis with TLS"},
		{name: "a web server where Redis should be", url: "redis://" + strings.TrimPrefix(web.URL, "http://"), code: 125, line: "the server does not answer as Redis does"},
		{name: "unknown option", args: []string{"--frobnicate"}, code: 125, line: "unknown flag 'frobnicate'"},
		{name: "zero key expiry", args: []string{"-x", "0"}, code: 125, line: "--key-expiry must be at least"},
		{name: "negative key expiry", args: []string{"--key-expiry=-5"}, code: 125, line: "--key-expiry must be at least"},
		{name: "a duration that is not one", args: []string{"-x", "abc"}, code: 125, line: `-x "abc": "abc" is neither seconds nor a duration`},
		{name: "a boolean variable that is not one", env: []string{"W8Y_CONTINUOUS=yes"}, code: 125, line: `W8Y_CONTINUOUS="yes": not true or false`},
		{name: "a long option with one dash", args: []string{"-continuous"}, code: 125, line: "did you mean --continuous?"},
		{name: "kill-after beyond the lease", args: []string{"-x", "3", "--kill-after", "2s"}, code: 125, line: "--kill-after 2s cannot fit in --key-expiry 3s"},
		{
			name: "wrong type at the list", items: []string{},
			setup: func(t *testing.T, s *server, list string) { s.Client.Set(ctx(t), list, "not a list", 0) },
			code:  125, line: "holds a string, not a list of items",
			after: func(t *testing.T, s *server, list string, _ time.Duration) {
				if v, _ := s.Client.Get(ctx(t), list).Result(); v != "not a list" {
					t.Errorf("the list key changed: %q", v)
				}
			},
		},
		{
			name: "wrong type at a lock key", items: []string{"hashed", "good"},
			setup: func(t *testing.T, s *server, list string) {
				s.Client.HSet(ctx(t), strings.TrimSuffix(list, "list")+"lock:hashed", "field", "value")
			},
			code: 0, line: `holds a hash, not a lock`, ran: "good",
		},
		{name: "NUL byte in an item", items: []string{"bad\x00item", "good"}, code: 0, line: "NUL byte", ran: "good"},
		{name: "empty item", items: []string{"", "good"}, code: 0, line: "it is empty", ran: "good"},
		{name: "1 MB item", items: []string{megabyte, "good"}, code: 0, line: "1048576 bytes long", ran: "good"},
		{name: "non-UTF-8 item", items: []string{"caf\xe9\xff"}, code: 0, ran: "caf\xe9\xff"},
		{name: "executable missing", cmd: []string{"/nonexistent/job", "{}"}, code: 127, line: "not found"},
		{
			name: "script whose interpreter is missing", cmd: []string{badInterpreter, "{}"}, code: 127, line: "bad interpreter /nonexistent/python3: no such file",
			after: func(t *testing.T, s *server, list string, _ time.Duration) {
				// Checked before any item was taken: nothing was charged.
				if keys := s.keys(t, strings.TrimSuffix(list, "list")+"*"); !slices.Equal(keys, []string{list}) {
					t.Errorf("keys written: %q", keys)
				}
			},
		},
		{name: "executable without the run bit", cmd: []string{noRunBit, "{}"}, code: 126, line: "cannot be run"},
		// As env(1), timeout(1) and the shells: what PATH holds but cannot
		// run gives 126, not 127.
		{name: "dot as the executable", cmd: []string{"."}, code: 126, line: "is a directory"},
		{name: "found in PATH without the run bit", env: []string{"PATH=" + dir + ":" + os.Getenv("PATH")}, cmd: []string{"job.sh", "{}"}, code: 126, line: "job.sh is not executable"},
		// Durations: nothing wraps round to negative, a tiny timeout still
		// times out, and --kill-after's documented limit holds for any value.
		{name: "kill-after of 1e10 seconds", args: []string{"--kill-after", "1e10"}, code: 125, line: "--kill-after inf cannot fit in --key-expiry 5s"},
		{name: "infinite kill-after", args: []string{"--kill-after", "inf"}, code: 125, line: "lower --kill-after"},
		{name: "nan kill-after", args: []string{"--kill-after", "nan"}, code: 125, line: `"nan" is not a length of time`},
		{name: "nan timeout", args: []string{"--timeout", "NaN"}, code: 125, line: "not a length of time"},
		{name: "key expiry that would wrap round", args: []string{"-x", "99999999999999999999"}, items: []string{"a"}, code: 0, ran: "a"},
		{name: "timeout beyond 292 years is never", args: []string{"--timeout", "1e300"}, items: []string{"a"}, code: 0, ran: "a"},
		{name: "tiny timeout still times out", args: []string{"-f", filepath.Join(dir, "tiny.log"), "--timeout", "1e-10"}, cmd: []string{"sleep", "10"}, items: []string{"a"}, code: 124, line: `item "a" failed: timed out after 1ns (--timeout)`},
		{
			name: "cooldown in days", args: []string{"--cooldown", "30d"}, items: []string{"a"}, code: 0, ran: "a",
			after: func(t *testing.T, s *server, list string, _ time.Duration) {
				key := strings.TrimSuffix(list, "list") + "cooldown:a"
				if ttl, _ := s.Client.PTTL(ctx(t), key).Result(); ttl < 29*24*time.Hour || ttl > 30*24*time.Hour {
					t.Errorf("%s expires in %s, want 30 days", key, ttl)
				}
			},
		},
		{name: "Redis down", url: "redis://127.0.0.1:" + itoa(redistest.FreePort(t)), code: 125, line: "connection refused"},
		{name: "password refused", url: "redis://:wrong-staple-secret@127.0.0.1:" + itoa(secured.Port), code: 125, line: "WRONGPASS"},
		// Mistakes of the URL that the server, not the URL, tells: a
		// continuous worker ends on them as a one-shot run does, where it
		// used to retry for ever.
		{name: "a database the server lacks", url: s.URL + "/99", code: 125, line: "this server has no database of the number that --redis-url names"},
		{name: "a database the server lacks, continuous", url: s.URL + "?db=16", args: []string{"-c"}, code: 125, line: "this server has no database of the number that --redis-url names"},
		{name: "--redis-cluster on one server", args: []string{"-c", "--redis-cluster"}, code: 125, line: "--redis-cluster is given, but this server is not a Redis Cluster"},
		{name: "a client name the server refuses, continuous", url: s.URL + "?client_name=a%20b", args: []string{"-c"}, code: 125, line: "client_name=a b: a client name takes letters, digits and the signs from ! to ~"},
		{name: "a port out of range", url: "redis://127.0.0.1:99999", code: 125, line: `the port "99999" of 127.0.0.1:99999 is not a port number (1 to 65535)`},
		{name: "no password given", url: "redis://127.0.0.1:" + itoa(secured.Port), code: 125, line: "NOAUTH"},
		{
			name: "address that never answers", url: "redis://" + silent.Addr().String(), code: 125, line: "i/o timeout",
			after: func(t *testing.T, _ *server, _ string, took time.Duration) {
				if took > 20*time.Second {
					t.Errorf("gave up on a silent server after %s; want a bounded timeout", took)
				}
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, prefix := s, "bad"+itoa(i)
			if strings.Contains(tt.url, itoa(secured.Port)) {
				srv, prefix = secured, "auth"
			}
			list := prefix + ":list"
			items := tt.items
			if items == nil {
				items = []string{"bad", "good"}
			}
			if srv == s {
				if len(items) > 0 {
					s.seed(t, list, items...)
				}
				if tt.setup != nil {
					tt.setup(t, s, list)
				}
			} else {
				items = srv.list(t, list)
			}
			url := tt.url
			if url == "" {
				url = s.URL
			}
			cmd := tt.cmd
			if cmd == nil {
				cmd = printItem
			}
			args := append([]string{"-u", url, "-k", prefix, "--log-level", "warn", "--no-log-timestamps"}, tt.args...)
			began := time.Now()
			r := runW8y(t, tt.env, append(args, cmd...)...)
			took := time.Since(began)

			r.wantExit(t, tt.code)
			lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
			switch {
			case tt.line == "" && r.Stderr != "":
				t.Errorf("stderr should be empty:\n%s", r.Stderr)
			case tt.line != "" && (len(lines) != 1 || !strings.Contains(lines[0], tt.line)):
				t.Errorf("stderr should be one line saying %q:\n%s", tt.line, r.Stderr)
			case len(r.Stderr) > 1000:
				t.Errorf("stderr has a %d-byte line", len(r.Stderr))
			}
			if goSpeak.MatchString(r.Stderr) {
				t.Errorf("stderr speaks Go, not the user's words:\n%s", r.Stderr)
			}
			if strings.Contains(r.Stderr, "staple") || strings.Contains(r.Stderr, "horse") {
				t.Errorf("a password leaked:\n%s", r.Stderr)
			}
			r.wantStdout(t, tt.ran) // the item the child ran on
			// A child that ran on the last item rotated the list back as it was.
			if len(items) > 0 {
				if got := srv.list(t, list); !slices.Equal(got, items) {
					t.Errorf("list changed: %q, want %q", got, items)
				}
			}
			if tt.after != nil {
				tt.after(t, srv, list, took)
			}
			if srv == s {
				if locks := s.keys(t, prefix+":lock:*"); len(locks) != 0 && tt.setup == nil {
					t.Errorf("locks left: %q", locks)
				}
			}
		})
	}
}
