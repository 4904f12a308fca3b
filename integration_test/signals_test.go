package integration_test

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/proctest"
)

// TestSIGPIPEWhenTheReaderGoes: w8y ... | head -1, with the child's output
// passing through w8y's pipes (to keep a failure's last words): once the
// reader has gone, the child's next write fails as it would in a plain
// pipeline, so that a child that writes forever (yes) dies of SIGPIPE and
// the run ends, instead of writing into w8y's pipe for ever.
func TestSIGPIPEWhenTheReaderGoes(t *testing.T) {
	s := withList(t, "head", "a")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := startWith(t, []*os.File{w, nil}, s.env, binary, s.at("sh", "-c", `[ -t 1 ] || yes`)...)
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != "y\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	r.Close()
	p.wait(t).wantExit(t, 141)
	if got := s.stateOf(t, "head", "a")["last_result"]; got != "failure" {
		t.Errorf("last_result %q, want failure", got)
	}
	s.noLocks()
}

// TestSIGPIPE: w8y never dies of a write to its own output. With stdout or
// stderr a pipe nobody reads, a run ends as it would have: the child's code
// (a child that writes there dies of SIGPIPE, as it would alone), 124 for a
// timeout, a drain's 0; the lock is released and the end recorded.
func TestSIGPIPE(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		closed string // "stdout", "stderr" or "both"
		args   []string
		child  string
		stop   bool // SIGTERM once the child has started
		code   int
		result string // the run's last_result; "" for --status
	}{
		{name: "stderr: the child's code", closed: "stderr", child: started + "; exit 3", code: 3, result: "failure"},
		{name: "stderr: a timeout", closed: "stderr", args: []string{"--timeout", "300ms", "-x", "3"}, child: started + "; exec sleep 1000", code: 124, result: "timeout"},
		{name: "stderr: a drain", closed: "stderr", args: []string{"-c"}, child: started + "; exec sleep 1000", stop: true, code: 0, result: "interrupted"},
		{name: "stdout: the child dies of SIGPIPE", closed: "stdout", child: started + "; echo x", code: 141, result: "failure"},
		{name: "stdout: a quiet child", closed: "stdout", child: started + "; exit 0", code: 0, result: "success"},
		{name: "both: a timeout", closed: "both", args: []string{"--timeout", "300ms", "-x", "3"}, child: started + "; exec sleep 1000", code: 124, result: "timeout"},
		{name: "stdout: --status", closed: "stdout", args: []string{"--status"}, code: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "pipe")
			s.items("a")
			outputs := []*os.File{nil, nil}
			if tt.closed != "stderr" {
				outputs[0] = proctest.ClosedPipe(t)
			}
			if tt.closed != "stdout" {
				outputs[1] = proctest.ClosedPipe(t)
			}
			args := tt.args
			if tt.result != "" {
				args = append(slices.Clone(args), "sh", "-c", tt.child)
			}
			p := startWith(t, outputs, s.env, binary, s.at(args...)...)
			if tt.result != "" {
				s.popStarted(t)
			}
			if tt.stop {
				p.signal(t, syscall.SIGTERM)
			}
			p.wait(t).wantExit(t, tt.code)
			s.noLocks()
			if tt.result == "" {
				return
			}
			if got, _ := s.Client.HGet(ctx(t), s.key("state:a"), "last_result").Result(); got != tt.result {
				t.Errorf("last_result %q, want %q", got, tt.result)
			}
		})
	}
}

// TestIgnoredSignalsStayIgnored: a signal that w8y was started with ignored
// (nohup, a background job of a shell without job control, trap "" SIG) stays
// ignored for its child, as /proc/<child>/status shows. Go's runtime catches
// SIGPIPE, SIGTERM, SIGQUIT and others before w8y can look, and forgets that
// they were ignored: the child gets those at their defaults (see docs/reference.md).
func TestIgnoredSignalsStayIgnored(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	tests := []struct {
		name    string
		wrap    func(w8y string) []string // the command that starts w8y
		ignored []syscall.Signal
		notIgn  []syscall.Signal
	}{
		{
			name: "nothing ignored", wrap: func(w8y string) []string { return []string{"sh", "-c", w8y} },
			notIgn: []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTSTP, syscall.SIGPIPE},
		},
		{
			name: "nohup", wrap: func(w8y string) []string { return []string{"sh", "-c", "exec nohup " + w8y} },
			ignored: []syscall.Signal{syscall.SIGHUP}, notIgn: []syscall.Signal{syscall.SIGINT},
		},
		{
			// Without job control, sh starts an asynchronous command with
			// SIGINT and SIGQUIT ignored.
			name: "a shell's background job", wrap: func(w8y string) []string { return []string{"sh", "-c", w8y + " & wait $!"} },
			ignored: []syscall.Signal{syscall.SIGINT}, notIgn: []syscall.Signal{syscall.SIGHUP},
		},
		{
			name: "job control signals", wrap: func(w8y string) []string { return []string{"sh", "-c", `trap "" TSTP TTIN TTOU; exec ` + w8y} },
			ignored: []syscall.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU},
		},
		{
			// The limit: Go's runtime has caught SIGPIPE before w8y starts.
			name: "SIGPIPE is not kept", wrap: func(w8y string) []string { return []string{"sh", "-c", `trap "" PIPE; exec ` + w8y} },
			notIgn: []syscall.Signal{syscall.SIGPIPE},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := "ign" + itoa(i)
			s.seed(t, prefix+":list", "a")
			w8y := fmt.Sprintf("%s -q -u %s -k %s grep SigIgn: /proc/self/status", binary, s.URL, prefix)
			cmd := tt.wrap(w8y)
			r := startCommand(t, nil, cmd[0], cmd[1:]...).wait(t)
			r.mustExit(t, 0)
			var mask uint64
			if _, err := fmt.Sscanf(r.Stdout, "SigIgn:\t%x", &mask); err != nil {
				t.Fatalf("the child's SigIgn: %v in %s", err, r)
			}
			for _, sig := range tt.ignored {
				if mask&(1<<(sig-1)) == 0 {
					t.Errorf("the child does not ignore %v (SigIgn %016x)", sig, mask)
				}
			}
			for _, sig := range tt.notIgn {
				if mask&(1<<(sig-1)) != 0 {
					t.Errorf("the child ignores %v (SigIgn %016x)", sig, mask)
				}
			}
			s.noLocks(t, prefix)
		})
	}
}

// TestTimeoutSignal: at --timeout, the child's whole process group gets
// the signal that --timeout-signal names, however it is written, and w8y
// exits 124. The child and a second process of its group each trap that
// signal and record it; the default is SIGTERM.
func TestTimeoutSignal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, flag, trap string
	}{
		{"default", "", "TERM"},
		{"name", "USR1", "USR1"},
		{"lower case with SIG", "sigusr2", "USR2"},
		{"number", "10", "USR1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "tsig")
			s.items("a")
			// Any other signal but the one trapped kills a shell before it
			// records anything. The child ($0) starts the other member of
			// its group ($1) and reports its start once that one traps
			// the signal too; it waits for it to record before it exits,
			// since w8y then stops what is left of the group.
			member := `trap 'redis-cli -p "$REDIS_PORT" rpush got "group ` + tt.trap + `" >/dev/null; exit 0' ` + tt.trap +
				`; redis-cli -p "$REDIS_PORT" rpush ready 1 >/dev/null; while :; do sleep 0.05; done`
			child := `sh -c "$1" & member=$!; trap 'redis-cli -p "$REDIS_PORT" rpush got "child ` + tt.trap + `" >/dev/null; wait $member; exit 0' ` + tt.trap +
				`; redis-cli -p "$REDIS_PORT" blpop ready 0 >/dev/null; redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null; while :; do sleep 0.05; done`
			// A timeout long enough for both to trap the signal first.
			args := []string{"-x", "3", "--kill-after", "1s", "--timeout", "1s"}
			if tt.flag != "" {
				args = append(args, "--timeout-signal", tt.flag)
			}
			p := s.start(append(args, "sh", "-c", child, "sh", member)...)
			if got := s.popStarted(t); got != "a" {
				t.Fatalf("started %q, want a", got)
			}
			want := []string{"child " + tt.trap, "group " + tt.trap}
			if got := s.popEach(t, "got", 2); !slices.Equal(got, want) {
				t.Errorf("the child's group got %q, want %q", got, want)
			}
			p.wait(t).wantExit(t, 124)
		})
	}
}
