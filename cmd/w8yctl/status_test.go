package main

import "testing"

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
