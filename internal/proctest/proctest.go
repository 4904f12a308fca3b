// Package proctest holds what the tests of child processes share: a child
// started once its script says it is ready, and a pipe whose reader has
// gone. It knows nothing of w8y's own packages, so that their in-package
// tests can use it.
package proctest

import (
	"os"
	"os/exec"
	"testing"
)

// StartReady starts sh -c script with start, whose stdout is a pipe, and
// returns what start returned once the script has written a byte to it:
// say, once it has set its traps. The caller stops the child.
func StartReady[C any](t *testing.T, script string, start func(*exec.Cmd) (C, error)) C {
	t.Helper()
	ready, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	cmd := exec.Command("sh", "-c", script)
	cmd.Stdout = w
	child, err := start(cmd)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the child never said it was ready: %v", err)
	}
	return child
}

// ClosedPipe returns the write end of a pipe whose reader has gone, as
// `w8y ... | head -1` leaves it once head exits: every write to it raises
// SIGPIPE and fails with EPIPE. It is closed when the test ends.
func ClosedPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}
