// Package integration_test runs the built w8y binary against real
// redis-server processes that the tests start on free loopback ports.
package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/registry"
	"github.com/w8y/w8y/internal/schema"
)

// binary is the w8y built once for all tests, with the race detector, so
// that data races in w8y itself fail the tests too; ctlBinary is w8yctl,
// built the same way.
var binary, ctlBinary string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	kind, err := redistest.Chosen()
	if err == nil {
		err = kind.Installed()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration tests:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "w8y-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := useCLI(kind, dir); err != nil {
		fmt.Fprintln(os.Stderr, "integration tests:", err)
		return 1
	}
	binary = filepath.Join(dir, "w8y")
	// The tag w8y_testclock lets a test give a worker a wrong clock
	// (W8Y_TEST_CLOCK_OFFSET, see internal/clock); release builds lack it.
	build := exec.Command("go", "build", "-race", "-tags", "w8y_testclock", "-o", binary, ".")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build w8y:", err)
		return 1
	}
	ctlBinary = filepath.Join(dir, "w8yctl")
	build = exec.Command("go", "build", "-race", "-o", ctlBinary, "./cmd/w8yctl")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build w8yctl:", err)
		return 1
	}
	return m.Run()
}

// useCLI puts first on the tests' PATH a redis-cli that is the chosen
// server's client (see redistest.ServerEnv), once, before any test runs: the
// tests' shell children and the docs' examples say redis-cli, as users of
// either server do. On Redis it changes nothing.
func useCLI(kind redistest.Kind, tmp string) error {
	dir := filepath.Join(tmp, "cli")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	shim, err := kind.CLIShim(dir)
	if err != nil || shim == "" {
		return err
	}
	return os.Setenv("PATH", shim+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// server is a redis-server that one test owns, with the helpers that know
// w8y's keys (its locks, the lists its test children push to) on top of
// redistest's, which knows only Redis.
type server struct {
	*redistest.Server
}

// startRedis starts a throwaway redis-server on a free loopback port (see
// redistest.Start), which stops when the test ends.
func startRedis(t *testing.T, opts ...redistest.Option) *server {
	t.Helper()
	return &server{redistest.Start(t, opts...)}
}

// bundle is what most tests start from, as river's tests start from their
// testBundle: a redis-server of the test's own and the key prefix its
// workers share, with the built binaries run against them. A test that
// needs a second prefix, or a subtest, still has the server underneath.
type bundle struct {
	*server
	t      *testing.T
	prefix string
	// env is the environment, beyond a minimal one, that w8y and its
	// children get: REDIS_PORT for children that report to Redis, and what
	// a test adds.
	env []string
}

// setup starts a redis-server for t (see startRedis) and returns the
// bundle for prefix.
func setup(t *testing.T, prefix string, opts ...redistest.Option) *bundle {
	t.Helper()
	s := startRedis(t, opts...)
	return &bundle{server: s, t: t, prefix: prefix, env: portEnv(s)}
}

// withList is where most tests start: t runs in parallel with the others,
// on a redis-server of its own (see setup), and the prefix's list holds
// items.
func withList(t *testing.T, prefix string, items ...string) *bundle {
	t.Helper()
	t.Parallel()
	b := setup(t, prefix)
	b.items(items...)
	return b
}

// key is the name of one of the prefix's keys, such as key("lock:a").
func (b *bundle) key(name string) string { return b.prefix + ":" + name }

// at is args after the options that point a command at the bundle's server
// and prefix.
func (b *bundle) at(args ...string) []string {
	return append([]string{"-u", b.URL, "-k", b.prefix}, args...)
}

// items replaces the prefix's list with items.
func (b *bundle) items(items ...string) {
	b.t.Helper()
	b.seed(b.t, b.key("list"), items...)
}

// list returns the prefix's list, in its order (the server's list reads
// any list).
func (b *bundle) list() []string {
	b.t.Helper()
	return b.server.list(b.t, b.key("list"))
}

// wantList fails the test unless the prefix's list is want, in its order:
// a rotation must keep the items' circular order, so the tests compare
// lists as they are, never sorted.
func (b *bundle) wantList(want ...string) {
	b.t.Helper()
	if got := b.list(); !slices.Equal(got, want) {
		b.t.Errorf("list %q, want %q", got, want)
	}
}

// wantItems fails the test unless the prefix's list holds want, each item
// once, in any order. It is for lists whose workers take items from the due
// index, which moves each item it takes to the tail: the order then says
// which item ran last, not whether an item was lost or repeated.
func (b *bundle) wantItems(want ...string) {
	b.t.Helper()
	got := b.list()
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		b.t.Errorf("list %q, want the items %q, each once", got, want)
	}
}

// setenv adds vars, each NAME=value, to the environment of the w8y that
// the bundle starts and their children.
func (b *bundle) setenv(vars ...string) {
	b.env = append(b.env, vars...)
}

// start starts w8y on the bundle's list with args, in the bundle's env.
func (b *bundle) start(args ...string) *proc {
	b.t.Helper()
	return startW8y(b.t, b.env, b.at(args...)...)
}

// run runs w8y on the bundle's list to completion, as start starts it.
func (b *bundle) run(args ...string) result {
	b.t.Helper()
	return b.start(args...).wait(b.t)
}

// ctl runs w8yctl on the bundle's list to completion.
func (b *bundle) ctl(args ...string) result {
	b.t.Helper()
	return runCtl(b.t, nil, b.at(args...)...)
}

// noLocks fails the test if any lock under the prefix is left.
func (b *bundle) noLocks() {
	b.t.Helper()
	b.server.noLocks(b.t, b.prefix)
}

// noTrace fails the test if anything of item is left under the prefix: a
// key named for it, or its entry in the due index, a sorted set's member
// that no KEYS pattern finds.
func (b *bundle) noTrace(item string) {
	b.t.Helper()
	if left := b.keys(b.t, b.key("*:"+item)); len(left) > 0 {
		b.t.Errorf("keys of %q left: %q", item, left)
	}
	if err := b.Client.ZScore(ctx(b.t), b.key("due"), item).Err(); !errors.Is(err, redis.Nil) {
		b.t.Errorf("%q is left in %s (ZSCORE: %v)", item, b.key("due"), err)
	}
}

// ctx returns a context bounded by poll.Timeout.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	t.Cleanup(cancel)
	return c
}

// seed replaces key with a list of items.
func (s *server) seed(t *testing.T, key string, items ...string) {
	t.Helper()
	redistest.Seed(t, s.Client, key, items...)
}

// list returns the whole list at key.
func (s *server) list(t *testing.T, key string) []string {
	t.Helper()
	items, err := s.Client.LRange(ctx(t), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// keys returns the keys matching pattern, sorted.
func (s *server) keys(t *testing.T, pattern string) []string {
	t.Helper()
	keys, err := s.Client.Keys(ctx(t), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// noLocks fails the test if any lock under prefix is left.
func (s *server) noLocks(t *testing.T, prefix string) {
	t.Helper()
	if locks := s.keys(t, prefix+":lock:*"); len(locks) != 0 {
		t.Errorf("locks left behind: %q", locks)
	}
}

// pop waits until a test child has pushed to list, as the children report
// what they do, and returns what it pushed first.
func (s *server) pop(t *testing.T, list string) string {
	t.Helper()
	got, err := s.Client.BLPop(ctx(t), poll.Timeout, list).Result()
	if err != nil {
		t.Fatalf("no child pushed to %q: %v", list, err)
	}
	return got[1]
}

// popEach waits until n pushes to list have come, as n test children
// report, and returns what they pushed, sorted: children that run at once
// report in any order.
func (s *server) popEach(t *testing.T, list string, n int) []string {
	t.Helper()
	got := make([]string, n)
	for i := range got {
		got[i] = s.pop(t, list)
	}
	slices.Sort(got)
	return got
}

// popStarted waits until a child has reported its start by pushing to the
// list "started" and returns what it pushed.
func (s *server) popStarted(t *testing.T) string {
	t.Helper()
	return s.pop(t, "started")
}

// oneLine checks that stderr is exactly one line starting "w8y: " and
// containing want.
func oneLine(t *testing.T, stderr, want string) {
	t.Helper()
	oneLineOf(t, "w8y", stderr, want)
}

// oneLineOf is oneLine for the command called name, such as w8yctl.
func oneLineOf(t *testing.T, name, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], name+": ") || !strings.Contains(lines[0], want) {
		t.Errorf("stderr is not one line containing %q:\n%s", want, stderr)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// atoi is s as a whole number, failing the test if it is not one.
func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// overlapChild is a child that records each run of its item in $DIR/runs
// and, like the chaos test's, holds an exclusive flock(1) on a file named
// for its item while it runs: a run that overlaps another run of the same
// item cannot take it, and records the overlap in $DIR/overlaps instead.
// Items ending in "slow" run for $SLOW seconds, so that their locks must be
// refreshed; the others for 20ms.
const overlapChild = `case "$W8Y_ITEM" in *slow) d=$SLOW;; *) d=0.02;; esac; ` +
	`flock -n -E 99 "$DIR/lock.$W8Y_ITEM" sh -c 'echo "$W8Y_ITEM" >> "$DIR/runs"; sleep $0' "$d"; ` +
	`if [ $? = 99 ]; then echo "$W8Y_ITEM" >> "$DIR/overlaps"; fi`

// noOverlaps fails the test if children running overlapChild-style
// detection in dir recorded an item run twice at once.
func noOverlaps(t *testing.T, dir string) {
	t.Helper()
	if overlaps := lines(t, dir+"/overlaps"); len(overlaps) > 0 {
		t.Errorf("items run twice at once: %q", overlaps)
	}
}

// statusOutput runs w8y --status with args and returns what it wrote on
// stdout, failing the test unless it exits 0 with nothing on stderr.
func statusOutput(t *testing.T, env []string, args ...string) string {
	t.Helper()
	r := runW8y(t, env, slices.Concat(args, []string{"--status"})...)
	r.mustExit(t, 0)
	if r.Stderr != "" {
		t.Fatalf("--status wrote on stderr: %s", r)
	}
	return r.Stdout
}

// statusJSON runs w8y --status --json with args and returns its items,
// failing the test unless it exits 0 with nothing on stderr and one JSON
// document on stdout.
func statusJSON(t *testing.T, env []string, args ...string) []map[string]any {
	t.Helper()
	out := statusOutput(t, env, slices.Concat(args, []string{"--json"})...)
	var doc struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json is not one JSON document: %v\n%s", err, out)
	}
	return doc.Items
}

// writeExecutable writes an executable file the tests will run. It writes
// through a short-lived child process rather than os.WriteFile: a file this
// process holds open for writing is inherited by any child another test forks
// in that moment, and exec-ing the file then fails with "text file busy"
// (golang/go#22315). The child's descriptor dies with the child.
func writeExecutable(t *testing.T, path string, data []byte) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `cat > "$1" && chmod 755 "$1"`, "sh", path)
	cmd.Stdin = bytes.NewReader(data)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("write %s: %v\n%s", path, err, out)
	}
}

// lines reads a file of one record per line; a missing file has none.
func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

// report is a child that runs setup, reports its start and then runs rest.
func report(setup, rest string) []string {
	return []string{"sh", "-c", setup + "\n" + started + "\n" + rest}
}

// portEnv is the environment that tells a child the port of s.
func portEnv(s *server) []string { return []string{fmt.Sprintf("REDIS_PORT=%d", s.Port)} }

// announced waits until the worker p is in the registry of live workers
// under prefix: by then it has set up its signals, and a SIGTERM drains it.
func announced(t *testing.T, client registry.Client, prefix string, p *proc) {
	t.Helper()
	pid := p.cmd.Process.Pid
	poll.WaitFor(t, fmt.Sprintf("worker %d to announce itself", pid), func() bool {
		entries, err := registry.Read(ctx(t), client, schema.Keys{Prefix: prefix})
		return err == nil && slices.ContainsFunc(entries, func(e registry.Entry) bool { return e.PID == pid })
	})
}

// everyItemRan fails the test unless each of items ran: a line of its own
// in dir/runs, as overlapChild and chaosChild write them.
func everyItemRan(t *testing.T, dir string, items []string) {
	t.Helper()
	ran := map[string]bool{}
	for _, item := range lines(t, dir+"/runs") {
		ran[item] = true
	}
	for _, item := range items {
		if !ran[item] {
			t.Errorf("%s never ran (runs: %v)", item, ran)
		}
	}
}
