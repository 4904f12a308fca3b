package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// systemdUnit reads scripts/w8y@.service and the recipes' environment file
// (which must be scripts/w8y-reports.env) as systemd would: the unit's
// Environment= first, then EnvironmentFile=, which wins; and ExecStart=
// as words.
func systemdUnit(t *testing.T) (env map[string]string, execStart []string) {
	t.Helper()
	unit, err := os.ReadFile("../scripts/w8y@.service")
	if err != nil {
		t.Fatal(err)
	}
	envFile := doctest.Block(t, "docs/recipes.md", "sh", "COMMAND=")
	example, err := os.ReadFile("../scripts/w8y-reports.env")
	if err != nil || string(example) != envFile {
		t.Fatalf("docs/recipes.md's environment file is not scripts/w8y-reports.env (%v)", err)
	}
	env = map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if kv, ok := strings.CutPrefix(line, "Environment="); ok {
			name, value, _ := strings.Cut(kv, "=")
			env[name] = value
		}
		if cmd, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = strings.Fields(cmd)
		}
	}
	for name, value := range environmentFile(t, envFile) {
		env[name] = value
	}
	return env, execStart
}

// environmentFile reads text as systemd's EnvironmentFile= does for plain
// lines: comments and blank lines skipped, KEY=value, and a value wrapped
// whole in double or single quotes stripped of them. Anything fancier
// (escapes, a quote inside a value, a line continued) is refused, so that
// the file stays one that sh reads the same.
func environmentFile(t *testing.T, text string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(line, `\`) || strings.HasSuffix(line, " ") {
			t.Fatalf("the environment file's line %q is not plain KEY=value", line)
		}
		for _, q := range []string{`"`, `'`} {
			if len(value) >= 2 && strings.HasPrefix(value, q) && strings.HasSuffix(value, q) {
				value = value[1 : len(value)-1]
			}
		}
		if strings.ContainsAny(value, `"'`) {
			t.Fatalf("the environment file's line %q quotes inside its value", line)
		}
		env[name] = value
	}
	return env
}

// unitArgv is ExecStart's argv with $COMMAND split into words, as systemd
// splits an unquoted $VAR, and the installed paths replaced by the test's.
func unitArgv(execStart []string, env map[string]string, script string) []string {
	var argv []string
	for _, word := range execStart {
		if word == "$COMMAND" {
			argv = append(argv, strings.Fields(installed(env["COMMAND"], script))...)
			continue
		}
		argv = append(argv, installed(word, ""))
	}
	return argv
}

// TestSystemdEnvironmentFileIsPlain: sh reads the recipes' environment
// file (set -a; . FILE) to the same variables as systemd, so that a person
// can load it to try the command by hand.
func TestSystemdEnvironmentFileIsPlain(t *testing.T) {
	t.Parallel()
	want := environmentFile(t, doctest.Block(t, "docs/recipes.md", "sh", "COMMAND="))
	out, err := exec.Command("sh", "-ec", `set -a; . ../scripts/w8y-reports.env; set +a; env`).CombinedOutput()
	if err != nil {
		t.Fatalf("sh cannot load the environment file: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		name, value, _ := strings.Cut(line, "=")
		got[name] = value
	}
	for name, value := range want {
		if got[name] != value {
			t.Errorf("sh reads %s=%q, systemd %q", name, got[name], value)
		}
	}
}

// TestSystemdUnitRunsEachItemOncePerCooldown: as written, the unit and its
// environment file run each item once, then leave it in a cooldown of
// minutes: a --continuous worker without one runs quick items hundreds of
// times a second.
func TestSystemdUnitRunsEachItemOncePerCooldown(t *testing.T) {
	t.Parallel()
	env, execStart := systemdUnit(t)
	cooldown, err := time.ParseDuration(env["W8Y_COOLDOWN"])
	if err != nil || cooldown < time.Minute {
		t.Fatalf("the recipe's W8Y_COOLDOWN=%q: want a cooldown of minutes (%v)", env["W8Y_COOLDOWN"], err)
	}
	s := startRedis(t, redistest.Password("secret"))
	items := []string{"a", "b", "c"}
	s.seed(t, "reports:list", items...)
	dir := t.TempDir()
	env["W8Y_REDIS_URL"] = fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port)
	env["W8Y_METRICS_ADDR"] = fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	var environ []string
	for name, value := range env {
		environ = append(environ, name+"="+value)
	}
	argv := unitArgv(execStart, env, reportScript(t))
	p := startCommand(t, append(environ, "DIR="+dir), argv[0], argv[1:]...)
	// Each item's cooldown is set as its run ends: once all three are
	// cooling, no worker may run any of them again for minutes.
	poll.WaitFor(t, "all three items to run and cool down", func() bool {
		for _, item := range items {
			if s.Client.PTTL(ctx(t), "reports:cooldown:"+item).Val() < cooldown-time.Minute {
				return false
			}
		}
		return true
	})
	p.signal(t, syscall.SIGTERM)
	p.wait(t).wantExit(t, 0)
	runs := lines(t, dir+"/runs")
	slices.Sort(runs)
	if !slices.Equal(runs, items) {
		t.Errorf("runs %q, want each item once", runs)
	}
}
