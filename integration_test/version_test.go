package integration_test

import (
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
