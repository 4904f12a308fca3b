package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// result is how a w8y run ended.
type result struct {
	Code   int
	Stdout string
	Stderr string
	run    string // the environment the test gave it and its command line
}

// String shows how w8y ran and ended, for a test's failure message.
func (r result) String() string {
	return fmt.Sprintf("exit %d\nrun:    %s\nstdout: %q\nstderr:\n%s", r.Code, r.run, r.Stdout, r.Stderr)
}

// wantExit fails the test unless w8y exited with code, showing how it ran
// and ended.
func (r result) wantExit(t *testing.T, code int) {
	t.Helper()
	r.expect(t, r.Code == code, "exit %d", code)
}

// mustExit is wantExit for a test that cannot go on otherwise.
func (r result) mustExit(t *testing.T, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
}

// wantStdout fails the test unless w8y's stdout, which is its child's, is
// want, showing how it ran and ended.
func (r result) wantStdout(t *testing.T, want string) {
	t.Helper()
	r.expect(t, r.Stdout == want, "stdout %q", want)
}

// wantStderr fails the test unless w8y's stderr, its log, holds want,
// showing how it ran and ended.
func (r result) wantStderr(t *testing.T, want string) {
	t.Helper()
	r.expect(t, strings.Contains(r.Stderr, want), "%q on stderr", want)
}

// wantEnd is wantExit and wantStderr: w8y exited with code, saying said.
func (r result) wantEnd(t *testing.T, code int, said string) {
	t.Helper()
	r.wantExit(t, code)
	r.wantStderr(t, said)
}

// expect fails the test unless ok, saying what was wanted (format and
// args) and how w8y ran and ended.
func (r result) expect(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf("want "+format+", got %s", append(args, r)...)
	}
}

// proc is a w8y process running in the background.
type proc struct {
	cmd    *exec.Cmd
	run    string // as result.run
	stdout redistest.SyncBuffer
	stderr redistest.SyncBuffer
	done   chan struct{}
}

// stderrSoFar is what w8y has written to stderr until now.
func (p *proc) stderrSoFar() string { return p.stderr.String() }

// stdoutSoFar is what w8y has written to stdout until now.
func (p *proc) stdoutSoFar() string { return p.stdout.String() }

// startW8y starts w8y with args and env (added to a minimal environment).
func startW8y(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startCommand(t, env, binary, args...)
}

// startCommand is startW8y for a command that runs w8y, such as unshare.
func startCommand(t *testing.T, env []string, path string, args ...string) *proc {
	t.Helper()
	return startWith(t, nil, env, path, args...)
}

// startWith is startCommand with w8y's stdout and stderr replaced by those
// of outputs that are not nil: [stdout, stderr].
func startWith(t *testing.T, outputs []*os.File, env []string, path string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(path, args...), done: make(chan struct{})}
	p.run = strings.Join(append(slices.Clone(env), filepath.Base(path)), " ") + fmt.Sprintf(" %q", args)
	// The race detector sleeps a second at exit unless told not to; a race
	// still makes w8y exit 66, which fails the test's exit code check.
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GORACE=atexit_sleep_ms=0"}, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if len(outputs) > 0 && outputs[0] != nil {
		p.cmd.Stdout = outputs[0]
	}
	if len(outputs) > 1 && outputs[1] != nil {
		p.cmd.Stderr = outputs[1]
	}
	// A process that w8y failed to stop would hold the output pipes open and
	// make Wait hang; the test fails on it elsewhere, so don't hang here.
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start w8y: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.kill()
		}
		if t.Failed() {
			t.Logf("%s wrote on stderr:\n%s", p.run, p.stderr.String())
		}
	})
	return p
}

// wait waits for w8y to exit and returns how it ended.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(poll.Timeout):
		p.kill()
		t.Fatalf("w8y did not exit within %s; stderr:\n%s", poll.Timeout, p.stderr.String())
	}
	return result{Code: p.cmd.ProcessState.ExitCode(), Stdout: p.stdout.String(), Stderr: p.stderr.String(), run: p.run}
}

// kill ends a w8y with SIGKILL (as a test's crash, or after a failing test
// left it running), and then the process groups of its children, which w8y
// can no longer stop. w8y dies first: a w8y that saw its child killed
// first would finish that run as a failure before its own end.
func (p *proc) kill() {
	pid := p.cmd.Process.Pid
	children := childrenOf(pid)
	_ = p.cmd.Process.Kill()
	// Dead, not only signalled (a zombie or reaped), before its children
	// go; Wait waits for them too, when they hold its output open.
	poll.Poll(poll.Timeout, func() bool { return !stillRuns(pid) })
	for _, child := range children {
		_ = syscall.Kill(-child, syscall.SIGKILL)
	}
	<-p.done
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int {
	var children []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) >= 2 && fields[1] == strconv.Itoa(pid) {
			if child, err := strconv.Atoi(e.Name()); err == nil {
				children = append(children, child)
			}
		}
	}
	return children
}

// signal sends sig to w8y.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal w8y: %v", err)
	}
}

// startCtl starts w8yctl with args and env, as startW8y starts w8y.
func startCtl(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startCommand(t, env, ctlBinary, args...)
}

// runCtl runs w8yctl to completion.
func runCtl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return startCtl(t, env, args...).wait(t)
}

// runW8y runs w8y to completion.
func runW8y(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return startW8y(t, env, args...).wait(t)
}

// processGone waits until pid no longer runs (gone, or a zombie waiting for
// a parent that is not this test) and fails the test if it still runs.
func processGone(t *testing.T, pid int) {
	t.Helper()
	gone := poll.Poll(poll.Timeout, func() bool { return !stillRuns(pid) })
	if !gone {
		// The state, parent and process group say who should have ended
		// it: the guard kills by group and by W8Y_HOLDER.
		last, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		t.Fatalf("process %d still runs after %s: stat %q; W8Y_HOLDER in its environment: %v",
			pid, poll.Timeout, last, bytes.Contains(environ, []byte("W8Y_HOLDER=")))
	}
}

// stillRuns reports whether pid runs: it exists and is not a zombie.
func stillRuns(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	// The state follows the command name in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return !(errors.Is(err, os.ErrNotExist) || err == nil && i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z')
}

// stop sends SIGTERM to a continuous w8y and fails the test unless it
// drains and exits 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGTERM)
	p.wait(t).wantExit(t, 0)
}

// drain sends SIGTERM to every continuous worker in workers and fails the
// test unless each drains and exits 0.
func drain(t *testing.T, workers []*proc) {
	t.Helper()
	for _, w := range workers {
		w.signal(t, syscall.SIGTERM)
	}
	for _, w := range workers {
		w.wait(t).wantExit(t, 0)
	}
}
