package main

import (
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/status"
)

// TestTerminalSafe: what a terminal would act on is shown escaped, and
// what it shows as it is stays so.
func TestTerminalSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode":    "plain text, ünïcode",
		"\x1b[31mred\x1b[0m":     `\x1b[31mred\x1b[0m`,
		"tab\there\r":            `tab\there\r`,
		"bad \xff byte":          `bad \xff byte`,
		"a real \uFFFD stays":    "a real \uFFFD stays",
		`back\slash`:             `back\\slash`,
		"line\u2028sep \u0007 x": `line\u2028sep \a x`,
	} {
		if got := terminalSafe(in); got != want {
			t.Errorf("terminalSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDetailShowsTheNextSlot: w8yctl status ITEM says, beside what is left
// of a cooldown under --schedule, the slot it lasts until, in UTC, as
// w8yctl shows every time.
func TestDetailShowsTheNextSlot(t *testing.T) {
	cooldown, slot := int64(74_580_996), time.Date(2026, 11, 27, 2, 13, 27, 996e6, time.UTC).UnixMilli()
	for _, tt := range []struct {
		item status.Item
		want string
	}{
		{status.Item{Item: "nightly", State: status.StateCooldown, Cooldown: &cooldown, NextSlot: &slot},
			"\n  cooldown: 20h43m0.996s left, until its next slot 2026-11-27T02:13:27.996Z\n"},
		{status.Item{Item: "cool", State: status.StateCooldown, Cooldown: &cooldown}, "\n  cooldown: 20h43m0.996s left\n"},
	} {
		var b strings.Builder
		writeDetail(&b, control.Detail{Item: tt.item, Occurrences: 1}, "work:list")
		if !strings.Contains(b.String(), tt.want) {
			t.Errorf("%s's detail lacks %q:\n%s", tt.item.Item, tt.want, b.String())
		}
	}
}
