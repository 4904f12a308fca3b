package integration_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// TestKeepOutput: with --keep-output, the child's stdout and stderr reach
// w8y's byte for byte (binary, and megabytes of it), and the item's state
// hash keeps the last BYTES of each.
func TestKeepOutput(t *testing.T) {
	s := withList(t, "ko", "a")
	dir := t.TempDir()
	blob := make([]byte, 5<<19)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "blob"), blob, 0o600); err != nil {
		t.Fatal(err)
	}
	const errBytes = "warn\x00\xff\ntail"
	s.env = append(s.env, "DIR="+dir)
	r := s.run("-q", "--keep-output", "1000", "sh", "-c", `cat "$DIR/blob"; printf 'warn\000\377\ntail' >&2`)
	r.mustExit(t, 0)
	if !bytes.Equal([]byte(r.Stdout), blob) {
		t.Errorf("stdout: %d bytes, not the child's %d", len(r.Stdout), len(blob))
	}
	if r.Stderr != errBytes {
		t.Errorf("stderr %q, want the child's %q", r.Stderr, errBytes)
	}
	state := s.Client.HGetAll(ctx(t), s.key("state:a")).Val()
	if !bytes.Equal([]byte(state["last_stdout"]), blob[len(blob)-1000:]) {
		t.Errorf("last_stdout holds %d bytes, not the last 1000 of stdout", len(state["last_stdout"]))
	}
	if state["last_stderr"] != errBytes {
		t.Errorf("last_stderr %q, want %q", state["last_stderr"], errBytes)
	}
}

// TestKeepOutputUnbuffered: what the child writes reaches w8y's stdout while
// the child still runs, without waiting for a newline or its end.
func TestKeepOutputUnbuffered(t *testing.T) {
	s := withList(t, "ku", "a")
	dir := t.TempDir()
	s.env = append(s.env, "DIR="+dir)
	p := s.start("-q", "--keep-output", "10", "sh", "-c", `printf partial; `+started+`; while [ ! -e "$DIR/gate" ]; do sleep 0.01; done; printf ' and more'`)
	s.popStarted(t)
	poll.WaitFor(t, "the child's first bytes", func() bool { return p.stdoutSoFar() == "partial" })
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	r.wantExit(t, 0)
	r.wantStdout(t, "partial and more")
	if got := s.Client.HGet(ctx(t), s.key("state:a"), "last_stdout").Val(); got != "l and more" {
		t.Errorf("last_stdout %q, want the last 10 bytes", got)
	}
}

// TestKeepOutputByDefault: a failure's last words are kept by default, as
// the user ran it (w8y -q sh -c 'echo "ERROR: db timeout" >&2;
// exit 7'), bounded, and shown by w8yctl status ITEM and by the run's end
// event; a success keeps nothing, and clears what a failure kept, unless
// --keep-output asks; --keep-output 0 leaves the child w8y's own streams
// (a file here) and keeps nothing. (At a terminal the child keeps it by
// default: TestTerminalReadsReachTheChild.)
func TestKeepOutputByDefault(t *testing.T) {
	s := withList(t, "kf", "bad")
	state := func() map[string]string { return s.Client.HGetAll(ctx(t), s.key("state:bad")).Val() }
	// Longer than the default keeps: 5,000 bytes of stdout, then the error.
	fail := `head -c 5000 /dev/zero | tr '\0' x; echo; echo "ERROR: db timeout" >&2; exit 7`
	r := s.run("-q", "sh", "-c", fail)
	r.wantExit(t, 7)
	if got := state(); len(got["last_stdout"]) != 4096 || got["last_stderr"] != "ERROR: db timeout\n" {
		t.Errorf("a failure kept %d bytes of stdout and %q of stderr, want 4096 and the error", len(got["last_stdout"]), got["last_stderr"])
	}
	if !strings.HasPrefix(r.Stdout, strings.Repeat("x", 5000)+"\n") {
		t.Errorf("the child's stdout did not pass on whole: %d bytes", len(r.Stdout))
	}
	st := s.ctl("status", "bad")
	st.mustExit(t, 0)
	if !strings.Contains(st.Stdout, "  last stderr (18 bytes):\n    | ERROR: db timeout\n") {
		t.Errorf("w8yctl status does not show the failure's words:\n%s", st.Stdout)
	}
	ev := s.ctl("events", "-n", "1", "--json")
	ev.mustExit(t, 0)
	var end map[string]any
	if err := json.Unmarshal([]byte(ev.Stdout), &end); err != nil || end["stderr"] != "ERROR: db timeout\n" ||
		len(fmt.Sprint(end["stdout"])) != 512 {
		t.Errorf("the end event does not carry the failure's last words (%v): %s", err, ev.Stdout)
	}

	// A success keeps nothing, and drops the failure's words.
	s.run("-q", "sh", "-c", "echo fine").mustExit(t, 0)
	if got := state(); got["last_stdout"] != "" || got["last_stderr"] != "" || got["last_result"] != "success" {
		t.Errorf("a success kept output: %q", got)
	}
	s.run("-q", "--keep-output", "100", "sh", "-c", "echo fine").mustExit(t, 0)
	if got := state()["last_stdout"]; got != "fine\n" {
		t.Errorf("with --keep-output, a success kept %q", got)
	}

	for _, tt := range []struct {
		args []string
		// want is how the child's stdout shows in /proc: the file itself,
		// or a pipe.
		want string
		kept bool
	}{
		{nil, "pipe:", true},
		{[]string{"--keep-output", "0"}, "file", false},
		{[]string{"--keep-output", "100"}, "pipe:", true},
	} {
		out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		args := s.at(append(append([]string{"-q"}, tt.args...), "sh", "-c", `readlink /proc/$$/fd/1; exit 1`)...)
		startWith(t, []*os.File{out}, nil, binary, args...).wait(t).mustExit(t, 1)
		data, err := os.ReadFile(out.Name())
		if err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSpace(string(data))
		if want := map[string]string{"file": out.Name(), "pipe:": "pipe:"}[tt.want]; !strings.HasPrefix(got, want) {
			t.Errorf("with %q the child's stdout is %q, want %q", tt.args, got, want)
		}
		if _, ok := state()["last_stdout"]; ok != tt.kept {
			t.Errorf("with %q a failure's last_stdout is kept: %v", tt.args, ok)
		}
	}
}

// TestJSONLogs: --log-format json writes one JSON object per line, with an
// event for the start and the end of the item.
func TestJSONLogs(t *testing.T) {
	s := withList(t, "json", "a")
	r := s.run("--log-format", "json", "sh", "-c", "exit 3")
	r.mustExit(t, 3)
	events := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		var event map[string]any
		if err := json.Unmarshal([]byte(line), &event); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		events[event["message"].(string)] = event
	}
	startedEv, finished := events["item started"], events["item finished"]
	if startedEv == nil || finished == nil {
		t.Fatalf("missing start or finish event:\n%s", r.Stderr)
	}
	for _, ev := range []map[string]any{startedEv, finished} {
		if ev["item"] != "a" || ev["lock_key"] != "json:lock:a" || ev["pid"] == nil || ev["time"] == nil {
			t.Errorf("event lacks item, lock_key, pid or time: %v", ev)
		}
	}
	if holder, _ := startedEv["holder"].(string); strings.Count(holder, ":") != 2 {
		t.Errorf("start event's holder %q is not host:pid:random", holder)
	}
	if finished["exit_code"] != 3.0 || finished["duration_s"] == nil {
		t.Errorf("finish event lacks exit_code 3 or duration_s: %v", finished)
	}
}

// TestQuietAndLogFile: --quiet leaves stderr to the child alone, and
// --log-file appends w8y's logs to the file across runs.
func TestQuietAndLogFile(t *testing.T) {
	s := withList(t, "quiet", "a", "b")
	r := s.run("-q", "sh", "-c", "echo child-out; echo child-err >&2")
	r.wantExit(t, 0)
	r.wantStdout(t, "child-out\n")
	if r.Stderr != "child-err\n" {
		t.Errorf("-q: want the child's stderr alone, got %s", r)
	}

	logFile := filepath.Join(t.TempDir(), "w8y.log")
	for range 2 {
		r = s.run("-f", logFile, "-t", "true")
		r.wantExit(t, 0)
		if r.Stderr != "" {
			t.Errorf("-f: want nothing on stderr, got %s", r)
		}
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "item finished"); n != 2 {
		t.Errorf("log file has %d finish events, want 2 (appended):\n%s", n, data)
	}
}

// TestPasswords: a password in the URL works, and a wrong one fails with
// 125 and a line that names the cause but never the password.
func TestPasswords(t *testing.T) {
	t.Parallel()
	s := setup(t, "auth", redistest.Password("right-horse-battery"))
	s.items("a")

	r := runW8y(t, nil, "-u", "redis://:right-horse-battery@127.0.0.1:"+itoa(s.Port), "-k", "auth", "-q", "echo", "{}")
	r.wantExit(t, 0)
	r.wantStdout(t, "a\n")
	for _, url := range []string{
		"redis://:wrong-staple-secret@127.0.0.1:" + itoa(s.Port),
		"redis://127.0.0.1:" + itoa(s.Port),
	} {
		r = runW8y(t, nil, "-u", url, "-k", "auth", "--log-format", "json", "echo", "{}")
		r.wantExit(t, 125)
		lastLine := r.Stderr[strings.LastIndex(strings.TrimRight(r.Stderr, "\n"), "\n")+1:]
		if !strings.HasPrefix(lastLine, "w8y: ") || !(strings.Contains(lastLine, "WRONGPASS") || strings.Contains(lastLine, "NOAUTH")) {
			t.Errorf("%s: last stderr line %q does not name the cause", url, lastLine)
		}
		if strings.Contains(r.Stderr, "staple") || strings.Contains(r.Stderr, "horse") {
			t.Errorf("a password leaked:\n%s", r.Stderr)
		}
	}
	if got := s.list(); len(got) != 1 {
		t.Errorf("list %q", got)
	}
}

// TestUnneededPasswordIsSaid: a password given to a server that asks for
// none (which Redis takes without a word) is said once, in one warning line,
// by w8y and w8yctl alike, whether the URL or the variable gives it; a
// password that the server asks for, or none at all, is not.
func TestUnneededPasswordIsSaid(t *testing.T) {
	open := withList(t, "np", "a", "b", "c")
	secured := setup(t, "np", redistest.Password("right-horse-battery"))
	secured.items("a")
	const warning = "asks for no password, yet "
	for _, tt := range []struct {
		env  []string
		url  string
		from string
	}{
		{nil, "redis://:stray-staple@127.0.0.1:" + itoa(open.Port), "--redis-url"},
		{[]string{"W8Y_REDIS_PASSWORD=stray-staple"}, open.URL, "W8Y_REDIS_PASSWORD"},
		{nil, "redis://default:stray-staple@127.0.0.1:" + itoa(open.Port), "--redis-url"},
	} {
		r := runW8y(t, tt.env, "-u", tt.url, "-k", "np", "-t", "true")
		r.wantExit(t, 0)
		if n := strings.Count(r.Stderr, warning); n != 1 || !strings.Contains(r.Stderr, "WRN the server at redis://") ||
			!strings.Contains(r.Stderr, warning+tt.from+" gives one: is it the Redis you meant?") || strings.Contains(r.Stderr, "staple") {
			t.Errorf("%q %s: want the one warning naming %s, without the password: %s", tt.env, tt.url, tt.from, r)
		}
		c := runCtl(t, tt.env, "-u", tt.url, "-k", "np", "status", "a")
		c.wantExit(t, 0)
		if strings.Count(c.Stderr, warning) != 1 {
			t.Errorf("w8yctl: want the one warning: %s", c)
		}
	}
	for _, r := range []result{
		runW8y(t, nil, "-u", "redis://:right-horse-battery@127.0.0.1:"+itoa(secured.Port), "-k", "np", "-t", "true"),
		runW8y(t, nil, "-u", open.URL, "-k", "np", "-t", "true"),
	} {
		r.wantExit(t, 0)
		if strings.Contains(r.Stderr, warning) {
			t.Errorf("a needed password, or none, is warned of: %s", r)
		}
	}
}

// TestPercentEncodedPasswordNeverShows: a password written in the URL
// percent-encoded (p%40ss for p@ss, as a URL must write an '@') shows in no
// line that w8y or w8yctl writes, neither as written nor decoded, whether
// Redis refuses it, refuses the user a command, or the URL is refused
// before Redis is reached.
func TestPercentEncodedPasswordNeverShows(t *testing.T) {
	s := withList(t, "pe", "a")
	// The right password, p@ss, for a user who may only PING: its first
	// script is refused with NOPERM.
	if err := s.Client.Do(ctx(t), "ACL", "SETUSER", "pinger", "on", ">p@ss Tower-9", "~*", "resetchannels", "-@all", "+ping").Err(); err != nil {
		t.Fatal(err)
	}
	url := func(user, password, rest string) string {
		return fmt.Sprintf("redis://%s:%s@127.0.0.1:%d%s", user, password, s.Port, rest)
	}
	const encoded, decoded = "p%40ss%20Tower-9", "p@ss Tower-9"
	cases := []struct {
		name string
		cmd  func(args ...string) result
		args []string
		code int
		want string
	}{
		{"w8y, wrong password", w8yRun(t), []string{"-u", url("nobody", encoded, ""), "-k", "pe", "true"}, 125, "WRONGPASS"},
		{"w8y, NOPERM", w8yRun(t), []string{"-u", url("pinger", encoded, ""), "-k", "pe", "true"}, 125, "ACL"},
		{"w8y, --status", w8yRun(t), []string{"-u", url("pinger", encoded, ""), "-k", "pe", "--status"}, 125, "ACL"},
		{"w8y, a database that is not a number", w8yRun(t), []string{"-u", url("pinger", encoded, "/x"), "-k", "pe", "true"}, 125, "database"},
		{"w8y, no scheme", w8yRun(t), []string{"-u", strings.TrimPrefix(url("pinger", encoded, ""), "redis://"), "-k", "pe", "true"}, 125, "no scheme"},
		{"w8y, a scheme pasted with a space", w8yRun(t), []string{"-u", " " + url("pinger", encoded, ""), "-k", "pe", "true"}, 125, "scheme"},
		{"w8yctl status, wrong password", ctlRun(t), []string{"-u", url("nobody", encoded, ""), "-k", "pe", "status"}, 125, "WRONGPASS"},
		{"w8yctl pause, NOPERM", ctlRun(t), []string{"-u", url("pinger", encoded, ""), "-k", "pe", "pause", "a"}, 125, ""},
	}
	for _, c := range cases {
		r := c.cmd(c.args...)
		if r.Code != c.code || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s: exit %d, want %d with %q: %s", c.name, r.Code, c.code, c.want, r)
		}
		for _, secret := range []string{encoded, decoded, "p@ss", "p%40ss", "Tower-9"} {
			if strings.Contains(r.Stderr+r.Stdout, secret) {
				t.Errorf("%s: the output shows %q:\n%s%s", c.name, secret, r.Stdout, r.Stderr)
			}
		}
	}
}

func w8yRun(t *testing.T) func(args ...string) result {
	return func(args ...string) result { t.Helper(); return runW8y(t, nil, args...) }
}

func ctlRun(t *testing.T) func(args ...string) result {
	return func(args ...string) result { t.Helper(); return runCtl(t, nil, args...) }
}

// TestLongItemsAreClippedInLogs: every line of w8y's log names the item
// and its lock key; a 10 kB item is clipped there, in both formats and in
// the line that explains a timeout, and reaches the child whole.
func TestLongItemsAreClippedInLogs(t *testing.T) {
	t.Parallel()
	s := setup(t, "clip")
	long := strings.Repeat("x", 10_000)
	for _, format := range []string{"console", "json"} {
		s.items(long)
		r := s.run("--log-format", format, "--timeout", "200ms", "sh", "-c", `echo "${#W8Y_ITEM} ${#1}"; exec sleep 1000`, "sh", "{}")
		r.wantExit(t, 124)
		r.wantStdout(t, "10000 10000\n")
		for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
			if len(line) > 1000 {
				t.Errorf("%s: a %d-byte line: %.200s...", format, len(line), line)
			}
		}
		r.wantStderr(t, "(10000 bytes)")
	}
}

// TestFailedRunsAreSeen: a failed run is a warning in the log, and leaves
// one line on stderr however the log is set up, since cron mails only
// what a job writes there; --quiet silences it with all of w8y's lines. A
// success leaves nothing on stderr but the log.
func TestFailedRunsAreSeen(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	const failed = `w8y: item "a" failed: the child ended with exit code 3`
	tests := []struct {
		name  string
		args  []string
		child string
		// stderr is what stderr must be, or, when logged is set, a line it
		// must hold.
		stderr string
		logged bool
	}{
		{"the log at warn level", []string{"--log-level", "warn"}, "exit 3", "WRN item finished", true},
		{"a log file", []string{"-f", "LOG"}, "exit 3", failed + "\n", false},
		{"a log level above warn", []string{"--log-level", "error"}, "exit 3", failed + "\n", false},
		{"a killed child with a log file", []string{"-f", "LOG"}, "kill -KILL $$", `w8y: item "a" failed: the child was killed by SIGKILL (exit code 137)` + "\n", false},
		{"quiet", []string{"-q"}, "exit 3", "", false},
		{"quiet with a log file", []string{"-q", "-f", "LOG"}, "exit 3", "", false},
		{"a success with a log file", []string{"-f", "LOG"}, "exit 0", "", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := "seen" + itoa(i)
			s.seed(t, prefix+":list", "a")
			logFile := filepath.Join(t.TempDir(), "w8y.log")
			args := append([]string{"-u", s.URL, "-k", prefix, "-t"}, tt.args...)
			for j, a := range args {
				if a == "LOG" {
					args[j] = logFile
				}
			}
			r := runW8y(t, nil, append(args, "sh", "-c", tt.child)...)
			switch {
			case tt.logged && (!strings.Contains(r.Stderr, tt.stderr) || strings.Contains(r.Stderr, "INF")):
				t.Errorf("stderr should hold %q and no info lines: %s", tt.stderr, r)
			case !tt.logged && r.Stderr != tt.stderr:
				t.Errorf("stderr should be %q: %s", tt.stderr, r)
			}
			if slices.Contains(args, logFile) && !slices.Contains(args, "-q") {
				data, _ := os.ReadFile(logFile)
				if !strings.Contains(string(data), "item finished") {
					t.Errorf("the log file lacks the run:\n%s", data)
				}
			}
		})
	}
}
