package integration_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestSchemaVersion: a worker records the version of the layout of w8y's
// keys once the list exists, and refuses, with one line and exit 125 before
// it takes anything, a list that a newer w8y keeps in a later layout, or
// whose version key holds something else.
func TestSchemaVersion(t *testing.T) {
	t.Parallel()
	b := setup(t, "ver")

	// No list: nothing to record (a mistyped prefix leaves nothing behind).
	b.run("true").wantExit(t, 120)
	if n := b.Client.Exists(ctx(t), b.key("schema")).Val(); n != 0 {
		t.Errorf("a run on a missing list left %s", b.key("schema"))
	}

	b.items("a", "b")
	b.run("true").mustExit(t, 0)
	if v := b.Client.Get(ctx(t), b.key("schema")).Val(); v != "2" {
		t.Errorf("%s holds %q after a run, want 2", b.key("schema"), v)
	}
	// An older version (or this one) runs.
	b.Client.Set(ctx(t), b.key("schema"), "0", 0)
	b.run("true").mustExit(t, 0)

	for _, tt := range []struct{ found, want string }{
		{"3", `the list "ver:list" is kept in version 3 of the layout of w8y's keys, by a newer w8y; this one knows version 2: upgrade w8y`},
		{"two", `"ver:schema" holds "two", not a version of the layout of w8y's keys: delete it if no w8y wrote it (w8y writes 2)`},
	} {
		b.Client.Set(ctx(t), b.key("schema"), tt.found, 0)
		list := b.list()
		for _, mode := range [][]string{nil, {"-c"}} {
			r := b.run(append(mode, "sh", "-c", started)...)
			r.wantExit(t, 125)
			oneLine(t, r.Stderr, tt.want)
			b.wantList(list...)
		}
		if n := b.Client.LLen(ctx(t), "started").Val(); n != 0 {
			t.Errorf("schema %q: %d children started", tt.found, n)
		}
		if v := b.Client.Get(ctx(t), b.key("schema")).Val(); v != tt.found {
			t.Errorf("schema %q was overwritten with %q", tt.found, v)
		}
	}
	b.noLocks()
}

// TestStartsLight: w8y's own packages allocate little before main runs. Every
// process of w8y pays for its package initialisation, a one-shot run twice
// (its guard is the same binary started again): the Lua scripts are joined
// and hashed at their first use (internal/script), not at start, where
// internal/take's alone cost 467 KB. GODEBUG=inittrace=1 prints what each
// package's init allocated, which does not depend on the machine's speed.
func TestStartsLight(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("w8y --version: %v\n%s", err, out)
	}
	total, seen := 0, 0
	for line := range strings.Lines(string(out)) {
		// init github.com/w8y/w8y/internal/take @1.4 ms, 0.013 ms clock, 2936 bytes, 11 allocs
		f := strings.Fields(line)
		if len(f) < 10 || f[0] != "init" || !(f[1] == "main" || strings.HasPrefix(f[1], "github.com/w8y/w8y/")) {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil || f[8] != "bytes," {
			t.Fatalf("cannot read inittrace's line %q", line)
		}
		total += n
		seen++
	}
	if seen == 0 {
		t.Fatalf("GODEBUG=inittrace=1 printed no init of w8y's packages:\n%s", out)
	}
	if total > 100<<10 {
		t.Errorf("w8y's packages allocate %d bytes in their inits, want at most %d:\n%s", total, 100<<10, out)
	}
}
