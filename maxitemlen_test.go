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

// TestMaxItemLenMatchesExecve checks the computed limit against the kernel:
// an item of the limit's length must start, and where the limit is exact (one
// string too long), one byte more must fail with E2BIG.
func TestMaxItemLenMatchesExecve(t *testing.T) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	lockPrefix := schema.Keys{Prefix: "work:"}.Lock("")
	tests := []struct {
		name  string
		cmd   Command
		exact bool
	}{
		// One copy in each string: the lock key variable is the longest.
		{"one string bound", Command{Path: truePath, Args: []string{"{}"}, Environ: []string{"PATH=/bin"}}, true},
		// An argument with the item three times binds before the variables.
		{"three copies in one argument", Command{Path: truePath, Args: []string{"{}-{}-{}"}, EnvVar: "JOB"}, true},
		// Forty copies: the room for all strings binds, with some slack.
		{"total bound", Command{Path: truePath, Args: strings.Split(strings.Repeat("{} ", 40), " ")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := tt.cmd.maxItemLen(lockPrefix, proc.ArgMax())
			if limit <= 0 {
				t.Fatalf("maxItemLen = %d", limit)
			}
			item := strings.Repeat("x", limit)
			if err := tt.cmd.build(item, lockPrefix+item).Run(); err != nil {
				t.Fatalf("an item of the limit's %d bytes did not run: %v", limit, err)
			}
			over := limit + 1
			if !tt.exact {
				over = limit + 2*proc.ArgSlack
			}
			item = strings.Repeat("x", over)
			err := tt.cmd.build(item, lockPrefix+item).Run()
			if !errors.Is(err, syscall.E2BIG) {
				t.Fatalf("an item of %d bytes (limit %d): got %v, want E2BIG", over, limit, err)
			}
		})
	}
}
