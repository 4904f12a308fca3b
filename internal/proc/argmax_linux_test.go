package proc

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestMaxValueLenMatchesExecve checks the computed limit against the
// kernel: a value of the limit's length must run, and where one string binds
// (exact), one byte more must fail with E2BIG.
func TestMaxValueLenMatchesExecve(t *testing.T) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string // with {} where the value goes
		environ []string
		exact   bool
	}{
		{"one string binds", []string{"{}"}, []string{"V={}"}, true},
		{"three copies in one argument", []string{"{}-{}-{}"}, nil, true},
		{"the room for all strings binds", strings.Split(strings.Repeat("{} ", 40), " "), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var strs []ExecString
			strs = append(strs, ExecString{Fixed: len(truePath)})
			for _, s := range append(tt.args, tt.environ...) {
				n := strings.Count(s, "{}")
				strs = append(strs, ExecString{Fixed: len(s) - 2*n, Copies: n})
			}
			limit := MaxValueLen(truePath, strs, ArgMax())
			if limit <= 0 {
				t.Fatalf("MaxValueLen = %d", limit)
			}
			run := func(n int) error {
				value := strings.Repeat("x", n)
				cmd := exec.Command(truePath)
				for _, a := range tt.args {
					cmd.Args = append(cmd.Args, strings.ReplaceAll(a, "{}", value))
				}
				cmd.Env = []string{}
				for _, e := range tt.environ {
					cmd.Env = append(cmd.Env, strings.ReplaceAll(e, "{}", value))
				}
				return cmd.Run()
			}
			if err := run(limit); err != nil {
				t.Fatalf("a value of the limit's %d bytes did not run: %v", limit, err)
			}
			over := limit + 1
			if !tt.exact {
				over = limit + 2*ArgSlack
			}
			if err := run(over); !errors.Is(err, syscall.E2BIG) {
				t.Fatalf("a value of %d bytes (limit %d): got %v, want E2BIG", over, limit, err)
			}
		})
	}
}
