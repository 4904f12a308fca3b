package integration_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// The terminal tests drive w8y through a real pseudo-terminal that script(1)
// makes, and synchronise on what the screen shows, on Redis and on /proc,
// never on sleeps.

// runInTerminal runs w8y with args under script(1), which gives it a
// pseudo-terminal as its controlling terminal with w8y in the foreground, as
// in an interactive shell. typeKeys is called once the child has started, with
// a writer to the terminal's keyboard. The result's Stdout is the screen,
// where w8y's stdout and stderr both go.
func runInTerminal(t *testing.T, s *server, child string, typeKeys func(keyboard io.Writer)) result {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatal("this test needs script(1) from util-linux (Debian's bsdutils)")
	}
	command := fmt.Sprintf("%s -q -u %s -k tty sh -c '%s'", binary, s.URL, child)
	cmd := exec.Command("script", "-qec", command, "/dev/null")
	cmd.Env = append(os.Environ(), fmt.Sprintf("REDIS_PORT=%d", s.Port), "GORACE=atexit_sleep_ms=0")
	keyboard, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	cmd.Stdout, cmd.Stderr = &screen, &screen
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer keyboard.Close()

	s.popStarted(t)
	typeKeys(keyboard)
	select {
	case <-done:
	case <-time.After(poll.Timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("w8y in a terminal did not finish; the screen shows:\n%s", screen.String())
	}
	return result{Code: cmd.ProcessState.ExitCode(), Stdout: screen.String(), run: "script -qec " + command}
}

// TestTerminalReadsReachTheChild: a child that reads the terminal gets what
// is typed, instead of being stopped for reading from a background group,
// and writes to the terminal itself.
func TestTerminalReadsReachTheChild(t *testing.T) {
	s := withList(t, "tty", "a")
	r := runInTerminal(t, s.server, started+`; read line; echo "got $line for $W8Y_ITEM"; [ -t 1 ] && [ -t 2 ] && echo "writes to the terminal"`, func(keyboard io.Writer) {
		io.WriteString(keyboard, "hello\n")
	})
	r.wantExit(t, 0)
	if !strings.Contains(r.Stdout, "got hello for a") {
		t.Errorf("the child did not read what was typed: %s", r)
	}
	// At a terminal, w8y keeps no output by default: the child's is the
	// terminal, not a pipe.
	if !strings.Contains(r.Stdout, "writes to the terminal") {
		t.Errorf("the child's stdout and stderr are not the terminal: %s", r)
	}
	s.noLocks()
}

// TestTerminalCtrlCReachesTheChild: Ctrl-C interrupts the child's group,
// and w8y exits with the child's status, 130.
func TestTerminalCtrlCReachesTheChild(t *testing.T) {
	s := withList(t, "tty", "a")
	// The start is reported from the background and the shell becomes the
	// sleep, so the group's foreground process dies of SIGINT whenever the
	// key arrives. (With "started; sleep", a Ctrl-C that lands while the shell
	// waits on redis-cli is absorbed: dash, like bash, only dies of SIGINT if
	// the command it waited on did, and redis-cli had already exited.)
	r := runInTerminal(t, s.server, started+` & exec sleep 1000`, func(keyboard io.Writer) {
		io.WriteString(keyboard, "\x03")
	})
	r.wantExit(t, 130)
	s.noLocks()
}

// shell is an interactive bash with job control in a pseudo-terminal that
// script(1) makes: what a person at a terminal has. Its prompt shows the
// last exit status, as "[exit N]$ ".
type shell struct {
	cmd      *exec.Cmd
	keyboard io.WriteCloser
	screen   redistest.SyncBuffer
	// read is how much of the screen waitScreen has gone past.
	read int
	done chan struct{}
}

// startShell starts a shell whose commands can reach s (REDIS_PORT).
func startShell(t *testing.T, s *server) *shell {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatal("this test needs script(1) from util-linux (Debian's bsdutils)")
	}
	// Without readline (--noediting), the screen holds what was typed and
	// shown, and no editing escapes.
	sh := &shell{cmd: exec.Command("script", "-qfec", "bash --norc --noprofile --noediting -i", "/dev/null"), done: make(chan struct{})}
	sh.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TERM=dumb", "HISTFILE=/dev/null",
		"PS1=[exit $?]$ ", fmt.Sprintf("REDIS_PORT=%d", s.Port), "GORACE=atexit_sleep_ms=0",
	}
	keyboard, err := sh.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	sh.keyboard = keyboard
	sh.cmd.Stdout, sh.cmd.Stderr = &sh.screen, &sh.screen
	if err := sh.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = sh.cmd.Wait()
		close(sh.done)
	}()
	t.Cleanup(func() {
		// What the test left running (a stopped job, say) goes with the
		// terminal: kill every process under script.
		killTree(sh.cmd.Process.Pid)
		keyboard.Close()
		<-sh.done
		if t.Failed() {
			t.Logf("the terminal showed:\n%s", sh.screen.String())
		}
	})
	sh.waitScreen(t, "[exit 0]$ ")
	return sh
}

// killTree SIGKILLs pid and every process below it.
func killTree(pid int) {
	for _, child := range childrenOf(pid) {
		killTree(child)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// typeKeys types keys on the terminal's keyboard.
func (sh *shell) typeKeys(t *testing.T, keys string) {
	t.Helper()
	if _, err := io.WriteString(sh.keyboard, keys); err != nil {
		t.Fatal(err)
	}
}

// waitScreen waits until the screen shows want after what the test has
// read, and moves past it.
func (sh *shell) waitScreen(t *testing.T, want string) {
	t.Helper()
	poll.WaitFor(t, fmt.Sprintf("the terminal to show %q", want), func() bool {
		screen := sh.screen.String()
		i := strings.Index(screen[sh.read:], want)
		if i < 0 {
			return false
		}
		sh.read += i + len(want)
		return true
	})
}

// quote quotes args for the shell.
func quote(args ...string) string {
	quoted := make([]string, len(args))
	for i, arg := range args {
		quoted[i] = "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}

// w8yLine is the command line that runs w8y with args on the bundle's list,
// with child as a shell script.
func (b *bundle) w8yLine(args []string, child string) string {
	return quote(append(append([]string{binary, "-t"}, b.at(args...)...), "sh", "-c", child)...)
}

// shellRunning starts a shell on a terminal of its own (see startShell)
// and types in it the command line that runs w8y with args on the bundle's
// list, with child as a shell script.
func (b *bundle) shellRunning(args []string, child string) *shell {
	b.t.Helper()
	sh := startShell(b.t, b.server)
	sh.typeKeys(b.t, b.w8yLine(args, child)+"\n")
	return sh
}

// shellStarted is shellRunning that waits until n children have reported
// their start, and returns the shell and the items that they took, in the
// order that they reported.
func (b *bundle) shellStarted(args []string, child string, n int) (*shell, []string) {
	b.t.Helper()
	sh := b.shellRunning(args, child)
	items := make([]string, n)
	for i := range items {
		items[i] = b.popStarted(b.t)
	}
	return sh, items
}

// reportAs is shell for a child that reports what by pushing it to the list
// "started".
func reportAs(what string) string {
	return `redis-cli -p "$REDIS_PORT" rpush started "` + what + `" >/dev/null`
}

// processState is the state letter of pid in /proc (S, R, T, Z...), or "".
func processState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(stat, ')')
	if err != nil || i < 0 || i+2 >= len(stat) {
		return ""
	}
	return string(stat[i+2])
}

// parentOf is pid's parent's pid, failing the test if pid is gone.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(stat, ')')
	if err != nil || i < 0 {
		t.Fatalf("reading process %d: %v", pid, err)
	}
	// After the name: the state, then the parent's pid.
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		t.Fatalf("process %d's stat %q has no parent", pid, stat)
	}
	return atoi(t, fields[1])
}

// waitState waits until pid is in state (see processState).
func waitState(t *testing.T, pid int, state string) {
	t.Helper()
	poll.WaitFor(t, fmt.Sprintf("process %d to be in state %s", pid, state), func() bool { return processState(pid) == state })
}

// TestTerminalCtrlC: Ctrl-C at a terminal stops w8y as SIGINT sent to it
// does, in every mode, though the child that holds the terminal gets it
// first: a one-shot run exits with the child's 130, a continuous worker
// drains (no new item; it exits 0 once the child ends), and a second Ctrl-C
// kills the child's group. Each run ends recorded as interrupted, unless
// its child finished well, and never counts as a failure of its item.
func TestTerminalCtrlC(t *testing.T) {
	t.Parallel()
	// The start is reported from the background and the shell becomes the
	// sleep (see TestTerminalCtrlCReachesTheChild).
	const sleeper = `redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null & exec sleep 1000`
	tests := []struct {
		name     string
		args     []string
		children int // 1 unless set
		child    string
		// presses are the Ctrl-Cs, each with what the child reports
		// after it ("" for nothing to wait on).
		presses []string
		code    int
		result  string
		screen  string // what the terminal must show besides
	}{
		{
			name: "one-shot", child: sleeper,
			presses: []string{""}, code: 130, result: "interrupted",
		},
		{
			name: "one-shot, --parallel 2 (w8y keeps the terminal)", args: []string{"--parallel", "2"}, children: 2, child: sleeper,
			presses: []string{""}, code: 130, result: "interrupted",
		},
		{
			name: "continuous: the first drains", args: []string{"-c"},
			child:   `trap '` + reportAs("got-int") + `; exit 0' INT; ` + reportAs("$W8Y_ITEM") + `; while :; do sleep 0.05; done`,
			presses: []string{"got-int"}, code: 0, result: "success", screen: "drained; exiting",
		},
		{
			name: "continuous: the second kills the group", args: []string{"-c"},
			child:   `trap '` + reportAs("got-int") + `' INT; ` + reportAs("$W8Y_ITEM") + `; while :; do sleep 0.05; done`,
			presses: []string{"got-int", ""}, code: 0, result: "interrupted", screen: "second stop signal",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "int"+itoa(i))
			s.items("a", "b")
			sh, items := s.shellStarted(tt.args, tt.child, max(tt.children, 1))
			for _, reply := range tt.presses {
				sh.typeKeys(t, "\x03")
				if reply != "" {
					if got := s.popStarted(t); got != reply {
						t.Fatalf("after Ctrl-C the child reported %q, want %q", got, reply)
					}
				}
			}
			sh.waitScreen(t, fmt.Sprintf("[exit %d]$ ", tt.code))
			if tt.screen != "" && !strings.Contains(sh.screen.String(), tt.screen) {
				t.Errorf("the terminal does not show %q", tt.screen)
			}
			// No item may start after Ctrl-C. The child of the second
			// Ctrl-C may still report it: its trap can run before w8y's
			// SIGKILL reaches the group.
			started := s.Client.LRange(ctx(t), "started", 0, -1).Val()
			if slices.ContainsFunc(started, func(r string) bool { return r != "got-int" }) {
				t.Errorf("started after Ctrl-C: %q, want no item", started)
			}
			s.noLocks()
			for _, item := range items {
				state := s.Client.HGetAll(ctx(t), s.key("state:"+item)).Val()
				if state["last_result"] != tt.result || state["consecutive_failures"] == "1" {
					t.Errorf("%s's run was recorded as %q with %q consecutive failures, want %q and none", item, state["last_result"], state["consecutive_failures"], tt.result)
				}
			}
		})
	}
}

// TestTerminalCtrlZ: Ctrl-Z stops the child and w8y with it, so the shell
// gets its prompt back; fg continues both and gives the child the terminal
// again. A lock that expired while they were stopped is lost: the guard
// kills the child, still stopped, before the lock could expire, and after fg
// w8y exits 122. With --parallel, Ctrl-Z reaches w8y, which stops every
// child first.
func TestTerminalCtrlZ(t *testing.T) {
	t.Parallel()
	// pids reports the child's pid on the list "pids".
	const pids = `redis-cli -p "$REDIS_PORT" rpush pids $$ >/dev/null; `
	tests := []struct {
		name     string
		args     []string
		children int
		child    string
		// afterStop runs once the job is stopped and the shell is back,
		// with the children's pids.
		afterStop func(t *testing.T, s *bundle, sh *shell, children []int)
		// finish types what ends the run after fg.
		finish string
		code   int
		result string
	}{
		{
			name: "fg continues the child, which reads the terminal", args: []string{"-x", "10"}, children: 1,
			child: pids + reportAs("$W8Y_ITEM") + `; read line; echo "got $line"`,
			afterStop: func(t *testing.T, s *bundle, sh *shell, _ []int) {
				if locks := s.keys(t, s.key("lock:*")); len(locks) != 1 {
					t.Errorf("locks %q while stopped, want the item's", locks)
				}
			},
			finish: "hello\n", code: 0, result: "success",
		},
		{
			name: "bg, then a read from the background stops it again", args: []string{"-x", "10"}, children: 1,
			child: pids + reportAs("$W8Y_ITEM") + `; read line; echo "got $line"`,
			afterStop: func(t *testing.T, s *bundle, sh *shell, children []int) {
				sh.typeKeys(t, "bg\n")
				// The child reads the terminal from the background: the
				// terminal stops it (SIGTTIN), and w8y with it.
				sh.waitScreen(t, "SIGTTIN")
				// The shell tells of a stopped job before its next prompt:
				// the Enter that asks for one must come once w8y (the
				// child's parent) has stopped, not when it logs that it
				// stops, or the prompt comes first and the news never.
				waitState(t, children[0], "T")
				waitState(t, parentOf(t, children[0]), "T")
				sh.typeKeys(t, "\n")
				sh.waitScreen(t, "Stopped")
				sh.waitScreen(t, "]$ ")
			},
			finish: "hello\n", code: 0, result: "success",
		},
		{
			name: "a lock that expired meanwhile is lost", args: []string{"-x", "1", "--kill-after", "0.2"}, children: 1,
			child: pids + reportAs("$W8Y_ITEM") + `; exec sleep 1000`,
			afterStop: func(t *testing.T, s *bundle, sh *shell, children []int) {
				w8y := parentOf(t, children[0])
				poll.WaitFor(t, "the lock to expire", func() bool { return len(s.keys(t, s.key("lock:*"))) == 0 })
				// The guard killed the child, stopped, before its lock could
				// expire, with w8y still stopped.
				processGone(t, children[0])
				if state := processState(w8y); state != "T" {
					t.Errorf("w8y is in state %q, want stopped (T)", state)
				}
			},
			code: 122, result: "lock_lost",
		},
		{
			name: "--parallel 2: w8y stops its children", args: []string{"--parallel", "2", "-x", "10"}, children: 2,
			child:  pids + reportAs("$W8Y_ITEM") + `; exec sleep 1000`,
			finish: "\x03", code: 130, result: "interrupted",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "tstp"+itoa(i))
			s.items("a", "b")
			sh, items := s.shellStarted(tt.args, tt.child, tt.children)
			var children []int
			for range tt.children {
				children = append(children, atoi(t, s.pop(t, "pids")))
			}
			sh.typeKeys(t, "\x1a")
			sh.waitScreen(t, "Stopped")
			sh.waitScreen(t, "]$ ")
			for _, pid := range children {
				waitState(t, pid, "T")
			}
			if tt.afterStop != nil {
				tt.afterStop(t, s, sh, children)
			}
			sh.typeKeys(t, "fg\n")
			if tt.code != exitLockLost {
				for _, pid := range children {
					poll.WaitFor(t, "the child to be continued", func() bool { return processState(pid) != "T" })
				}
			}
			sh.typeKeys(t, tt.finish)
			sh.waitScreen(t, fmt.Sprintf("[exit %d]$ ", tt.code))
			if tt.code == 0 && !strings.Contains(sh.screen.String(), "got hello") {
				t.Errorf("the child did not read the terminal after fg")
			}
			for _, pid := range children {
				processGone(t, pid)
			}
			s.noLocks()
			for _, item := range items {
				if got, _ := s.Client.HGet(ctx(t), s.key("state:"+item), "last_result").Result(); got != tt.result {
					t.Errorf("%s's run was recorded as %q, want %q", item, got, tt.result)
				}
			}
		})
	}
}

// exitLockLost is w8y's exit code for a lost lock.
const exitLockLost = 122

// TestTerminalCtrlCWhileRedisHangs: Ctrl-C while w8y waits on a Redis that
// does not answer ends w8y at once, not after the client's timeouts: a
// one-shot run with 130, a continuous worker with a drain's 0. The take it
// cut short leaves no lock.
func TestTerminalCtrlCWhileRedisHangs(t *testing.T) {
	t.Parallel()
	for i, tt := range []struct {
		name string
		args []string
		code int
	}{
		{"one-shot", nil, 130},
		{"continuous", []string{"-c"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "hang"+itoa(i))
			s.items("a")
			sh := startShell(t, s.server)
			// Writes, and so the take's script, wait; the test's reads do not.
			if err := s.Client.Do(ctx(t), "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Client.Do(ctx(t), "CLIENT", "UNPAUSE") })
			sh.typeKeys(t, s.w8yLine(tt.args, reportAs("$W8Y_ITEM"))+"\n")
			poll.WaitFor(t, "w8y's take to wait on Redis", func() bool {
				clients, _ := s.Client.ClientList(ctx(t)).Result()
				return strings.Contains(clients, "flags=b") && strings.Contains(clients, "cmd=evalsha")
			})
			began := time.Now()
			sh.typeKeys(t, "\x03")
			sh.waitScreen(t, fmt.Sprintf("[exit %d]$ ", tt.code))
			if took := time.Since(began); took > 3*time.Second {
				t.Errorf("w8y took %s to exit after Ctrl-C", took)
			}
			if err := s.Client.Do(ctx(t), "CLIENT", "UNPAUSE").Err(); err != nil {
				t.Fatal(err)
			}
			s.noLocks()
			if n, _ := s.Client.LLen(ctx(t), "started").Result(); n != 0 {
				t.Errorf("a child was started")
			}
		})
	}
}
