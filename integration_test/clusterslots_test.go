package integration_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// slotMove is a slot on its way from one node to another, as redis-cli
// --cluster reshard moves one: IMPORTING on the new node, MIGRATING on the
// old, its keys moved one batch at a time, then SETSLOT NODE everywhere.
type slotMove struct {
	c        *cluster
	slot     int64
	from, to *server
	toID     string
}

// beginMove starts moving the slot of key from the node that serves it to
// another: each of the slot's keys then lives on one node or the other, as
// half way through a reshard.
func (c *cluster) beginMove(t *testing.T, key string) *slotMove {
	t.Helper()
	slot, err := c.Nodes[0].Client.ClusterKeySlot(ctx(t), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	m := &slotMove{c: c, slot: slot}
	var fromID string
	m.from, fromID = c.nodeOf(t, key)
	m.to = c.Nodes[0]
	if m.to == m.from {
		m.to = c.Nodes[1]
	}
	m.toID = nodeID(t, m.to)
	must(t, m.to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	must(t, m.from, "CLUSTER", "SETSLOT", slot, "MIGRATING", m.toID)
	return m
}

// migrate moves keys of the slot to the new node.
func (m *slotMove) migrate(t *testing.T, keys ...string) {
	t.Helper()
	must(t, m.from, append([]any{"MIGRATE", "127.0.0.1", m.to.Port, "", 0, 5000, "KEYS"}, redistest.Values(keys)...)...)
}

// finish moves the slot's other keys, two at a time so that workers meet a
// slot half moved, and gives the slot to the new node on every node, the
// two that moved it first.
func (m *slotMove) finish(t *testing.T) {
	t.Helper()
	poll.Repeat(t, poll.Timeout, fmt.Sprintf("slot %d to hold no keys", m.slot), func() bool {
		keys, err := m.from.Client.ClusterGetKeysInSlot(ctx(t), int(m.slot), 2).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			return true
		}
		m.migrate(t, keys...)
		return false
	})
	must(t, m.to, "CLUSTER", "SETSLOT", m.slot, "NODE", m.toID)
	must(t, m.from, "CLUSTER", "SETSLOT", m.slot, "NODE", m.toID)
	for _, s := range m.c.Nodes {
		if s != m.to && s != m.from {
			must(t, s, "CLUSTER", "SETSLOT", m.slot, "NODE", m.toID)
		}
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
	poll.WaitFor(t, "20 runs", func() bool { return len(lines(t, dir+"/runs")) >= 20 })
	// The slow items must be running, their locks held, while the slot moves.
	poll.WaitFor(t, "a slow item's lock", func() bool {
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
	poll.WaitFor(t, "20 runs after the move", func() bool { return len(lines(t, dir+"/runs")) >= moved+20 })
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

// TestClusterReleaseWhileSlotMoves ends a run while its slot is half moved
// to another node: the state hash has arrived there, the lock and the
// events stream have not. The finish script names them all, and the
// cooldown and backoff keys, and is refused (TRYAGAIN); w8y must then
// finish key by key, which follows the move, rather than leave the lock to
// expire and the run's end unwritten: the record, and the cooldown after a
// success or the backoff and the count after a failure.
func TestClusterReleaseWhileSlotMoves(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, tt := range []struct {
		name, prefix string
		code         int
		flags        []string
		result       string
		streak       string
		pause        string // the key that must be set, under prefix
		min, max     time.Duration
	}{
		{"success with --cooldown", "{mv}:", 0, []string{"--cooldown", "1h"}, "success", "0", "cooldown:a", 59 * time.Minute, time.Hour},
		{"failure with --failure-backoff", "{mvf}:", 3, []string{"--failure-backoff", "20m,1h"}, "failure", "1", "backoff:a", 15*time.Minute - time.Second, 20 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.prefix
			list, lock, state, events := p+"list", p+"lock:a", p+"state:a", p+"events"
			if err := c.Client.RPush(ctx(t), list, "a").Err(); err != nil {
				t.Fatal(err)
			}
			// The state hash must exist before the run for MIGRATE to move it.
			if err := c.Client.HSet(ctx(t), state, "runs", 4).Err(); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			args := append([]string{"--redis-cluster", "-u", c.URL, "-k", p, "-x", "10"}, tt.flags...)
			w := startW8y(t, []string{"DIR=" + dir, "CODE=" + itoa(tt.code)}, append(args, "sh", "-c",
				`touch "$DIR/started"; while [ ! -e "$DIR/go" ]; do sleep 0.02; done; exit $CODE`)...)
			poll.WaitFor(t, "the child to start", func() bool { _, err := os.Stat(dir + "/started"); return err == nil })

			bg := context.Background()
			move := c.beginMove(t, list)
			move.migrate(t, state)
			from, to := move.from, move.to
			if n := from.Client.Exists(bg, lock, events).Val(); n != 2 {
				t.Fatalf("the lock and the events should still be on the old node: %d of 2", n)
			}

			if err := os.WriteFile(dir+"/go", nil, 0o600); err != nil {
				t.Fatal(err)
			}
			r := w.wait(t)
			r.wantExit(t, tt.code)
			if strings.Contains(r.Stderr, "could not") || strings.Contains(r.Stderr, "cannot") {
				t.Errorf("w8y could not finish: %s", r)
			}
			if n := from.Client.Exists(bg, lock).Val(); n != 0 {
				t.Errorf("the lock was left on the old node to expire")
			}

			// Finish the move, and read the record where it now lives.
			move.finish(t)
			st := to.Client.HGetAll(bg, state).Val()
			if st["runs"] != "5" || st["last_result"] != tt.result || st["last_exit_code"] != itoa(tt.code) || st["consecutive_failures"] != tt.streak {
				t.Errorf("state after the move: %v, want the run recorded as %s with %s consecutive failures", st, tt.result, tt.streak)
			}
			checkPause(t, to.Client, p+tt.pause, tt.min, tt.max)
			var types []string
			for _, e := range to.Client.XRange(bg, events, "-", "+").Val() {
				types = append(types, fmt.Sprint(e.Values["type"]))
			}
			if !slices.Equal(types, []string{"start", "finish"}) {
				t.Errorf("events %q, want start and finish", types)
			}
		})
	}
}
