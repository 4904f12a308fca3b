package integration_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// reshardHold is how long TestClusterReshard holds a slot half-moved: more
// than twice the workers' --key-expiry (-x 1), so that a lease that cannot
// be refreshed while the slot moves runs out, as it did before w8y rode
// reshards out (docs/recipes.md, "Resharding").
const reshardHold = 2500 * time.Millisecond

// TestClusterReshard moves the slot of a list's keys to another node the
// way redis-cli --cluster reshard does, and holds it half-moved for longer
// than the lease, while continuous workers run long children: with a hash
// tag (the list and every key of its items in one slot), the list moved
// first and the locks later; without (the slot of a running item's lock).
// No child is stopped, no item runs twice at once, the workers say at info
// level that the slot moves and then that it has moved, and takes resume.
func TestClusterReshard(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, tt := range []struct {
		name, prefix string
		moved        func(prefix string) string // the key whose slot moves
	}{
		{"hash tag", "{rs}:", func(p string) string { return p + "list" }},
		{"no hash tag", "rsn:", func(p string) string { return p + "lock:a-slow" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			items := []string{"a-slow", "b-slow", "c", "d"}
			if err := c.Client.RPush(ctx(t), tt.prefix+"list", redistest.Values(items)...).Err(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			env := []string{"DIR=" + dir, "SLOW=6"}
			var workers []*proc
			for range 3 {
				workers = append(workers, startW8y(t, env, "--redis-cluster", "-u", c.URL, "-k", tt.prefix, "-c", "-x", "1",
					"--parallel", "2", "--cooldown", "200ms", "sh", "-c", overlapChild))
			}
			poll.WaitFor(t, "both slow items to run", func() bool {
				// One key a call: without a hash tag, they are in two slots.
				a := c.Client.Exists(ctx(t), tt.prefix+"lock:a-slow").Val()
				b := c.Client.Exists(ctx(t), tt.prefix+"lock:b-slow").Val()
				return a+b == 2
			})
			started := len(lines(t, dir+"/runs"))
			move := c.beginMove(t, tt.moved(tt.prefix))
			move.migrate(t, tt.moved(tt.prefix))
			time.Sleep(reshardHold)
			halfMoved := len(lines(t, dir+"/runs"))
			move.finish(t)
			moved := time.Now()
			poll.WaitFor(t, "a start after the move", func() bool { return len(lines(t, dir+"/runs")) > halfMoved })
			t.Logf("%s: %d starts while the slot was half-moved for %s; the first start %s after the move's end",
				tt.name, halfMoved-started, reshardHold, time.Since(moved).Round(time.Millisecond))
			poll.WaitFor(t, "ten runs after the move", func() bool { return len(lines(t, dir+"/runs")) >= started+10 })
			poll.WaitFor(t, "the slow items' runs to end", func() bool {
				a := c.Client.HGet(ctx(t), tt.prefix+"state:a-slow", "last_result").Val()
				b := c.Client.HGet(ctx(t), tt.prefix+"state:b-slow", "last_result").Val()
				return a != "" && b != ""
			})
			drain(t, workers)
			noOverlaps(t, dir)
			for _, item := range []string{"a-slow", "b-slow"} {
				if got := c.Client.HGet(ctx(t), tt.prefix+"state:"+item, "last_result").Val(); got != "success" {
					t.Errorf("%s's run across the move ended %q, want success", item, got)
				}
			}
			var logs []string
			for _, w := range workers {
				logs = append(logs, w.stderrSoFar())
			}
			all := strings.Join(logs, "")
			for _, never := range []string{"lock lost", "lock_lost", "TRYAGAIN", "non local key", "reachable again", " ERR ", "ERR "} {
				if strings.Contains(all, never) {
					t.Errorf("a worker logged %q while the slot moved:\n%s", never, all)
				}
			}
			if tt.prefix == "{rs}:" && (!strings.Contains(all, "slot is moving") || !strings.Contains(all, "slot has moved")) {
				t.Errorf("no worker said that the list's slot moves, then that it has moved:\n%s", all)
			}
			got := c.Client.LRange(ctx(t), tt.prefix+"list", 0, -1).Val()
			slices.Sort(got)
			if !slices.Equal(got, items) {
				t.Errorf("list after the move: %q, want %q in some order", got, items)
			}
		})
	}
}

// TestRideOutSlotMoves: w8yctl's reads and changes, sent while the list's
// slot is half-moved (the list on the new node, an item's keys still on
// the old), wait until the slot has moved, as the workers' takes do,
// instead of failing on Redis' TRYAGAIN.
func TestRideOutSlotMoves(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	const prefix = "{ro}:"
	if err := c.Client.RPush(ctx(t), prefix+"list", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	c.Client.HSet(ctx(t), prefix+"state:a", "runs", 1)
	c.Client.Set(ctx(t), prefix+"cooldown:b", "1", time.Hour)
	move := c.beginMove(t, prefix+"list")
	move.migrate(t, prefix+"list")
	base := []string{"--redis-cluster", "-u", c.URL, "-k", prefix}
	var ctls []*proc
	for _, verb := range [][]string{{"status"}, {"pause", "a", "--reason", "reshard"}, {"add", "c"}} {
		ctls = append(ctls, startCtl(t, nil, append(base, verb...)...))
	}
	// Each change is refused at least once while the slot moves (Redis
	// counts its TRYAGAIN replies), and waits.
	poll.WaitFor(t, "the two changes to meet the moving slot", func() bool {
		return c.tryAgains(t) >= 2
	})
	move.finish(t)
	for i, p := range ctls {
		r := p.wait(t)
		if r.Code != 0 {
			t.Errorf("w8yctl command %d across the move: %s", i, r)
		}
	}
	if got := c.Client.LRange(ctx(t), prefix+"list", 0, -1).Val(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("list after the move: %q", got)
	}
	if c.Client.Exists(ctx(t), prefix+"pause:a").Val() != 1 {
		t.Error("the pause sent across the move is not there")
	}
}

// tryAgains is how many TRYAGAIN replies the Cluster's nodes have sent.
func (c *cluster) tryAgains(t *testing.T) int {
	t.Helper()
	n := 0
	for _, s := range c.Nodes {
		stat := redistest.Info(t, s.Client, "errorstats")["errorstat_TRYAGAIN"]
		count, _, _ := strings.Cut(strings.TrimPrefix(stat, "count="), ",")
		if v, err := strconv.Atoi(count); err == nil {
			n += v
		}
	}
	return n
}

// TestChaosReshard is the chaos test's promises on a Cluster whose list's
// slot keeps moving between masters, each move held half-moved for a while,
// with workers killed (SIGKILL) and replaced meanwhile: no item runs twice
// at once, every item runs, the list ends as it began, and every worker
// stopped with SIGTERM exits 0.
func TestChaosReshard(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	const prefix = "{cr}:"
	items := []string{"s0-slow", "s1-slow"}
	for i := range 8 {
		items = append(items, "i"+itoa(i))
	}
	if err := c.Client.RPush(ctx(t), prefix+"list", redistest.Values(items)...).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"DIR=" + dir, "SLOW=1.5"}
	start := func() *proc {
		return startW8y(t, env, "--redis-cluster", "-u", c.URL, "-k", prefix, "-c", "-x", "1",
			"--cooldown", "100ms", "--log-level", "warn", "sh", "-c", overlapChild)
	}
	workers := []*proc{start(), start(), start(), start()}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	moves, kills := 0, 0
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); {
		// The fault "migrate the list's slot": the list first, then its
		// other keys, the slot half-moved meanwhile for 0.2 to 1.4s.
		move := c.beginMove(t, prefix+"list")
		move.migrate(t, prefix+"list")
		time.Sleep(time.Duration(200+rng.IntN(1200)) * time.Millisecond)
		move.finish(t)
		moves++
		// Settled for 0.3 to 1s before the next move: takes go on.
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		if rng.IntN(2) == 0 {
			i := rng.IntN(len(workers))
			workers[i].signal(t, syscall.SIGKILL)
			workers[i].wait(t)
			workers[i] = start()
			kills++
		}
	}
	// A worker stops gracefully once it has set up (its signal handlers
	// first): once it is in the registry of live workers.
	for _, w := range workers {
		announced(t, c.Client, prefix, w)
	}
	drain(t, workers)
	noOverlaps(t, dir)
	everyItemRan(t, dir, items)
	got := c.Client.LRange(ctx(t), prefix+"list", 0, -1).Val()
	slices.Sort(got)
	want := slices.Sorted(slices.Values(items))
	if !slices.Equal(got, want) {
		t.Errorf("list after the chaos: %q, want %q in some order", got, want)
	}
	t.Logf("chaos on a Cluster: %d moves of the list's slot, %d workers killed, %d runs, overlaps found: 0", moves, kills, len(lines(t, dir+"/runs")))
}
