package items

import (
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/proc"
)

func TestProblem(t *testing.T) {
	tests := []struct {
		item string
		bad  bool
	}{
		{"a:0", false},
		{"with space, 'quotes' and $HOME", false},
		{"\xff\xfe not UTF-8", false},
		{strings.Repeat("x", 100), false},
		{strings.Repeat("x", 101), true},
		{"", true},
		{"a\x00b", true},
	}
	for _, tt := range tests {
		if got := Problem(tt.item, 100); (got != "") != tt.bad {
			t.Errorf("Problem(%q, 100) = %q, want bad=%v", Clip(tt.item), got, tt.bad)
		}
	}
}

// TestMaxLen: the limit for any child leaves room for the item twice (its
// variable and its lock key's) and is never more than one execve string.
func TestMaxLen(t *testing.T) {
	room := proc.ArgMax()
	got := MaxLen("work:lock:", room)
	if got <= 0 || got >= proc.MaxArgStrlen-len("W8Y_LOCK_KEY=work:lock:") {
		t.Errorf("MaxLen = %d, want above 0 and below one execve string's %d", got, proc.MaxArgStrlen)
	}
	if longer := MaxLen("a-much-longer-prefix:lock:", room); longer >= got {
		t.Errorf("a longer prefix leaves %d bytes, not fewer than %d", longer, got)
	}
}

func TestClip(t *testing.T) {
	if got := Clip("short"); got != "short" {
		t.Errorf("Clip(short) = %q", got)
	}
	long := strings.Repeat("y", 1<<20)
	if got, want := Clip(long), strings.Repeat("y", ClipLen)+"... (1048576 bytes)"; got != want {
		t.Errorf("Clip(1 MB) = %q, want %q", got, want)
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
