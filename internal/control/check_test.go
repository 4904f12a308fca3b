package control

import "testing"

func TestGlobEscape(t *testing.T) {
	for in, want := range map[string]string{"work:": "work:", "{w}:": "{w}:", "a*b?[c]\\:": `a\*b\?\[c\]\\:`, "": ""} {
		if got := globEscape(in); got != want {
			t.Errorf("globEscape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"work:lock:a": `'work:lock:a'`, "": `''`, "it's $x": `'it'\''s $x'`} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
