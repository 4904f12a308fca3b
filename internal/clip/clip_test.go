package clip

import (
	"strings"
	"testing"
)

func TestItem(t *testing.T) {
	if got := Item("short"); got != "short" {
		t.Errorf("Item(short) = %q", got)
	}
	long := strings.Repeat("y", 1<<20)
	if got, want := Item(long), strings.Repeat("y", Len)+"... (1048576 bytes)"; got != want {
		t.Errorf("Item(1 MB) = %q, want %q", got, want)
	}
}

// TestOneLine: control characters come out as Go escapes them, so that a
// message that quotes them stays one line; other characters, printable or
// not ASCII, come out as they are.
func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"-c\n":           `-c\n`,
		"a\tb\rc\x00d":   `a\tb\rc\x00d`,
		"redis://h\x7f/": `redis://h\x7f/`,
		"élan ✓":         "élan ✓",
		"":               "",
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
