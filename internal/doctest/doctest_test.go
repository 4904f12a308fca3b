package doctest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLinks: the link check finds each kind of broken link, and a link
// missing from the README, and nothing in pages whose links all resolve.
func TestLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Door\n\n## The `w8y --status` table\n\n[a](docs/a.md), [b](docs/b.md#two), [s](#the-w8y---status-table), "+
		"[web](https://example.com/x.md#nope), `[code](nowhere.md)`, [dir](examples/)\n\n```\n[in a block](nowhere.md)\n```\n")
	write("docs/a.md", "# A\n\n[back](../README.md#door) [b](b.md#two-1) [png](pic.png)\n")
	write("docs/b.md", "# B\n\n## Two\n\n## Two\n")
	write("docs/pic.png", "")
	write("examples/x.yaml", "")
	problems, err := Links(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("good pages: %q", problems)
	}

	write("docs/a.md", "# A\n\n[gone](gone.md) [bad](b.md#three) [self](#nope) [png](pic.png#x)\n")
	write("docs/c.md", "# C\n")
	problems, err = Links(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md links to no docs/c.md",
		"docs/a.md: the link #nope leads to no heading",
		"docs/a.md: the link b.md#three leads to no heading",
		"docs/a.md: the link gone.md leads to no file",
		"docs/a.md: the link pic.png#x has an anchor in a file that is not a page",
	}
	if !slices.Equal(problems, want) {
		t.Errorf("broken pages: %q,\nwant %q", problems, want)
	}
}

// TestBlocksAndSection: a page's code blocks with their languages, and a
// section that ends at the next heading but not at a "#" in a code block.
func TestBlocksAndSection(t *testing.T) {
	text := "# P\n\n```sh\n# a comment\necho 1\n```\n\n```\nplain\n```\n"
	got := Blocks(text)
	want := []CodeBlock{{"sh", "# a comment\necho 1\n"}, {"", "plain\n"}}
	if !slices.Equal(got, want) {
		t.Errorf("Blocks: %q, want %q", got, want)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.md"), []byte("# P\n\n## S\n\nbody\n```sh\n# not a heading\n```\n## T\n\nnext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if got, want := Section(t, "p.md", "## S"), "\nbody\n```sh\n# not a heading\n```"; got != want {
		t.Errorf("Section: %q, want %q", got, want)
	}
	if got, want := Block(t, "p.md", "sh", "heading"), "# not a heading\n"; got != want {
		t.Errorf("Block: %q, want %q", got, want)
	}
}

func TestWords(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{`w8y -k work sh -c 'echo "$1"' sh {}`, []string{"w8y", "-k", "work", "sh", "-c", `echo "$1"`, "sh", "{}"}},
		{`a "b \"c\" $d" e\ f # a comment`, []string{"a", `b "c" $d`, "e f"}},
		{"one \\\ntwo", []string{"one", "two"}},
		{`x'y'"z"`, []string{"xyz"}},
		{`''`, []string{""}},
		{"a#b", []string{"a#b"}},
	}
	for _, tt := range tests {
		if got := Words(tt.line); !slices.Equal(got, tt.want) {
			t.Errorf("Words(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}
