package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// The tests here run the recipes as the README and the pages in docs/ show
// them (doctest.Block reads a page's block): the same text, with only the
// Redis address and the installed paths put in the test's place.

// installed replaces the paths that the recipes install to with the test's:
// w8y (the binary under test) and the worker's script.
func installed(text, script string) string {
	return strings.NewReplacer("/usr/local/bin/w8y", binary, "/usr/local/bin/make-report.sh", script).Replace(text)
}

// reportScript writes the recipes' worker script, which records each run
// of its item in $HOME/runs (cron) or $DIR/runs, and fails silently, with
// code 3 or 2, for items named so.
func reportScript(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "make-report.sh")
	script := `#!/bin/sh
echo "$1" >> "${DIR:-$HOME}/runs"
case "$1" in
*fails-3) exit 3 ;;
*fails-2) exit 2 ;;
esac
`
	writeExecutable(t, path, []byte(script))
	return path
}

// TestRecipeCron runs the recipes' crontab as cron runs a job: /bin/sh -c
// with cron's environment (PATH=/usr/bin:/bin, HOME, SHELL, LOGNAME) and
// the crontab's variables, as a user who cannot write /var/log. A run that
// succeeds writes nothing on stdout or stderr, so cron mails nothing; one
// whose item fails silently leaves the one line that cron mails.
func TestRecipeCron(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "reports:list", "customer-1", "customer-2-fails-3")
	crontab := doctest.Block(t, "docs/recipes.md", "crontab", "w8y")
	home := t.TempDir()
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "SHELL=/bin/sh", "LOGNAME=nobody", "GORACE=atexit_sleep_ms=0"}
	var command string
	for _, line := range strings.Split(strings.TrimSpace(crontab), "\n") {
		if name, value, ok := strings.Cut(line, "="); ok && !strings.Contains(name, " ") {
			if name == "W8Y_REDIS_URL" {
				value = s.URL
			}
			env = append(env, name+"="+value)
			continue
		}
		// Five time fields, then the command.
		fields := strings.SplitN(line, " ", 6)
		if len(fields) != 6 {
			t.Fatalf("a crontab line that is neither a variable nor a job: %q", line)
		}
		command = installed(fields[5], reportScript(t))
	}
	if command == "" || strings.Contains(command, "%") {
		t.Fatalf("the crontab's command %q", command)
	}
	for i, want := range []string{"", `w8y: item "customer-2-fails-3" failed: the child ended with exit code 3` + "\n"} {
		cmd := exec.Command("/bin/sh", "-c", command)
		cmd.Env = env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		}
		if stdout.String() != "" || stderr.String() != want || code != []int{0, 3}[i] {
			t.Errorf("run %d: exit %d (%v), stdout %q, stderr %q; want stderr %q", i+1, code, err, stdout.String(), stderr.String(), want)
		}
	}
	log, err := os.ReadFile(filepath.Join(home, "w8y-reports.log"))
	if err != nil || strings.Count(string(log), "item finished") != 2 {
		t.Errorf("the log file in $HOME: %v\n%s", err, log)
	}
}

// TestSystemdUnitKeepsGoing runs w8y as scripts/w8y@.service does, with the
// recipes' environment file: one item that always fails does not stop the
// worker, which backs it off and goes on with the others.
func TestSystemdUnitKeepsGoing(t *testing.T) {
	t.Parallel()
	env, execStart := systemdUnit(t)
	// The example's password, given to the test's server.
	s := startRedis(t, redistest.Password("secret"))
	s.seed(t, "reports:list", "a", "b-fails-2", "c")
	dir := t.TempDir()
	env["W8Y_REDIS_URL"] = fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port)
	env["W8Y_METRICS_ADDR"] = fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	// The backoff shortened, so that the failing item is retried in the
	// test's time.
	if env["W8Y_FAILURE_BACKOFF"] == "" {
		t.Fatal("the unit gives no W8Y_FAILURE_BACKOFF")
	}
	env["W8Y_FAILURE_BACKOFF"] = "50ms,100ms"
	// And the cooldown, so that the others run again
	// (TestSystemdUnitRunsEachItemOncePerCooldown runs it as written).
	env["W8Y_COOLDOWN"] = "0"
	var environ []string
	argv := unitArgv(execStart, env, reportScript(t))
	for name, value := range env {
		environ = append(environ, name+"="+value)
	}
	p := startCommand(t, append(environ, "DIR="+dir), argv[0], argv[1:]...)
	// The child records its run as it starts, and the failure is counted
	// only as the run ends: wait for the count too.
	poll.WaitFor(t, "the failing item to fail three times, and the others to run again", func() bool {
		runs := map[string]int{}
		for _, item := range lines(t, dir+"/runs") {
			runs[item]++
		}
		failures, _ := strconv.Atoi(s.stateOf(t, "reports", "b-fails-2")["consecutive_failures"])
		return runs["b-fails-2"] >= 3 && runs["a"] >= 2 && runs["c"] >= 2 && failures >= 3
	})
	p.stop(t)
}

// TestREADMETour runs the README's two-minute tour as it is written, with
// redis-cli and w8y pointed at the test's Redis, and checks that it shows
// what the README says it does.
func TestREADMETour(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	tour := doctest.Block(t, "README.md", "sh", "w8y --status -k work")
	path := commandsPath(t)
	script := fmt.Sprintf("set -e\nredis-cli() { command redis-cli -p %d \"$@\"; }\n%s", s.Port, tour)
	r := startCommand(t, []string{path, "W8Y_REDIS_URL=" + s.URL}, "bash", "-c", script).wait(t)
	r.mustExit(t, 0)
	if r.Stderr != "" {
		t.Errorf("the tour wrote on stderr: %s", r)
	}
	if !strings.Contains(r.Stdout, "processing report:alpha\nprocessing report:beta\nreport:gamma\nreport:alpha\nreport:beta\n") {
		t.Errorf("the tour's runs and list: %s", r)
	}
	// --status as the README shows it, whole (the summary, then the
	// table), cell by cell but for the ages and how long the runs took (a
	// loaded machine's echo can take 100ms), which set the width of their
	// columns.
	shown := doctest.Block(t, "README.md", "", "ITEM          STATE")
	cells := func(text string) string {
		text = regexp.MustCompile(`\d+s ago`).ReplaceAllString(text, "AGE")
		text = regexp.MustCompile(`(AGE +)\d+(\.\d+)?m?s\b`).ReplaceAllString(text, "${1}TOOK")
		return regexp.MustCompile(` {2,}`).ReplaceAllString(text, "|")
	}
	_, status, _ := strings.Cut(r.Stdout, "report:gamma\nreport:alpha\nreport:beta\n")
	if got, want := cells(status), cells(shown); got != want {
		t.Errorf("the tour's --status:\n%s\nwant the README's:\n%s", status, shown)
	}
}

// TestSchedulingOperatorCommands runs the scheduling page's redis-cli commands for an
// operator, as a shell runs them, against a fleet of idle workers: "run it
// now" makes an idle worker take an item in an hour's cooldown within about
// a second, through the due index and not a sweep (--idle-wait 1h keeps
// the sweep away); "pause it" keeps it from running even when it is made
// due again; the last line reads the count of failures.
func TestSchedulingOperatorCommands(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	block := strings.ReplaceAll(doctest.Block(t, "docs/scheduling.md", "sh", "ZADD work:due 0 report-42"), "redis-cli ", fmt.Sprintf("redis-cli -p %d ", s.Port))
	var runNow, pause []string
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.Contains(line, " DEL ") || strings.Contains(line, " ZADD ") || strings.Contains(line, " RPUSH "):
			runNow = append(runNow, line)
		default:
			pause = append(pause, line)
		}
	}
	items := []string{"report-41", "report-42", "report-43"}
	s.seed(t, "work:list", items...)
	s.coolAll(t, "work", items, time.Hour)
	runs := filepath.Join(t.TempDir(), "runs")
	var workers []*proc
	for range 2 {
		workers = append(workers, startW8y(t, nil, "-u", s.URL, "-k", "work", "-c", "-q", "--cooldown", "1h", "--idle-wait", "1h",
			"sh", "-c", `echo "$W8Y_ITEM" >> "$0"`, runs))
	}
	poll.WaitFor(t, "the workers to go idle", func() bool { return s.Client.Exists(ctx(t), "work:sweep").Val() == 1 })

	sh := func(lines []string) string {
		t.Helper()
		out, err := exec.Command("sh", "-ec", strings.Join(lines, "\n")).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(lines, "\n"), err, out)
		}
		return string(out)
	}
	start := time.Now()
	sh(runNow)
	poll.WaitFor(t, "report-42 to run", func() bool { return slices.Equal(lines(t, runs), []string{"report-42"}) })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("report-42 ran %s after the scheduling page's \"run it now\", want about a second at most", took.Round(time.Millisecond))
	}

	// Paused for an hour (the last of the two SETs) and made due again, it
	// is not taken: a look moves its due entry to the pause's end.
	if out := sh(pause); out != "OK\nOK\n0\n" {
		t.Errorf("the pause commands and HGET printed %q, want OK, OK and 0 failures", out)
	}
	if err := s.Client.ZAdd(ctx(t), "work:due", redis.Z{Score: 0, Member: "report-42"}).Err(); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, "a look to move the paused item's due entry to the pause's end", func() bool {
		due, err := s.Client.ZScore(ctx(t), "work:due", "report-42").Result()
		return err == nil && due > float64(time.Now().Add(59*time.Minute).UnixMilli())
	})
	for _, p := range workers {
		p.stop(t)
	}
	if got := lines(t, runs); !slices.Equal(got, []string{"report-42"}) {
		t.Errorf("runs %q, want report-42 once: the pause did not hold", got)
	}
	if got := s.list(t, "work:list"); len(got) != len(items) {
		t.Errorf("list %q, want the three items", got)
	}
}
