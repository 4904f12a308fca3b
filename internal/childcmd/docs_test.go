package childcmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/doctest"
)

// TestDocsPassTheItemAsData: no example that the project shows (the README's
// and the pages' code blocks and w8y command lines, the example manifests,
// the systemd unit and its environment file, the image's Containerfile)
// pastes {} into a shell's -c script, which w8y refuses (see ItemInScript):
// each passes the item as an argument or through W8Y_ITEM.
func TestDocsPassTheItemAsData(t *testing.T) {
	root := doctest.Root(t)
	texts := map[string][]string{}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, page := range append(pages, filepath.Join(root, "README.md")) {
		name, _ := filepath.Rel(root, page)
		text := doctest.Page(t, name)
		for _, b := range doctest.Blocks(text) {
			texts[name] = append(texts[name], b.Text)
		}
		for _, span := range inlineCode.FindAllString(text, -1) {
			if span = strings.Trim(span, "`"); strings.HasPrefix(span, "w8y ") {
				texts[name] = append(texts[name], span)
			}
		}
	}
	for _, glob := range []string{"examples/*/*", "scripts/*.env", "scripts/*.service", "Containerfile"} {
		files, _ := filepath.Glob(filepath.Join(root, glob))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			name, _ := filepath.Rel(root, file)
			texts[name] = append(texts[name], string(data))
		}
	}
	if len(texts) < 10 {
		t.Fatalf("read %d files, want the README, the pages and the shipped files", len(texts))
	}
	for name, list := range texts {
		for _, text := range list {
			for _, argv := range commandLines(text) {
				if found := ItemInScript(argv); found != nil {
					t.Errorf("%s: %s -c %q pastes the item into a shell script: pass it as an argument (sh -c '... \"$1\" ...' sh {}) or use \"$W8Y_ITEM\"", name, found.Shell, found.Script)
				}
			}
		}
	}
}

var (
	inlineCode = regexp.MustCompile("`[^`\n]+`")
	// quoted is a string between double quotes, as JSON, YAML's flow
	// sequences and a Containerfile's exec form write arguments.
	quoted = regexp.MustCompile(`"((?:[^"\\\n]|\\.)*)"`)
	// said is a line of w8y's own (see commandLines).
	said = regexp.MustCompile(`(?m)^w8y: .*$`)
)

// commandLines reads the argument lists that text may hold: each line's
// words as sh splits them (lines joined by a backslash before the newline),
// the double-quoted strings of the whole text (an exec form's or a YAML
// list's arguments, even over several lines), and the words of any one of
// these that is a command line of its own (COMMAND="report.sh {}",
// bash -c "w8y ... sh -c '...'").
func commandLines(text string) [][]string {
	var out [][]string
	for _, line := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
		// w8y's own lines, such as the one that refuses {} in a script,
		// are what it says, not what it runs.
		if !strings.HasPrefix(line, "w8y: ") {
			out = append(out, doctest.Words(line))
		}
	}
	var strs []string
	for _, m := range quoted.FindAllStringSubmatch(said.ReplaceAllString(text, ""), -1) {
		strs = append(strs, strings.ReplaceAll(m[1], `\"`, `"`))
	}
	out = append(out, strs)
	for _, argv := range out[:len(out):len(out)] {
		for _, arg := range argv {
			if _, value, ok := strings.Cut(arg, "="); ok && strings.Contains(value, " ") {
				arg = value
			}
			if strings.ContainsAny(arg, " \t") {
				out = append(out, doctest.Words(arg))
			}
		}
	}
	return out
}
