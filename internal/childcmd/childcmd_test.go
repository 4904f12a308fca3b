package childcmd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	cmd := c.Build("a:1", "work:lock:a:1", 7)
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
		t.Errorf("Build changed the template environment: %q", c.Environ)
	}
}

func TestResolve(t *testing.T) {
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
		{"no run bit", "childcmd_test.go", proc.ErrNotFound},
		{"no run bit, as a path", "./childcmd_test.go", proc.ErrNotExecutable},
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
		_, err := Resolve([]string{tt.exe}, "", nil)
		if (tt.want == nil && err != nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
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

func BenchmarkBuild(b *testing.B) {
	c := Command{Path: "/bin/sh", Args: []string{"-c", "report {} >/var/log/{}.log", "sh"}, EnvVar: "JOB", Environ: []string{"PATH=/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"}}
	for b.Loop() {
		if cmd := c.Build("customer:42", "work:lock:customer:42", 1); len(cmd.Env) != 7 {
			b.Fatalf("env %q", cmd.Env)
		}
	}
}

// TestMaxItemLenMatchesExecve checks that a command counts every string it
// gives the child (proc's own test checks the arithmetic against the kernel
// in more shapes): an item of the limit's length must start, and one byte
// more must fail with E2BIG, here where one argument with the item three
// times binds.
func TestMaxItemLenMatchesExecve(t *testing.T) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	lockPrefix := schema.Keys{Prefix: "work:"}.Lock("")
	cmd := Command{Path: truePath, Args: []string{"{}-{}-{}"}, EnvVar: "JOB", Environ: []string{"PATH=/bin"}}
	limit := cmd.MaxItemLen(lockPrefix, proc.ArgMax())
	if limit <= 0 {
		t.Fatalf("MaxItemLen = %d", limit)
	}
	for n, want := range map[int]error{limit: nil, limit + 1: syscall.E2BIG} {
		item := strings.Repeat("x", n)
		if err := cmd.Build(item, lockPrefix+item, 1<<62).Run(); !errors.Is(err, want) {
			t.Errorf("an item of %d bytes (limit %d): got %v, want %v", n, limit, err, want)
		}
	}
}
