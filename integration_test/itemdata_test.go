package integration_test

import (
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/doctest"
)

// TestItemIsDataNotCode: an item that a shell would read as code (as
// anyone who may RPUSH to the list can write) never runs as code. A
// command that pastes {} into a shell's -c script is refused before
// anything is read or taken, with the line that docs/reference.md shows,
// even under -q and through env or busybox; the page's safe forms give the
// shell the item as data; --unsafe-item-in-script is the explicit way back.
func TestItemIsDataNotCode(t *testing.T) {
	t.Parallel()
	b := setup(t, "inj")
	const item = `x; echo INJECTED-$(id -un) "q'uote"`
	b.items(item)
	section := doctest.Section(t, "docs/reference.md", "### What the list's writers can make a worker do")
	refusal := strings.TrimSpace(doctest.Block(t, "docs/reference.md", "", "w8y: {} is inside the script"))
	if !strings.Contains(section, refusal) {
		t.Fatal("the refusal's line is not in the section about the list's writers")
	}

	for _, cmd := range [][]string{
		{"sh", "-c", "echo {}"},
		{"env", "sh", "-c", "echo {}"},
		{"busybox", "sh", "-c", "echo {}"},
		{"bash", "-euo", "pipefail", "-c", "echo {}"},
	} {
		r := b.run(append([]string{"-q"}, cmd...)...)
		r.wantExit(t, 125)
		if cmd[0] == "sh" && strings.TrimSpace(r.Stderr) != refusal {
			t.Errorf("the refusal is\n%s\nwant, as docs/reference.md shows it,\n%s", r.Stderr, refusal)
		}
		oneLine(t, r.Stderr, `pass it as an argument, as in `)
		if strings.Contains(r.Stdout, "INJECTED") {
			t.Errorf("%q ran the item as code: %s", cmd, r)
		}
	}
	if n := b.Client.Exists(ctx(t), b.key("state:"+item), b.key("events")).Val(); n != 0 {
		t.Errorf("a refused command took the item: %d of its keys exist", n)
	}
	b.wantList(item)

	// The safe forms, as the page shows them, hand the shell the item
	// whole, as a word.
	block := doctest.Block(t, "docs/reference.md", "sh", `sh -c 'echo "processing $1"' sh {}`)
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		words := doctest.Words(line)
		if words[0] != "w8y" || words[1] != "-k" {
			t.Fatalf("not a w8y command line: %q", line)
		}
		r := b.run(append([]string{"-q", "--cooldown", "0"}, words[3:]...)...)
		r.wantExit(t, 0)
		r.wantStdout(t, "processing "+item+"\n")
	}

	r := b.run("-q", "--unsafe-item-in-script", "sh", "-c", "echo {}")
	r.wantExit(t, 0)
	if !strings.Contains(r.Stdout, "INJECTED-") {
		t.Errorf("--unsafe-item-in-script did not run the script as written: %s", r)
	}
}
