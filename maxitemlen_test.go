package main

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/schema"
)

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
	limit := cmd.maxItemLen(lockPrefix, proc.ArgMax())
	if limit <= 0 {
		t.Fatalf("maxItemLen = %d", limit)
	}
	for n, want := range map[int]error{limit: nil, limit + 1: syscall.E2BIG} {
		item := strings.Repeat("x", n)
		if err := cmd.build(item, lockPrefix+item, 1<<62).Run(); !errors.Is(err, want) {
			t.Errorf("an item of %d bytes (limit %d): got %v, want %v", n, limit, err, want)
		}
	}
}
