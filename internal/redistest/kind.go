package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ServerEnv is the one variable that chooses the server every test runs
// against: "redis" (or unset) for redis-server, "valkey" for valkey-server.
// make test runs the suite on Redis and the integration suite again with
// W8Y_TEST_SERVER=valkey.
const ServerEnv = "W8Y_TEST_SERVER"

// Kind is a server that the tests can run against: the names of its
// binaries, and the script that installs them.
type Kind struct {
	// Name is the value of ServerEnv that chooses it.
	Name string
	// Server is the server's binary; "Server --sentinel" is a Sentinel.
	Server string
	// CLI is its command-line client, which redis-cli --cluster create
	// and the tests' shell children use.
	CLI string
	// Ensure is the script under scripts/ that installs both.
	Ensure string
}

var kinds = []Kind{
	{Name: "redis", Server: "redis-server", CLI: "redis-cli", Ensure: "scripts/ensure-redis.sh"},
	// Debian's valkey-server package installs only valkey-* names (the
	// redis-* ones come with valkey-redis-compat, which replaces Redis's
	// own), so the tests name Valkey's binaries themselves.
	{Name: "valkey", Server: "valkey-server", CLI: "valkey-cli", Ensure: "scripts/ensure-valkey.sh"},
}

// Chosen is the server that ServerEnv names, or an error naming the values
// it takes.
func Chosen() (Kind, error) {
	name := os.Getenv(ServerEnv)
	if name == "" {
		return kinds[0], nil
	}
	for _, k := range kinds {
		if k.Name == name {
			return k, nil
		}
	}
	return Kind{}, fmt.Errorf("%s=%q: the tests run on redis or valkey", ServerEnv, name)
}

// Installed reports, for a kind whose binaries are not on PATH, which one is
// missing and how to install it.
func (k Kind) Installed() error {
	for _, bin := range []string{k.Server, k.CLI} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s is not installed: run %s (make test does)", bin, k.Ensure)
		}
	}
	return nil
}

// CLIShim makes, in dir, a redis-cli that is the kind's CLI, and returns dir
// to be put first on PATH: the tests' shell children and the docs' examples
// say redis-cli, as users of either server do. For Redis it makes nothing
// and returns "".
func (k Kind) CLIShim(dir string) (string, error) {
	if k.CLI == "redis-cli" {
		return "", nil
	}
	cli, err := exec.LookPath(k.CLI)
	if err != nil {
		return "", fmt.Errorf("%s is not installed: run %s (make test does)", k.CLI, k.Ensure)
	}
	if err := os.Symlink(cli, filepath.Join(dir, "redis-cli")); err != nil {
		return "", err
	}
	return dir, nil
}

// chosen is Chosen for Start and StartCluster, which fail the test on a
// value that names no server.
func chosen(tb testing.TB) Kind {
	tb.Helper()
	k, err := Chosen()
	if err != nil {
		tb.Fatal(err)
	}
	return k
}
