package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/doctest"
)

// spins says why the worker that o describes would run its items back to
// back, over and over (hundreds of runs a second for quick ones), or ""
// when it would not: a --continuous worker needs a --cooldown or a
// --schedule, and so does --until-idle, which an item without either
// never lets end.
func spins(o *Options) string {
	if !o.Continuous || o.Cooldown > 0 || o.Schedule != "" {
		return ""
	}
	return "a --continuous worker without --cooldown or --schedule (W8Y_COOLDOWN, W8Y_SCHEDULE) runs its items back to back, over and over"
}

// TestShippedWorkersDoNotSpin: every continuous worker that the project
// ships or shows sets a cooldown or a schedule: the systemd unit with each
// environment file in scripts/ (read as systemd reads them), the worker's
// image's CMD (in the Containerfile's comment, the README and the pages),
// and every w8y command line with -c in the README's and the pages' code
// blocks. (TestKubernetesManifests checks the manifests' containers.)
func TestShippedWorkersDoNotSpin(t *testing.T) {
	clearW8yEnv(t)
	root := doctest.Root(t)
	unit, err := os.ReadFile(filepath.Join(root, "scripts", "w8y@.service"))
	if err != nil {
		t.Fatal(err)
	}
	var unitEnv []string
	var execStart []string
	for line := range strings.Lines(string(unit)) {
		line = strings.TrimSpace(line)
		if kv, ok := strings.CutPrefix(line, "Environment="); ok {
			unitEnv = append(unitEnv, kv)
		}
		if cmd, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = strings.Fields(cmd)[1:]
		}
	}
	envFiles, _ := filepath.Glob(filepath.Join(root, "scripts", "*.env"))
	if len(envFiles) == 0 || len(execStart) == 0 {
		t.Fatalf("no environment file (%q) or no ExecStart= in the unit", envFiles)
	}
	for _, file := range envFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			clearW8yEnv(t)
			env := append([]string(nil), unitEnv...)
			for line := range strings.Lines(string(data)) {
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					env = append(env, line)
				}
			}
			var command string
			for _, kv := range env {
				name, value, _ := strings.Cut(kv, "=")
				value = strings.Trim(value, `"'`)
				if name == "COMMAND" {
					command = value
				} else if strings.HasPrefix(name, "W8Y_") {
					t.Setenv(name, value)
				}
			}
			var args []string
			for _, word := range execStart {
				if word == "$COMMAND" {
					args = append(args, strings.Fields(command)...)
				} else {
					args = append(args, word)
				}
			}
			checkSpin(t, "w8y@.service with "+filepath.Base(file), args)
		})
	}

	lines := 0
	texts := []string{string(mustRead(t, filepath.Join(root, "Containerfile")))}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, page := range append(pages, filepath.Join(root, "README.md")) {
		for _, b := range doctest.Blocks(string(mustRead(t, page))) {
			texts = append(texts, b.Text)
		}
	}
	for _, text := range texts {
		for line := range strings.Lines(strings.ReplaceAll(text, "\\\n", " ")) {
			var args []string
			if m := cmdLine.FindStringSubmatch(line); m != nil {
				for _, q := range quoted.FindAllStringSubmatch(m[1], -1) {
					args = append(args, q[1])
				}
			} else if words := doctest.Words(line); len(words) > 1 && filepath.Base(words[0]) == "w8y" {
				args = words[1:]
			}
			if len(args) == 0 {
				continue
			}
			// A line that is no valid command (a usage line, a refused
			// example) runs no worker.
			o, err := parseOptions(args, io.Discard)
			if err != nil || !o.Continuous {
				continue
			}
			lines++
			if why := spins(o); why != "" {
				t.Errorf("%s: %s", strings.TrimSpace(line), why)
			}
		}
	}
	// The image's CMD thrice, the scheduling page's and a few more.
	if lines < 5 {
		t.Errorf("found %d continuous workers in the pages and the Containerfile, want more", lines)
	}
}

var (
	// cmdLine is a Containerfile's CMD in exec form, as a line or in a
	// comment: w8y is the image's entrypoint.
	cmdLine = regexp.MustCompile(`^[#\s]*CMD (\[.*\])\s*$`)
	quoted  = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
)

// checkSpin fails the test if w8y with args, in the test's environment,
// would spin (see spins).
func checkSpin(t *testing.T, what string, args []string) {
	t.Helper()
	o, err := parseOptions(args, io.Discard)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if why := spins(o); why != "" {
		t.Errorf("%s: %s", what, why)
	}
}

// clearW8yEnv unsets, for the test, the W8Y_* variables of the environment
// that runs it.
func clearW8yEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "W8Y_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
