package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/schema"
)

func TestExpandArgs(t *testing.T) {
	tests := []struct {
		args []string
		item string
		want []string
	}{
		{[]string{"hello", "world,", "{}"}, "a:0", []string{"hello", "world,", "a:0"}},
		{[]string{"--item={}", "/data/{}/{}.csv"}, "x", []string{"--item=x", "/data/x/x.csv"}},
		{[]string{"{", "}", "{ }"}, "x", []string{"{", "}", "{ }"}},
		{[]string{"{}"}, "with space and $HOME", []string{"with space and $HOME"}},
		{[]string{"{}"}, "{}", []string{"{}"}},
		{nil, "x", []string{}},
	}
	for _, tt := range tests {
		got := expandArgs(tt.args, tt.item)
		if !slices.Equal(got, tt.want) {
			t.Errorf("expandArgs(%q, %q) = %q, want %q", tt.args, tt.item, got, tt.want)
		}
	}
}

func TestBuildEnvironment(t *testing.T) {
	c := Command{Path: "/bin/true", Args: []string{"{}"}, EnvVar: "JOB", Environ: []string{"PATH=/bin", "W8Y_ITEM=stale"}}
	cmd := c.build("a:1", "work:lock:a:1", 7)
	if !slices.Equal(cmd.Args, []string{"/bin/true", "a:1"}) {
		t.Errorf("args %q", cmd.Args)
	}
	for _, want := range []string{"W8Y_ITEM=a:1", "W8Y_LOCK_KEY=work:lock:a:1", "W8Y_FENCE=7", "JOB=a:1", "PATH=/bin"} {
		if !slices.Contains(cmd.Environ(), want) {
			t.Errorf("environment %q lacks %q", cmd.Environ(), want)
		}
	}
	if slices.Contains(cmd.Environ(), "W8Y_ITEM=stale") {
		t.Errorf("stale W8Y_ITEM survived: %q", cmd.Environ())
	}
	if len(c.Environ) != 2 {
		t.Errorf("build changed the template environment: %q", c.Environ)
	}
}

func TestResolveCommand(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		exe  string
		want error
	}{
		{"on PATH", "sh", nil},
		{"missing", "/nonexistent/w8y-test", proc.ErrNotFound},
		{"missing on PATH", "w8y-no-such-command", proc.ErrNotFound},
		{"a directory", dir, proc.ErrNotExecutable},
		{"no run bit", "spawn_test.go", proc.ErrNotFound},
		{"no run bit, as a path", "./spawn_test.go", proc.ErrNotExecutable},
		// As execvp, env and timeout: what PATH holds but cannot run gives
		// 126, not 127, unless a later directory has a runnable one.
		{"dot", ".", proc.ErrNotExecutable},
		{"dot dot", "..", proc.ErrNotExecutable},
		{"no run bit in PATH", "job.sh", proc.ErrNotExecutable},
		{"a directory in PATH", "jobs", proc.ErrNotExecutable},
		{"no run bit in PATH, runnable later in PATH", "twice", nil},
	}
	bin, later := filepath.Join(dir, "bin"), filepath.Join(dir, "later")
	for _, d := range []string{filepath.Join(bin, "jobs"), later} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for path, mode := range map[string]os.FileMode{"bin/job.sh": 0o644, "bin/twice": 0o644, "later/twice": 0o755} {
		if err := os.WriteFile(filepath.Join(dir, path), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(filepath.ListSeparator)+later+string(filepath.ListSeparator)+os.Getenv("PATH"))
	for _, tt := range tests {
		_, err := resolveCommand([]string{tt.exe}, "", nil)
		if (tt.want == nil && err != nil) || (tt.want != nil && !errorsIs(err, tt.want)) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

// BenchmarkExpandArgs measures building a child's arguments, done once per
// item taken.
func BenchmarkExpandArgs(b *testing.B) {
	args := []string{"--report", "{}", "--out=/data/{}/report.csv", "--verbose"}
	for b.Loop() {
		expandArgs(args, "customer:12345")
	}
}

// TestNewRunEnd: how each way a run can end is named, whether it counts
// against the item, which event ends it and which exit code its record
// gets.
func TestNewRunEnd(t *testing.T) {
	codes := []int{0, 3}
	const none = -1 // no exit code recorded: no child was started
	tests := []struct {
		name    string
		exit    proc.Exit
		err     error
		stopped bool
		want    schema.Result
		failed  bool
		event   string
		code    int
	}{
		{"exit 0", proc.Exit{Code: 0}, nil, false, schema.ResultSuccess, false, "finish", 0},
		{"exit 3 is listed", proc.Exit{Code: 3}, nil, false, schema.ResultSuccess, false, "finish", 3},
		{"exit 1", proc.Exit{Code: 1}, nil, false, schema.ResultFailure, true, "finish", 1},
		{"killed by a signal", proc.Exit{Code: 137, Signal: syscall.SIGKILL}, nil, false, schema.ResultFailure, true, "finish", 137},
		{"stopped by w8y's stop signal", proc.Exit{Code: 143, Signal: syscall.SIGTERM}, nil, true, schema.ResultInterrupted, false, "finish", 143},
		{"success despite a stop signal", proc.Exit{Code: 0}, nil, true, schema.ResultSuccess, false, "finish", 0},
		{"stop before the child started", proc.Exit{}, stopError{Signal: syscall.SIGTERM}, true, schema.ResultInterrupted, false, "finish", none},
		{"lock lost", proc.Exit{Code: 143}, fmt.Errorf("x: %w", ErrLockLost), false, schema.ResultLockLost, true, "lock_lost", 143},
		{"lock lost during a stop", proc.Exit{Code: 143}, fmt.Errorf("x: %w", ErrLockLost), true, schema.ResultLockLost, true, "lock_lost", 143},
		{"timeout", proc.Exit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), false, schema.ResultTimeout, true, "timeout", 143},
		{"could not be run", proc.Exit{}, fmt.Errorf("%w: x", proc.ErrNotExecutable), false, schema.ResultFailure, true, "finish", 126},
		{"other error", proc.Exit{}, errors.New("boom"), false, schema.ResultFailure, true, "finish", 0},
		{"timeout during a stop", proc.Exit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), true, schema.ResultTimeout, true, "timeout", 143},
		{"lock lost though the child exited 0", proc.Exit{Code: 0}, fmt.Errorf("x: %w", ErrLockLost), false, schema.ResultLockLost, true, "lock_lost", 0},
		{"executable not found", proc.Exit{}, fmt.Errorf("%w: gone", proc.ErrNotFound), false, schema.ResultFailure, true, "finish", 127},
		{"cancelled", proc.Exit{Code: 143}, &cancelledError{}, false, schema.ResultCancelled, false, "cancelled", 143},
		{"cancelled as a failure", proc.Exit{Code: 143}, &cancelledError{req: schema.CancelRequest{AsFailure: true}}, false, schema.ResultCancelled, true, "cancelled", 143},
		{"cancelled though the child exited 0", proc.Exit{Code: 0}, &cancelledError{}, false, schema.ResultCancelled, false, "cancelled", 0},
		{"cancelled during a stop", proc.Exit{Code: 143}, &cancelledError{}, true, schema.ResultCancelled, false, "cancelled", 143},
	}
	for _, tt := range tests {
		end := newRunEnd("a", tt.exit, tt.err, tt.stopped, codes)
		got := end.Result
		if got != tt.want || end.Failed() != tt.failed || got.Event() != tt.event {
			t.Errorf("%s: %q (failed %v, event %q), want %q (failed %v, event %q)",
				tt.name, got, end.Failed(), got.Event(), tt.want, tt.failed, tt.event)
		}
		if want := tt.want == schema.ResultCancelled; (end.Cancel != nil) != want {
			t.Errorf("%s: the end's cancel request is %v", tt.name, end.Cancel)
		}
		code := none
		if end.Exited {
			code = end.Exit.Code
		}
		if code != tt.code || end.Item != "a" || end.Err != tt.err || end.At.IsZero() {
			t.Errorf("%s: recorded code %d, item %q, err %v, at %v; want code %d", tt.name, code, end.Item, end.Err, end.At, tt.code)
		}
	}
}
