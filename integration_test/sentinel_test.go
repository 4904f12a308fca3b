package integration_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// TestSentinelFailover runs continuous workers against a master found
// through Sentinel (one master, one replica, three sentinels), forces a
// failover with SENTINEL FAILOVER while children run, and checks that the
// workers keep processing items on the new master and that no item ever
// ran twice at once. --replica-acks 1 is what makes that hold: without it,
// a lock taken on the old master in the moment before the switch, and not
// yet replicated, is gone on the new one, where another worker may take
// the item while the first still runs it.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroup(t)
	master, replica := &server{g.Master}, &server{g.Replica}
	items := []string{"a", "b", "c", "d", "e-slow", "f-slow"}
	master.seed(t, "fo:list", items...)
	dir := t.TempDir()
	env := []string{"DIR=" + dir, "SLOW=1.5"}
	var workers []*proc
	for range 3 {
		workers = append(workers, startW8y(t, env, "--sentinel-master", g.Name, "-u", g.URL, "-k", "fo",
			"-c", "-x", "1", "--replica-acks", "1", "--idle-wait", "20ms", "--log-level", "warn",
			"sh", "-c", overlapChild))
	}
	poll.WaitFor(t, "20 runs", func() bool { return len(lines(t, dir+"/runs")) >= 20 })
	poll.WaitFor(t, "a slow item's lock", func() bool {
		n, err := g.Master.Client.Exists(ctx(t), "fo:lock:e-slow", "fo:lock:f-slow").Result()
		return err == nil && n > 0
	})
	if err := g.Sentinels[0].Failover(ctx(t), g.Name).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	poll.WaitFor(t, "every sentinel to name the replica as master", func() bool { return g.MasterPort() == g.Replica.Port })
	switched := len(lines(t, dir+"/runs"))
	// With one replica, the new master has none until Sentinel makes the
	// old master its replica, about ten seconds after the switch (Sentinel
	// waits four of its 2s publish periods first); till then no lock can
	// be confirmed and the workers back off, up to 8s apart by then.
	if !poll.Poll(2*poll.Timeout, func() bool { return len(lines(t, dir+"/runs")) >= switched+20 }) {
		t.Fatalf("timed out after %s waiting for 20 runs after the failover", 2*poll.Timeout)
	}
	drain(t, workers)
	noOverlaps(t, dir)
	got := replica.list(t, "fo:list")
	slices.Sort(got)
	if !slices.Equal(got, items) {
		t.Errorf("list on the new master: %q, want %q in some order", got, items)
	}
	replica.noLocks(t, "fo")
}

// awaitReplica waits until master has one replica that acknowledges its
// writes.
func awaitReplica(t *testing.T, master *server) {
	t.Helper()
	poll.WaitFor(t, "the replica to sync", func() bool {
		info := redistest.Info(t, master.Client, "replication")
		return info["connected_slaves"] == "1" && strings.Contains(info["slave0"], "state=online")
	})
	// Online is not yet acknowledging (Valkey says online before its
	// first ACK): wait until a write of the test's own is confirmed,
	// as w8y's WAIT will ask.
	poll.WaitFor(t, "the replica to acknowledge a write", func() bool {
		pipe := master.Client.Pipeline()
		pipe.Set(ctx(t), "replica-probe", "1", 0)
		acked := pipe.Do(ctx(t), "WAIT", 1, 200)
		_, _ = pipe.Exec(ctx(t))
		n, err := acked.Int()
		return err == nil && n == 1
	})
}

// TestReplicaAcksContinuous: a busy continuous worker finishes a run and
// takes the next item in one call (take.FinishThenLook), which cannot WAIT
// between the two; under --replica-acks each take must still be confirmed
// before its child runs, so that path must not be used: every start has a
// WAIT of its own. (A change that let the fused path skip its WAIT gave 18
// starts for 8 WAITs here.)
func TestReplicaAcksContinuous(t *testing.T) {
	t.Parallel()
	master := startRedis(t)
	startRedis(t, redistest.Args("--replicaof", "127.0.0.1", itoa(master.Port)))
	awaitReplica(t, master)
	// Three items with no cooldown: each is due again when it ends, so the
	// worker is never idle and every take after the first could be fused
	// with a finish.
	master.seed(t, "ackc:list", "a", "b", "c")
	const starts = 18
	before := redistest.CommandStats(t, master.Client)["wait"]
	p := startW8y(t, portEnv(master), "-u", master.URL, "-k", "ackc", "--replica-acks", "1", "-c", "-q", "sh", "-c", started)
	poll.WaitFor(t, fmt.Sprintf("%d starts", starts), func() bool {
		return master.Client.LLen(ctx(t), "started").Val() >= starts
	})
	p.stop(t)
	waits := redistest.CommandStats(t, master.Client)["wait"] - before
	got := int(master.Client.LLen(ctx(t), "started").Val())
	if waits < got {
		t.Errorf("%d starts for %d WAITs: a take ran its child unconfirmed", got, waits)
	}
	master.noLocks(t, "ackc")
}

// TestReplicaAcks: with --replica-acks, a lock that no replica confirms is
// given back before any child runs (exit 125), and a child whose lock
// refreshes stop being confirmed is stopped as on a lost lock (exit 122)
// before the lease could run out, as a failover to that replica would lose
// the lock.
func TestReplicaAcks(t *testing.T) {
	t.Parallel()
	master := startRedis(t)
	replica := startRedis(t, redistest.Args("--replicaof", "127.0.0.1", itoa(master.Port)))
	attach := func() {
		t.Helper()
		if err := replica.Client.Do(ctx(t), "REPLICAOF", "127.0.0.1", master.Port).Err(); err != nil {
			t.Fatal(err)
		}
		awaitReplica(t, master)
	}
	detach := func() {
		t.Helper()
		if err := replica.Client.Do(ctx(t), "REPLICAOF", "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		poll.WaitFor(t, "the master to lose its replica", func() bool {
			return redistest.Info(t, master.Client, "replication")["connected_slaves"] == "0"
		})
	}
	attach()
	master.seed(t, "acks:list", "a", "b")
	args := []string{"-u", master.URL, "-k", "acks", "--replica-acks", "1"}

	r := runW8y(t, nil, append(args, "printf", "%s", "{}")...)
	r.mustExit(t, 0)
	r.wantStdout(t, "a")

	detach()
	// With the schedule's flags: a take given back sets no pause.
	r = runW8y(t, nil, append(args, "--cooldown", "1h", "--failure-backoff", "1m", "printf", "%s", "{}")...)
	r.wantExit(t, 125)
	r.wantStdout(t, "") // no child
	oneLine(t, r.Stderr, "0 of the 1 replicas wanted confirmed it")
	master.noLocks(t, "acks")
	// The record shows the confirmed run, and the take given back as a run
	// that started no child: interrupted, neither success nor failure.
	if st := master.stateOf(t, "acks", "a"); st["runs"] != "1" || st["last_result"] != "success" {
		t.Errorf("state of a after a confirmed run: %v", st)
	}
	if st := master.stateOf(t, "acks", "b"); st["runs"] != "1" || st["last_result"] != "interrupted" || st["failures"] != "" || st["consecutive_failures"] != "" || st["last_exit_code"] != "" || st["last_start"] == "" {
		t.Errorf("state of b after an unconfirmed take: %v", st)
	}
	if keys := master.keys(t, "acks:*:b"); !slices.Equal(keys, []string{"acks:state:b"}) {
		t.Errorf("keys of b after an unconfirmed take: %q, want its state alone (no cooldown, no backoff)", keys)
	}
	var events []string
	for _, e := range master.Client.XRange(ctx(t), "acks:events", "-", "+").Val() {
		events = append(events, fmt.Sprint(e.Values["type"], " ", e.Values["item"], " ", e.Values["result"]))
	}
	if want := []string{"start a <nil>", "finish a success", "start b <nil>", "finish b interrupted"}; !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}

	attach()
	// The finish, with replica acks too, deletes only a lock that is still
	// ours: here the child hands its lock to someone else.
	r = runW8y(t, portEnv(master), append(args, "sh", "-c", `redis-cli -p "$REDIS_PORT" set "$W8Y_LOCK_KEY" someone-else >/dev/null`)...)
	r.wantExit(t, 0)
	if got := master.Client.Get(ctx(t), "acks:lock:a").Val(); got != "someone-else" {
		t.Errorf("the other holder's lock holds %q after the release, want someone-else", got)
	}
	master.Client.Del(ctx(t), "acks:lock:a")

	dir := t.TempDir()
	// A 3s expiry with a 200ms kill grace leaves the first refresh over a
	// second before the child must be stopped: ample for WAIT's 300ms, so
	// that the refresh fails for want of replicas, not for want of time.
	p := startW8y(t, nil, append(args, "-x", "3", "--kill-after", "200ms", "sh", "-c", "echo $$ > "+dir+"/pid; exec sleep 30")...)
	poll.WaitFor(t, "the child to start", func() bool { _, err := os.Stat(dir + "/pid"); return err == nil })
	detach()
	started := time.Now()
	r = p.wait(t)
	r.wantEnd(t, 122, "lock lost")
	r.wantStderr(t, "0 of the 1 replicas wanted confirmed it")
	// The lease was confirmed at the latest when the replica left: the
	// child must be gone within the key expiry of that.
	if took := time.Since(started); took > 3*time.Second {
		t.Errorf("the child was stopped %s after the replica left, beyond the 3s key expiry", took)
	}
}
