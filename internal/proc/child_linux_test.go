package proc

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"golang.org/x/sys/unix"
)

func TestExitOf(t *testing.T) {
	tests := []struct {
		script string
		want   Exit
	}{
		{"exit 0", Exit{Code: 0}},
		{"exit 7", Exit{Code: 7}},
		{"exit 255", Exit{Code: 255}},
		{"kill -KILL $$", Exit{Code: 137, Signal: syscall.SIGKILL}},
		{"kill -TERM $$", Exit{Code: 143, Signal: syscall.SIGTERM}},
	}
	for _, tt := range tests {
		cmd := exec.Command("sh", "-c", tt.script)
		_ = cmd.Run()
		if got := exitOf(cmd.ProcessState); got != tt.want {
			t.Errorf("%q: %+v, want %+v", tt.script, got, tt.want)
		}
	}
}

// testMarker is unique to each test process, so that tests that run at
// once in other packages never find each other's children.
var testMarker = "W8Y_PROC_TEST=" + strconv.Itoa(os.Getpid())

// spawn starts sh -c script through a Spawner that is closed when the test
// ends, and returns the child.
func spawn(t *testing.T, script string) *Child {
	t.Helper()
	s := NewSpawner(Terminal{}, nil, testMarker, nil)
	t.Cleanup(s.Close)
	c, err := s.Start(exec.Command("sh", "-c", script), NoDeadline)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestChildExitsWithItsCode(t *testing.T) {
	c := spawn(t, "exit 3")
	<-c.Done()
	if got := c.Exit(); got.Code != 3 || got.Signal != 0 || got.Duration <= 0 {
		t.Errorf("exit %+v, want code 3 with a duration", got)
	}
	if c.PID <= 0 || c.Started.IsZero() {
		t.Errorf("pid %d, started %v", c.PID, c.Started)
	}
}

func TestChildCarriesTheMarker(t *testing.T) {
	c := spawn(t, "sleep 30")
	defer c.Stop(time.Second)
	if pids := ProcessesWithEnv(testMarker); !slices.Contains(pids, c.PID) {
		t.Errorf("ProcessesWithEnv(%q) = %v, without the child %d", testMarker, pids, c.PID)
	}
}

// TestStopEndsTheWholeGroup: a grandchild that ignores SIGTERM is SIGKILLed
// with its group once the grace has passed.
func TestStopEndsTheWholeGroup(t *testing.T) {
	dir := t.TempDir()
	c := spawn(t, `sh -c 'trap "" TERM; echo $$ >`+dir+`/pid; while :; do sleep 1; done' & wait`)
	var grandchild int
	if !poll.Poll(10*time.Second, func() bool {
		data, _ := os.ReadFile(dir + "/pid")
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return grandchild != 0
	}) {
		t.Fatal("the grandchild never wrote its pid")
	}
	// A pidfd names this very process, where a pid could name another by
	// the time the test looks: pids are reused, fast on a busy machine.
	pidfd, err := unix.PidfdOpen(grandchild, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	// Stop waits for the group; one it failed to signal would keep it
	// waiting for ever, and the test must fail rather than hang.
	stopped := make(chan Exit, 1)
	go func() { stopped <- c.Stop(200 * time.Millisecond) }()
	var exit Exit
	select {
	case exit = <-stopped:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-c.PID, syscall.SIGKILL)
		t.Fatal("Stop had not returned after 30s: the group was not stopped")
	}
	if exit.Signal != syscall.SIGTERM && exit.Signal != syscall.SIGKILL {
		t.Errorf("the child ended with %v, want a signal", exit)
	}
	if groupAlive(c.PID) {
		t.Error("the child's process group outlived Stop")
	}
	// A pidfd polls readable once its process has exited, zombie or not.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 0); err != nil || n != 1 {
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(grandchild) + "/stat")
		t.Errorf("the grandchild %d had not exited when Stop returned (poll %d, %v): %s", grandchild, n, err, stat)
	}
}

// TestStopContinuesAStoppedGroup: a child whose group job control stopped
// is continued after SIGTERM, so that its trap runs, instead of waiting out
// the grace for SIGKILL.
func TestStopContinuesAStoppedGroup(t *testing.T) {
	dir := t.TempDir()
	c := spawn(t, `trap 'exit 7' TERM; touch `+dir+`/ready; while :; do sleep 0.05; done`)
	if !poll.Poll(10*time.Second, func() bool { _, err := os.Stat(dir + "/ready"); return err == nil }) {
		t.Fatal("the child never got ready")
	}
	if err := c.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if exit := c.Stop(10 * time.Second); exit.Code != 7 {
		t.Errorf("the stopped child ended with %v, want its trap's exit code 7", exit)
	}
}

// TestEndStragglers: processes that outlive the child in its group are
// ended, and reported.
func TestEndStragglers(t *testing.T) {
	c := spawn(t, "sleep 30 & exit 0")
	<-c.Done()
	if !c.EndStragglers(time.Now().Add(time.Second)) {
		t.Error("the sleep left behind was not reported")
	}
	if groupAlive(c.PID) {
		t.Error("the group outlived EndStragglers")
	}
	if c.EndStragglers(time.Now().Add(time.Second)) {
		t.Error("an empty group reported stragglers")
	}
}

func TestStartReportsWhatCannotRun(t *testing.T) {
	s := NewSpawner(Terminal{}, nil, testMarker, nil)
	defer s.Close()
	tests := []struct {
		path string
		want error
	}{
		{"/nonexistent/w8y-test", ErrNotFound},
		{t.TempDir(), ErrNotExecutable},
	}
	for _, tt := range tests {
		_, err := s.Start(exec.Command(tt.path), NoDeadline)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.path, err, tt.want)
		}
	}
}
