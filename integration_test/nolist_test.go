package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// noListLine is what every command says of the list "typo:list", which does
// not exist.
const noListLine = `the list "typo:list" does not exist or is empty: is --key-prefix (W8Y_KEY_PREFIX) right?`

// TestAMissingListIsAMistake: a mistyped prefix never ends 0. A one-shot
// run, a --continuous --until-idle one and --status on a list that does not
// exist exit 120, with one line on stderr even under -q, and run nothing and
// change nothing; --until-idle that took nothing from a list that exists
// ends with --no-work-exit-code, and one that took an item ends 0.
func TestAMissingListIsAMistake(t *testing.T) {
	t.Parallel()
	s := setup(t, "typo")
	marker := filepath.Join(t.TempDir(), "ran")
	// The sweep key, which a pass over the whole list sets with an expiry
	// to keep other idle workers from passing too, is all a take leaves.
	snapshot := func() []string {
		return slices.DeleteFunc(s.snapshot(t), func(kv string) bool { return strings.HasPrefix(kv, "typo:sweep=") })
	}
	before := snapshot()
	for _, args := range [][]string{
		{"-q", "touch", marker},
		{"-q", "--no-work-exit-code", "3", "touch", marker},
		{"-q", "-c", "--until-idle", "--no-work-exit-code", "3", "touch", marker},
		{"-q", "-c", "--until-idle", "--parallel", "2", "touch", marker},
		{"--status"},
		{"--status", "--json"},
	} {
		r := s.run(args...)
		r.wantExit(t, 120)
		if strings.TrimSpace(r.Stderr) != "w8y: "+noListLine || r.Stdout != "" {
			t.Errorf("want the one line %q and nothing on stdout: %s", noListLine, r)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a child ran on a list that does not exist")
	}
	if after := snapshot(); !slices.Equal(after, before) {
		t.Errorf("runs on a missing list changed Redis: %q", after)
	}

	// A list that exists, whose items all cool down: no work, not a mistake.
	s.items("a", "b")
	s.run("-q", "-c", "--until-idle", "--cooldown", "1h", "--no-work-exit-code", "3", "true").wantExit(t, 0)
	r := s.run("-q", "-c", "--until-idle", "--cooldown", "1h", "--no-work-exit-code", "3", "true")
	r.wantExit(t, 3)
	if r.Stderr != "" {
		t.Errorf("no work is no failure to explain: %s", r)
	}
	s.run("-q", "--cooldown", "1h", "--no-work-exit-code", "3", "true").wantExit(t, 3)
}

// TestCtlOneRuleForEveryVerb: every verb of w8yctl that reads or changes the
// list refuses one that does not exist with w8y's exit code and its one
// line, changing nothing; workers and serve, which show the fleet, warn of
// it on stderr and go on.
func TestCtlOneRuleForEveryVerb(t *testing.T) {
	t.Parallel()
	s := setup(t, "typo")
	before := s.snapshot(t)
	for _, args := range [][]string{
		{"add", "a"}, {"remove", "a"}, {"pause", "a"}, {"resume", "a"}, {"run-now", "a"}, {"cancel", "a"},
		{"status"}, {"status", "--json"}, {"status", "a"}, {"check"}, {"check", "--fix"}, {"events"}, {"events", "--item", "a"},
	} {
		r := s.ctl(args...)
		r.wantExit(t, 120)
		// add says how to start a list too, and events that neither the
		// list nor the events stream exists.
		if args[0] != "add" && args[0] != "events" && strings.TrimSpace(r.Stderr) != "w8yctl: "+noListLine {
			t.Errorf("w8yctl %q: want the one line %q: %s", args, noListLine, r)
		}
		oneLineOf(t, "w8yctl", r.Stderr, "typo:list")
		if r.Stdout != "" {
			t.Errorf("w8yctl %q printed on stdout: %s", args, r)
		}
	}
	if after := s.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("refused verbs changed Redis: %q", after)
	}

	r := s.ctl("workers")
	r.wantExit(t, 0)
	if !strings.Contains(r.Stderr, "WRN "+noListLine) || !strings.Contains(r.Stdout, `no live worker under "typo:"`) {
		t.Errorf("workers on a missing list: %s", r)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	serve := startCtl(t, nil, s.at("serve", "--addr", addr)...)
	poll.WaitFor(t, "serve to warn of the missing list", func() bool {
		return strings.Contains(serve.stderrSoFar(), "WRN "+noListLine)
	})
	poll.WaitFor(t, "serve to serve all the same", func() bool { return strings.Contains(serve.stdoutSoFar(), "serving the dashboard") })
	serve.signal(t, syscall.SIGTERM)
	serve.wait(t).wantExit(t, 0)
}

// TestCtlRunNowSaysWhatHappens: run-now says, as the registry of live
// workers tells it, whether a worker will take the item now or only the
// next one to start.
func TestCtlRunNowSaysWhatHappens(t *testing.T) {
	s := withList(t, "rns", "a", "b")
	r := s.ctl("run-now", "a")
	r.wantExit(t, 0)
	r.wantStdout(t, `"a" is due now, but no worker is live under "rns:": the next worker to start takes it (the next run of a cron job, say)`+"\n")
	w := s.start("-c", "-q", "--cooldown", "1h", "true")
	poll.WaitFor(t, "the worker's entry", func() bool { return s.Client.ZCard(ctx(t), s.key("workers")).Val() == 1 })
	poll.WaitFor(t, "both items to cool down", func() bool {
		return s.Client.Exists(ctx(t), s.key("cooldown:a"), s.key("cooldown:b")).Val() == 2
	})
	r = s.ctl("run-now", "b")
	r.wantExit(t, 0)
	r.wantStdout(t, `"b" is due now: an idle worker takes it within a second (1 worker live)`+"\n")
	poll.WaitFor(t, "b to run again", func() bool {
		return s.Client.HGet(ctx(t), s.key("state:b"), "runs").Val() == "2"
	})
	w.stop(t)
}

// TestBlankPrefixIsNamed: a worker, or w8yctl, without a prefix, or with a
// blank one, says once at start which list it uses, at the top of the
// database; a prefix that names something says nothing.
func TestBlankPrefixIsNamed(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	for prefix, list := range map[string]string{"": "list", " ": " :list", ":": ":list", "work": "work:list"} {
		s.seed(t, list, "a")
		args := []string{"-u", s.URL, "-t"}
		if prefix != "" {
			args = append(args, "-k", prefix)
		}
		for _, r := range []result{runW8y(t, nil, append(args, "true")...), runCtl(t, nil, append(args[:2:2], append(args[3:], "status", "a")...)...)} {
			r.wantExit(t, 0)
			named := fmt.Sprintf("the list is %q and the locks %q", list, strings.TrimSuffix(list, "list")+"lock:<item>")
			switch n := strings.Count(r.Stderr, named); {
			case prefix == "work" && strings.Contains(r.Stderr, "WRN"):
				t.Errorf("a prefix is warned of: %s", r)
			case prefix != "work" && (n != 1 || !strings.Contains(r.Stderr, "WRN ")):
				t.Errorf("-k %q: want one warning that says %s: %s", prefix, named, r)
			}
		}
	}
}

// TestStatusCountsEntriesAndCutsLongItems: --status's summary counts the
// list's entries as LLEN does and says how many are duplicates; a 5 KB
// item is cut in its table row (the table is lines to read), and whole in
// --json.
func TestStatusCountsEntriesAndCutsLongItems(t *testing.T) {
	t.Parallel()
	s := setup(t, "dup")
	long := strings.Repeat("x", 5000)
	s.items("a", "b", "c", "d", "e", "f", "g", "h", "i", "a", long)
	r := s.run("--status")
	r.wantExit(t, 0)
	if head, _, _ := strings.Cut(r.Stdout, "\n"); head != "dup:list: 11 items, 1 of them a duplicate (w8yctl check)" {
		t.Errorf("the summary's first line is %q", head)
	}
	for _, line := range strings.Split(r.Stdout, "\n") {
		if len(line) > 200 {
			t.Errorf("a %d-byte line in --status: %.80q...", len(line), line)
		}
	}
	if !strings.Contains(r.Stdout, "\n"+strings.Repeat("x", 99)+"…  idle") {
		t.Errorf("the long item's row is not cut at 100 columns:\n%s", r.Stdout)
	}
	j := s.run("--status", "--json")
	j.wantExit(t, 0)
	if !strings.Contains(j.Stdout, `"item":"`+long+`"`) || !strings.Contains(j.Stdout, `"items":11,"duplicates":1,`) {
		t.Errorf("--json lacks the long item whole, or the counts: %.300s", j.Stdout)
	}
}
