package integration_test

import (
	"os"
	"path/filepath"

	"github.com/w8y/w8y/internal/redistest"
)

// useCLI puts first on the tests' PATH a redis-cli that is the chosen
// server's client (see redistest.ServerEnv), once, before any test runs: the
// tests' shell children and the docs' examples say redis-cli, as users of
// either server do. On Redis it changes nothing.
func useCLI(kind redistest.Kind, tmp string) error {
	dir := filepath.Join(tmp, "cli")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	shim, err := kind.CLIShim(dir)
	if err != nil || shim == "" {
		return err
	}
	return os.Setenv("PATH", shim+string(os.PathListSeparator)+os.Getenv("PATH"))
}
