// Package doctest reads the project's documentation (README.md and the pages
// in docs/) for the tests that hold it to the code: a page's code blocks,
// which tests run as they are shown, a section's text, and the links between
// the pages. A test names the page it reads, so that when an example moves,
// the test that runs it says where from.
package doctest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Root returns the module's root: the nearest directory above the test's
// working directory that holds go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Page returns the text of page, a path from the module's root such as
// "README.md" or "docs/recipes.md".
func Page(t testing.TB, page string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Root(t), page))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// CodeBlock is a fenced code block of a page: its language ("" for none)
// and its text, each line ending in a newline.
type CodeBlock struct {
	Lang, Text string
}

// Blocks returns the fenced code blocks of a page's text, in order.
func Blocks(text string) []CodeBlock {
	var blocks []CodeBlock
	var lines []string
	in, lang := false, ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, lang, lines = true, strings.TrimPrefix(line, "```"), nil
		case in && line == "```":
			in = false
			blocks = append(blocks, CodeBlock{lang, strings.Join(lines, "\n") + "\n"})
		case in:
			lines = append(lines, line)
		}
	}
	return blocks
}

// Block returns the first code block of page in language lang ("" for
// none) that holds marker, and fails the test if there is none.
func Block(t testing.TB, page, lang, marker string) string {
	t.Helper()
	for _, b := range Blocks(Page(t, page)) {
		if b.Lang == lang && strings.Contains(b.Text, marker) {
			return b.Text
		}
	}
	t.Fatalf("%s has no %q block with %q", page, lang, marker)
	return ""
}

// Section returns the text of page under heading (as written, such as
// "## Exit codes") up to the next heading outside a code block, and fails
// the test if the page has no such heading.
func Section(t testing.TB, page, heading string) string {
	t.Helper()
	var section []string
	in, code := false, false
	for _, line := range strings.Split(Page(t, page), "\n") {
		if strings.HasPrefix(line, "```") {
			code = !code
		}
		if !code && strings.HasPrefix(line, "#") {
			if in {
				break
			}
			in = line == heading
			continue
		}
		if in {
			section = append(section, line)
		}
	}
	if !in {
		t.Fatalf("%s has no section %q", page, heading)
	}
	return strings.Join(section, "\n")
}

var (
	fences  = regexp.MustCompile("(?s)```.*?```")
	spans   = regexp.MustCompile("`[^`\n]*`")
	heading = regexp.MustCompile(`(?m)^#+ (.+)$`)
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	unkept  = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// Anchors returns the anchors of a page's headings as GitHub names them:
// lower case, without punctuation, spaces as dashes, and "-1", "-2"... for
// a heading's second and later namesakes.
func Anchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fences.ReplaceAllString(text, ""), -1) {
		a := strings.ReplaceAll(unkept.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// Links checks every relative link of README.md and of the pages in docs/
// under root: that the file or folder it names exists, and that its
// #anchor is a heading of the page it leads to. It also checks that the
// README links to every page in docs/. It returns a line for each problem.
func Links(root string) ([]string, error) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	readme := filepath.Join(root, "README.md")
	var problems []string
	linked := map[string]bool{}
	for _, page := range append([]string{readme}, pages...) {
		data, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		name, _ := filepath.Rel(root, page)
		text := spans.ReplaceAllString(fences.ReplaceAllString(string(data), ""), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if page == readme {
				linked[path] = true
			}
			if _, err := os.Stat(path); err != nil {
				problems = append(problems, fmt.Sprintf("%s: the link %s leads to no file", name, target))
				continue
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				problems = append(problems, fmt.Sprintf("%s: the link %s has an anchor in a file that is not a page", name, target))
				continue
			}
			to, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			if !Anchors(string(to))[anchor] {
				problems = append(problems, fmt.Sprintf("%s: the link %s leads to no heading", name, target))
			}
		}
	}
	for _, page := range pages {
		if !linked[page] {
			name, _ := filepath.Rel(root, page)
			problems = append(problems, fmt.Sprintf("README.md links to no %s", name))
		}
	}
	slices.Sort(problems)
	return problems, nil
}

// Words splits a shell command line as sh would split it into arguments,
// for the tests that read the command lines a page shows: words apart by
// blanks, '...' taken as it is, "..." and unquoted text with their
// backslash escapes, a backslash before a newline joining two lines, and a
// # at the start of a word making the rest a comment. It knows no
// expansion, redirection or operator: those stay words.
func Words(line string) []string {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line):
			i++
			if line[i] != '\n' {
				word.WriteByte(line[i])
				inWord = true
			}
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				end = len(line) - i - 1
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("$`\"\\\n", line[i+1]) >= 0 {
					i++
				}
				word.WriteByte(line[i])
			}
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			for i < len(line) && line[i] != '\n' {
				i++
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}
