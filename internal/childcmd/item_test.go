package childcmd

import (
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/proc"
)

func TestItemProblem(t *testing.T) {
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
		if got := ItemProblem(tt.item, 100); (got != "") != tt.bad {
			t.Errorf("ItemProblem(%q, 100) = %q, want bad=%v", tt.item, got, tt.bad)
		}
	}
}

// TestMaxItemLenAny: the limit for any child leaves room for the item twice (its
// variable and its lock key's) and is never more than one execve string.
func TestMaxItemLenAny(t *testing.T) {
	room := proc.ArgMax()
	got := MaxItemLenAny("work:lock:", room)
	if got <= 0 || got >= proc.MaxArgStrlen-len("W8Y_LOCK_KEY=work:lock:") {
		t.Errorf("MaxItemLenAny = %d, want above 0 and below one execve string's %d", got, proc.MaxArgStrlen)
	}
	if longer := MaxItemLenAny("a-much-longer-prefix:lock:", room); longer >= got {
		t.Errorf("a longer prefix leaves %d bytes, not fewer than %d", longer, got)
	}
}
