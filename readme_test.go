package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/doctest"
)

// TestREADMEExamples: every example that the README shows is one that a
// test runs. The tour's two blocks are run from the README itself
// (integration_test's TestREADMETour), and its YAML is lines of a manifest
// (TestREADMEManifestExcerpts); every other example but the quick start's
// and the build's make commands is the same, byte for byte, as a block of
// the same language on a page in docs/, where a test runs it: the crontab,
// the systemd environment file, the worker's image, the w8yctl session and
// the dashboard's serve. So an example cannot drift from the page whose
// test keeps it true.
func TestREADMEExamples(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(doctest.Root(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var shown []doctest.CodeBlock
	for _, page := range pages {
		name, _ := filepath.Rel(doctest.Root(t), page)
		shown = append(shown, doctest.Blocks(doctest.Page(t, name))...)
	}
	ranFromREADME := []string{
		"w8y --status -k work",         // the tour, run by TestREADMETour
		"ITEM          STATE  HOLDER",  // the tour's --status, compared by TestREADMETour
		"make demo   # builds a w8y",   // the quick start: make's targets, run by the packaging tests
		"make build                # ", // the build: make's targets, run by the packaging tests
	}
	fromPages := 0
	for _, b := range doctest.Blocks(doctest.Page(t, "README.md")) {
		if b.Lang == "yaml" || slices.ContainsFunc(ranFromREADME, func(m string) bool { return strings.Contains(b.Text, m) }) {
			continue
		}
		fromPages++
		if !slices.Contains(shown, b) {
			t.Errorf("the README's %q example is on no page in docs/, where a test would run it:\n%s", b.Lang, b.Text)
		}
	}
	if fromPages < 5 {
		t.Errorf("the README shows %d examples from the pages, want one for each way to run w8y", fromPages)
	}
}
