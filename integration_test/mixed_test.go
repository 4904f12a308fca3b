package integration_test

import (
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
)

// baseCommit is the release that a rollout runs beside this build in
// TestMixedVersions: the last commit before the scripts read Redis' clock
// and workers recorded the schema version.
const baseCommit = "c629c5d"

// buildBase builds w8y at baseCommit into a directory of the test's own,
// from the repository this test runs in, and returns the binary's path.
func buildBase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", "..", baseCommit, dir)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s (the base release of the mixed fleet): %v\n%s", baseCommit, err, out)
	}
	base := filepath.Join(dir, "w8y-base")
	build := exec.Command("go", "build", "-o", base, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build w8y at %s: %v\n%s", baseCommit, err, out)
	}
	return base
}

// TestMixedVersions: a rollout runs the previous release and this build on
// one list for minutes. A fleet of both, each worker killed or stopped and
// replaced by one of its own version now and then, runs no item twice at
// once, starves none, and w8yctl workers and w8y --status count the
// workers of both versions; items' own settings, which only this build
// knows, change none of that.
func TestMixedVersions(t *testing.T) {
	t.Parallel()
	base := buildBase(t)
	s := startRedis(t)
	dir := t.TempDir()
	var items []string
	for i := range 8 {
		items = append(items, "i"+itoa(i))
	}
	s.seed(t, "mix:list", items...)
	// Items with settings of their own, which this build applies and the
	// base release, which knows nothing of them, ignores without harm: a
	// cooldown, a timeout longer than any run, a schedule every second
	// (whose new item this build lets wait for its first slot, and the
	// base runs at once).
	for _, set := range [][]string{{"i0", "--cooldown", "200ms"}, {"i1", "--timeout", "30s"}, {"i2", "--schedule", "* * * * * *", "--failure-backoff", "100ms"}} {
		runCtl(t, nil, append([]string{"-u", s.URL, "-k", "mix", "set"}, set...)...).mustExit(t, 0)
	}
	ttl := time.Second
	env := []string{"CHAOS_DIR=" + dir}
	start := func(i int) *proc {
		args := []string{"-u", s.URL, "-k", "mix", "-c", "-x", ttl.String(), "--idle-wait", "50ms", "--log-level", "warn"}
		if i%2 == 1 {
			args = append(args, "--cooldown", "300ms")
		}
		args = append(args, "sh", "-c", chaosChild)
		if i < 2 {
			return startCommand(t, env, base, args...)
		}
		return startW8y(t, env, args...)
	}
	announced := func(w *proc) { t.Helper(); announced(t, s.Client, "mix:", w) }
	workers := make([]*proc, 4)
	for i := range workers {
		workers[i] = start(i)
	}

	// Both versions announce themselves in one registry, which both read.
	var pids []int
	for _, w := range workers {
		pids = append(pids, w.cmd.Process.Pid)
	}
	slices.Sort(pids)
	poll.WaitFor(t, "w8yctl workers to list the four workers of both versions", func() bool {
		r := runCtl(t, nil, "-u", s.URL, "-k", "mix", "workers", "--json")
		var entries []struct {
			PID int `json:"pid"`
		}
		if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &entries) != nil {
			return false
		}
		var got []int
		for _, e := range entries {
			got = append(got, e.PID)
		}
		slices.Sort(got)
		return slices.Equal(got, pids)
	})
	if out := statusOutput(t, nil, "-u", s.URL, "-k", "mix"); !strings.Contains(out, "live workers 4") {
		t.Errorf("w8y --status does not count the four workers of both versions:\n%s", out)
	}

	// Faults: a worker killed, or stopped, and replaced by one of its
	// version, twice a second for ten seconds.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond) // the pace of the faults, not a synchronisation
		i := rand.N(len(workers))
		if rand.N(2) == 0 {
			workers[i].signal(t, syscall.SIGKILL)
			workers[i].wait(t)
		} else {
			workers[i].stop(t)
		}
		workers[i] = start(i)
		announced(workers[i])
	}
	drain(t, workers)

	noOverlaps(t, dir)
	everyItemRan(t, dir, items)
	if got := slices.Sorted(slices.Values(s.list(t, "mix:list"))); !slices.Equal(got, items) {
		t.Errorf("the list holds %q, want %q", got, items)
	}
}
