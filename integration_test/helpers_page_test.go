package integration_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/doctest"
)

// pageFleet runs the fleet that docs/scheduling.md shows for option: the
// page's block that holds option has a w8y line ending in "./script {}"
// and a w8yctl line. The script, a shell script of body, is written to a
// directory of the test's own (in the workers' environment as DIR), and
// three hosts run the w8y line against b. pageFleet returns the
// directory, the hosts and the w8yctl line's arguments.
func pageFleet(t *testing.T, b *bundle, option, script, body string) (dir string, hosts []*proc, ctl []string) {
	t.Helper()
	block := doctest.Block(t, "docs/scheduling.md", "sh", option)
	var line []string
	for l := range strings.Lines(block) {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "w8y":
			line = f[1:]
		case len(f) > 0 && f[0] == "w8yctl":
			ctl = f[1:]
		}
	}
	if len(line) < 2 || len(ctl) == 0 || line[len(line)-2] != "./"+script {
		t.Fatalf("the page's block has no w8y line ending in ./%s {}, and w8yctl line:\n%s", script, block)
	}
	dir = t.TempDir()
	writeExecutable(t, filepath.Join(dir, script), []byte("#!/bin/sh\n"+body+"\n"))
	b.setenv("DIR=" + dir)
	line[len(line)-2] = filepath.Join(dir, script)
	for range 3 {
		hosts = append(hosts, startW8y(t, b.env, append([]string{"-u", b.URL, "--drain-timeout", "20s"}, line...)...))
	}
	return dir, hosts, ctl
}

// commandsPath is a PATH for the environment of a page's example: the
// built w8y and w8yctl are its commands w8y and w8yctl, before the
// system's.
func commandsPath(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	for name, path := range map[string]string{"w8y": binary, "w8yctl": ctlBinary} {
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + bin + ":" + os.Getenv("PATH")
}

// pageSession runs the session that page's sh block holding command shows,
// as it is written, with w8y and w8yctl (commandsPath) pointed at url by
// W8Y_REDIS_URL: it must exit 0, write nothing on stderr, and print what
// the page's output block holding output shows, but for the times,
// holders, durations, who, and what the varying patterns match.
func pageSession(t *testing.T, url, page, command, output string, varying ...string) {
	t.Helper()
	session := doctest.Block(t, page, "sh", command)
	r := startCommand(t, []string{commandsPath(t), "W8Y_REDIS_URL=" + url}, "bash", "-c", "set -e\n"+session).wait(t)
	r.mustExit(t, 0)
	if r.Stderr != "" {
		t.Errorf("the session wrote on stderr: %s", r)
	}
	vary := regexp.MustCompile(strings.Join(append([]string{`\d{4}-\d\d-\d\dT[\d:.]+Z|holder=[^ \n]+|by=[^ \n]+|duration_ms=\d+`}, varying...), "|"))
	same := func(text string) string {
		return vary.ReplaceAllStringFunc(text, func(m string) string { return m[:3] })
	}
	if got, want := same(r.Stdout), same(doctest.Block(t, page, "", output)); got != want {
		t.Errorf("the session printed:\n%s\nwant the page's:\n%s", r.Stdout, want)
	}
}
