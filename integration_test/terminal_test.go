package integration_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

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
	case <-time.After(redistest.Timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("w8y in a terminal did not finish; the screen shows:\n%s", screen.String())
	}
	return result{Code: cmd.ProcessState.ExitCode(), Stdout: screen.String(), run: "script -qec " + command}
}

// TestTerminalReadsReachTheChild: a child that reads the terminal gets what
// is typed, instead of being stopped for reading from a background group.
func TestTerminalReadsReachTheChild(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "tty:list", "a")
	r := runInTerminal(t, s, started+`; read line; echo "got $line for $W8Y_ITEM"`, func(keyboard io.Writer) {
		io.WriteString(keyboard, "hello\n")
	})
	r.wantExit(t, 0)
	if !strings.Contains(r.Stdout, "got hello for a") {
		t.Errorf("the child did not read what was typed: %s", r)
	}
	s.noLocks(t, "tty")
}

// TestTerminalCtrlCReachesTheChild: Ctrl-C interrupts the child's group,
// and w8y exits with the child's status, 130.
func TestTerminalCtrlCReachesTheChild(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "tty:list", "a")
	// The start is reported from the background and the shell becomes the
	// sleep, so the group's foreground process dies of SIGINT whenever the
	// key arrives. (With "started; sleep", a Ctrl-C that lands while the shell
	// waits on redis-cli is absorbed: dash, like bash, only dies of SIGINT if
	// the command it waited on did, and redis-cli had already exited.)
	r := runInTerminal(t, s, started+` & exec sleep 1000`, func(keyboard io.Writer) {
		io.WriteString(keyboard, "\x03")
	})
	r.wantExit(t, 130)
	s.noLocks(t, "tty")
}
