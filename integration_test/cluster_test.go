package integration_test

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
)

// TestCluster runs w8y on a 3-master Redis Cluster, with a hash-tagged
// prefix (the list and its locks in one slot: the server-side scan) and
// without (locks spread over the nodes: a round trip per candidate), one
// item at a time and with concurrent continuous workers, which must never
// run an item twice at once.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, tt := range []struct {
		name, prefix string
		scan         bool // whether the server-side scan must be used
	}{
		{"hash tag", "{jobs}:", true},
		{"no hash tag", "jobs:", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			list := tt.prefix + "list"
			items := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
			if err := c.Client.RPush(ctx(t), list, redistest.Values(items)...).Err(); err != nil {
				t.Fatal(err)
			}
			c.resetStats(t)
			base := []string{"--redis-cluster", "-u", c.URL, "-k", tt.prefix}

			// One-shot: the head is taken and rotated to the tail; a lock
			// held elsewhere makes the next run pass its item by.
			r := runW8y(t, nil, append(base, "printf", "%s", "{}")...)
			r.mustExit(t, 0)
			r.wantStdout(t, "a")
			if err := c.Client.Set(ctx(t), tt.prefix+"lock:b", "someone-else", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			r = runW8y(t, nil, append(base, "printf", "%s", "{}")...)
			r.mustExit(t, 0)
			r.wantStdout(t, "c") // b is locked
			want := []string{"d", "e", "f", "g", "h", "a", "b", "c"}
			if got, _ := c.Client.LRange(ctx(t), list, 0, -1).Result(); !slices.Equal(got, want) {
				t.Fatalf("list after two runs: %q, want %q", got, want)
			}
			if err := c.Client.Del(ctx(t), tt.prefix+"lock:b").Err(); err != nil {
				t.Fatal(err)
			}
			lmoves := c.commandCalls(t, "lmove")
			if tt.scan && lmoves != 0 {
				t.Errorf("with a hash tag, the nodes ran %d LMOVEs: the server-side scan was not used", lmoves)
			}
			if !tt.scan && lmoves == 0 {
				t.Errorf("without a hash tag, no node ran LMOVE: the per-candidate path was not used")
			}

			// Continuous workers over the same list: items ending in slow
			// outlive several refreshes of their locks.
			if err := c.Client.RPush(ctx(t), list, "x-slow", "y-slow").Err(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			env := []string{"DIR=" + dir, "SLOW=0.6"}
			var workers []*proc
			for range 4 {
				workers = append(workers, startW8y(t, env, append(base, "-c", "-x", "1", "--idle-wait", "20ms", "--log-level", "warn", "sh", "-c", overlapChild)...))
			}
			// The locks must really live on several nodes without a hash tag
			// (or the test would prove nothing about keys in other slots),
			// and on the list's node with one.
			var keys []string
			for _, item := range append(slices.Clone(items), "x-slow", "y-slow") {
				keys = append(keys, tt.prefix+"lock:"+item)
			}
			if tt.scan {
				keys = append(keys, list)
			}
			c.spreadOrNot(t, tt.scan, keys...)
			redistest.WaitFor(t, "60 runs", func() bool { return len(lines(t, dir+"/runs")) >= 60 })
			drain(t, workers)
			noOverlaps(t, dir)
			runs := lines(t, dir+"/runs")
			for _, item := range []string{"a", "h", "x-slow", "y-slow"} {
				if !slices.Contains(runs, item) {
					t.Errorf("item %s never ran in %d runs", item, len(runs))
				}
			}
			got, _ := c.Client.LRange(ctx(t), list, 0, -1).Result()
			slices.Sort(got)
			if wantAll := append(slices.Clone(items), "x-slow", "y-slow"); !slices.Equal(got, wantAll) {
				t.Errorf("list after the workers: %q, want %q in some order", got, wantAll)
			}
			if locks, _ := c.clusterKeys(t, tt.prefix+"lock:*"); len(locks) != 0 {
				t.Errorf("locks left behind: %q", locks)
			}
		})
	}
}

// TestClusterSlotMigration moves the slot of a hash-tagged prefix, with its
// list and locks, to another node while continuous workers run its items:
// they ride it out and keep working on the new node, never running an item
// twice at once, and the list ends as it began.
func TestClusterSlotMigration(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	prefix := "{mig}:"
	items := []string{"a", "b", "c", "d", "e-slow", "f-slow"}
	if err := c.Client.RPush(ctx(t), prefix+"list", redistest.Values(items)...).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"DIR=" + dir, "SLOW=0.8"}
	var workers []*proc
	for range 3 {
		workers = append(workers, startW8y(t, env, "--redis-cluster", "-u", c.URL, "-k", prefix, "-c", "-x", "1",
			"--idle-wait", "20ms", "--log-level", "warn", "sh", "-c", overlapChild))
	}
	redistest.WaitFor(t, "20 runs", func() bool { return len(lines(t, dir+"/runs")) >= 20 })
	// The slow items must be running, their locks held, while the slot moves.
	redistest.WaitFor(t, "a slow item's lock", func() bool {
		n, err := c.Client.Exists(ctx(t), prefix+"lock:e-slow", prefix+"lock:f-slow").Result()
		return err == nil && n > 0
	})
	move := c.beginMove(t, prefix+"list")
	move.finish(t)
	from, to := move.from, move.to
	moved := len(lines(t, dir+"/runs"))
	if n := len(from.keys(t, "*")); n != 0 {
		t.Fatalf("the old node still holds %d keys", n)
	}
	redistest.WaitFor(t, "20 runs after the move", func() bool { return len(lines(t, dir+"/runs")) >= moved+20 })
	drain(t, workers)
	noOverlaps(t, dir)
	got := to.list(t, prefix+"list")
	slices.Sort(got)
	if !slices.Equal(got, items) {
		t.Errorf("list on the new node: %q, want %q in some order", got, items)
	}
	if locks := to.keys(t, prefix+"lock:*"); len(locks) != 0 {
		t.Errorf("locks left behind: %q", locks)
	}
}

// TestClusterSlotHalfMoved stops a slot migration half way, the list on the
// new node and a held lock still on the old one, where the new node would
// answer a lookup of the lock alone with "no such key". A run must not take
// the item whose holder still runs it.
func TestClusterSlotHalfMoved(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	prefix := "{half}:"
	list, lock := prefix+"list", prefix+"lock:only"
	if err := c.Client.RPush(ctx(t), list, "only").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Set(ctx(t), lock, "holder-on-the-old-node", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	move := c.beginMove(t, list)
	move.migrate(t, list)
	from, to := move.from, move.to
	r := runW8y(t, nil, "--redis-cluster", "-u", c.URL, "-k", prefix, "printf", "ran %s", "{}")
	if strings.Contains(r.Stdout, "ran") {
		t.Fatalf("the item ran while its lock was held on the old node: %s", r)
	}
	if v, err := from.Client.Get(ctx(t), lock).Result(); err != nil || v != "holder-on-the-old-node" {
		t.Errorf("the held lock changed: %q, %v", v, err)
	}
	if n := len(to.keys(t, prefix+"lock:*")); n != 0 {
		t.Errorf("a lock was taken on the new node")
	}
}

// TestClusterWithoutLMOVE: on servers without LMOVE (Redis before 6.2; here
// LMOVE is renamed away), the per-candidate path says so once and rotates
// with RPOPLPUSH, the other way round, without losing an item.
func TestClusterWithoutLMOVE(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, "--rename-command", "LMOVE", "")
	list := "old:list"
	if err := c.Client.RPush(ctx(t), list, "a", "b", "c").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Set(ctx(t), "old:lock:c", "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	r := runW8y(t, nil, "--redis-cluster", "-u", c.URL, "-k", "old", "printf", "%s", "{}")
	r.mustExit(t, 0)
	r.wantStdout(t, "b") // the tail, c, is locked
	if got, _ := c.Client.LRange(ctx(t), list, 0, -1).Result(); !slices.Equal(got, []string{"b", "c", "a"}) {
		t.Errorf("list %q, want [b c a]: RPOPLPUSH moves the tail to the head", got)
	}
	if n := strings.Count(r.Stderr, "has no LMOVE"); n != 1 {
		t.Errorf("the missing LMOVE was reported %d times, want once:\n%s", n, r.Stderr)
	}
	// Continuous: detected once for the whole run.
	if err := c.Client.Del(ctx(t), "old:lock:c").Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := startW8y(t, []string{"DIR=" + dir, "SLOW=0"}, "--redis-cluster", "-u", c.URL, "-k", "old", "-c", "--idle-wait", "20ms", "sh", "-c", overlapChild)
	redistest.WaitFor(t, "10 runs", func() bool { return len(lines(t, dir+"/runs")) >= 10 })
	p.signal(t, syscall.SIGTERM)
	r = p.wait(t)
	r.wantExit(t, 0)
	if strings.Count(r.Stderr, "has no LMOVE") != 1 {
		t.Errorf("continuous run: want one line about LMOVE, got %s", r)
	}
	got, _ := c.Client.LRange(ctx(t), list, 0, -1).Result()
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("list %q lost or gained items", got)
	}
}
