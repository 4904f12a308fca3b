// Package handoff replaces the running process with a sibling build of the
// same program, through execve: same PID, same arguments and environment,
// so that a service manager sees no difference. The lean build of w8y
// hands a run with --metrics-addr over to w8y-metrics this way.
package handoff

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Exec replaces this process with the executable name, found by Find,
// given args, this process' own arguments. option is what asked for it, as
// the user wrote it, and why what name adds; both go into the errors. It
// returns only on failure.
func Exec(name, option, why string, args []string) error {
	path, err := Find(name, option, why)
	if err != nil {
		return err
	}
	argv := append([]string{path}, args...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("%s: run %s: %w", option, path, err)
	}
	return nil
}

// Find looks for the executable name next to this executable, then in
// PATH, and refuses one that is this very file, which would exec itself
// forever.
func Find(name, option, why string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("%s: find this executable: %w", option, err)
	}
	path := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(path); err != nil {
		if path, err = exec.LookPath(name); err != nil {
			return "", fmt.Errorf("%s needs %s, %s, next to %s or in PATH (make build makes both)", option, name, why, self)
		}
	}
	selfInfo, err1 := os.Stat(self)
	pathInfo, err2 := os.Stat(path)
	if err1 == nil && err2 == nil && os.SameFile(selfInfo, pathInfo) {
		return "", fmt.Errorf("%s: %s is this very build, not %s", option, path, why)
	}
	return path, nil
}
