package main

import (
	"strings"
	"testing"
)

func TestBadItem(t *testing.T) {
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
		if got := badItem(tt.item, 100); (got != "") != tt.bad {
			t.Errorf("badItem(%q, 100) = %q, want bad=%v", clip(tt.item), got, tt.bad)
		}
	}
}

func TestClip(t *testing.T) {
	if got := clip("short"); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
	long := strings.Repeat("y", 1<<20)
	if got, want := clip(long), strings.Repeat("y", clipLen)+"... (1048576 bytes)"; got != want {
		t.Errorf("clip(1 MB) = %q, want %q", got, want)
	}
}
