package handoff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFind: the build to hand over to is found in PATH when it is not next
// to this executable; a missing one is one line that names the option and
// what the build adds; this very file (a link to it) is refused, as it
// would exec itself forever.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if err := os.WriteFile(filepath.Join(dir, "w8y-other"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if path, err := Find("w8y-other", "--opt", "the other build"); err != nil || path != filepath.Join(dir, "w8y-other") {
		t.Errorf("in PATH: %q, %v", path, err)
	}

	_, err := Find("w8y-missing", "--opt", "the other build")
	if err == nil || !strings.HasPrefix(err.Error(), "--opt needs w8y-missing, the other build, next to ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("missing: %v", err)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "w8y-self")); err != nil {
		t.Fatal(err)
	}
	if _, err := Find("w8y-self", "--opt", "the other build"); err == nil || !strings.Contains(err.Error(), "is this very build") {
		t.Errorf("this very file: %v, want it refused", err)
	}
}
