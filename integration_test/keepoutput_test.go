package integration_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/redistest"
)

// TestKeepOutput: with --keep-output, the child's stdout and stderr reach
// w8y's byte for byte (binary, and megabytes of it), and the item's state
// hash keeps the last BYTES of each.
func TestKeepOutput(t *testing.T) {
	t.Parallel()
	s := setup(t, "ko")
	s.items("a")
	dir := t.TempDir()
	blob := make([]byte, 5<<19)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "blob"), blob, 0o600); err != nil {
		t.Fatal(err)
	}
	const errBytes = "warn\x00\xff\ntail"
	s.env = append(s.env, "DIR="+dir)
	r := s.run("-q", "--keep-output", "1000", "sh", "-c", `cat "$DIR/blob"; printf 'warn\000\377\ntail' >&2`)
	r.mustExit(t, 0)
	if !bytes.Equal([]byte(r.Stdout), blob) {
		t.Errorf("stdout: %d bytes, not the child's %d", len(r.Stdout), len(blob))
	}
	if r.Stderr != errBytes {
		t.Errorf("stderr %q, want the child's %q", r.Stderr, errBytes)
	}
	state := s.Client.HGetAll(ctx(t), s.key("state:a")).Val()
	if !bytes.Equal([]byte(state["last_stdout"]), blob[len(blob)-1000:]) {
		t.Errorf("last_stdout holds %d bytes, not the last 1000 of stdout", len(state["last_stdout"]))
	}
	if state["last_stderr"] != errBytes {
		t.Errorf("last_stderr %q, want %q", state["last_stderr"], errBytes)
	}
}

// TestKeepOutputUnbuffered: what the child writes reaches w8y's stdout while
// the child still runs, without waiting for a newline or its end.
func TestKeepOutputUnbuffered(t *testing.T) {
	t.Parallel()
	s := setup(t, "ku")
	s.items("a")
	dir := t.TempDir()
	s.env = append(s.env, "DIR="+dir)
	p := s.start("-q", "--keep-output", "10", "sh", "-c", `printf partial; `+started+`; while [ ! -e "$DIR/gate" ]; do sleep 0.01; done; printf ' and more'`)
	s.popStarted(t)
	redistest.WaitFor(t, "the child's first bytes", func() bool { return p.stdoutSoFar() == "partial" })
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	r.wantExit(t, 0)
	r.wantStdout(t, "partial and more")
	if got := s.Client.HGet(ctx(t), s.key("state:a"), "last_stdout").Val(); got != "l and more" {
		t.Errorf("last_stdout %q, want the last 10 bytes", got)
	}
}

// TestKeepOutputOff: by default the child's stdout is w8y's own (a file
// here), untouched, and the state keeps none of it; with --keep-output it
// is a pipe.
func TestKeepOutputOff(t *testing.T) {
	t.Parallel()
	s := setup(t, "kf")
	s.items("a")
	for _, tt := range []struct {
		args []string
		// want is how the child's stdout shows in /proc: the file itself,
		// or a pipe.
		want string
		kept bool
	}{
		{nil, "file", false},
		{[]string{"--keep-output", "100"}, "pipe:", true},
	} {
		out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		args := s.at(append(append([]string{"-q"}, tt.args...), "sh", "-c", `readlink /proc/$$/fd/1`)...)
		startWith(t, []*os.File{out}, nil, binary, args...).wait(t).mustExit(t, 0)
		data, err := os.ReadFile(out.Name())
		if err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSpace(string(data))
		if want := map[string]string{"file": out.Name(), "pipe:": "pipe:"}[tt.want]; !strings.HasPrefix(got, want) {
			t.Errorf("with %q the child's stdout is %q, want %q", tt.args, got, want)
		}
		if _, ok := s.Client.HGetAll(ctx(t), s.key("state:a")).Val()["last_stdout"]; ok != tt.kept {
			t.Errorf("with %q last_stdout is kept: %v", tt.args, ok)
		}
	}
}
