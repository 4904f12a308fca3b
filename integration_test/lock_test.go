package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// TestLockLostStopsTheChild changes or deletes the lock from outside while a
// child runs: w8y stops the child's whole group, leaves the other holder's
// lock alone and exits 122.
func TestLockLostStopsTheChild(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tamper func(s *server, key string) error
		after  string // the lock's value afterwards; "" for none
	}{
		{"deleted", func(s *server, key string) error { return s.Client.Del(ctx(t), key).Err() }, ""},
		{"overwritten", func(s *server, key string) error { return s.Client.Set(ctx(t), key, "intruder", 0).Err() }, "intruder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "lost")
			s.items("a", "b")
			p, _, grandchild := s.startGroupChild("-x", "600ms")
			if err := tt.tamper(s.server, s.key("lock:a")); err != nil {
				t.Fatal(err)
			}
			r := p.wait(t)
			r.wantEnd(t, 122, "lock lost")
			processGone(t, grandchild)
			got, _ := s.Client.Get(ctx(t), s.key("lock:a")).Result()
			if got != tt.after {
				t.Errorf("lock value afterwards %q, want %q", got, tt.after)
			}
			s.wantList("b", "a")
		})
	}
}

// TestLockIsRefreshed runs a child for several lock expiries: the lock stays
// ours throughout, and the child's exit code comes through.
func TestLockIsRefreshed(t *testing.T) {
	s := withList(t, "long", "a")
	// The child waits on Redis for the test, which first watches the lock
	// outlive three expiries.
	p := s.start(append([]string{"-x", "1s"},
		report(":", `redis-cli -p "$REDIS_PORT" blpop gate 30 >/dev/null; exit 5`)...)...)
	s.popStarted(t)
	token, err := s.Client.Get(ctx(t), s.key("lock:a")).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Wait for three refreshes by watching the lock's TTL rise: each PEXPIRE
	// resets it to 1s, so a rise means a refresh.
	refreshes, last := 0, int64(1<<62)
	poll.WaitFor(t, "three refreshes", func() bool {
		ttl, err := s.Client.PTTL(ctx(t), s.key("lock:a")).Result()
		if err != nil || ttl <= 0 {
			t.Fatalf("the lock expired or vanished (TTL %s, %v) while its child ran", ttl, err)
		}
		if ttl.Milliseconds() > last {
			refreshes++
		}
		last = ttl.Milliseconds()
		if v, _ := s.Client.Get(ctx(t), s.key("lock:a")).Result(); v != token {
			t.Fatalf("lock value changed to %q", v)
		}
		return refreshes == 3
	})
	s.Client.RPush(ctx(t), "gate", "go")
	p.wait(t).wantExit(t, 5)
	s.noLocks()
}

// TestLockLostWhenRedisStalls pauses Redis' writes while a child runs, so
// refreshes cannot get through: w8y stops the child's group before the lease
// could run out, without waiting for Redis, and exits 122.
func TestLockLostWhenRedisStalls(t *testing.T) {
	s := withList(t, "stall", "a")
	const ttl = 3 * time.Second
	p, _, grandchild := s.startGroupChild("-x", ttl.String())

	// Refreshes are scripts, which a WRITE pause holds back.
	pausedAt := time.Now()
	if err := s.Client.Do(ctx(t), "CLIENT", "PAUSE", 20_000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	processGone(t, grandchild)
	// The last refresh was sent before the pause, so the lease ends no later
	// than pausedAt+ttl: the child must be gone before then.
	if gone := time.Since(pausedAt); gone >= ttl {
		t.Errorf("the child ran %s into the pause, past the %s lease", gone, ttl)
	}
	if err := s.Client.Do(ctx(t), "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	r.wantEnd(t, 122, "before its lease ran out")
	s.noLocks()
}

// TestFenceRefusesALateWrite runs the reference's example of a store that
// checks the fencing token, as its page shows it: the script, as the child
// of w8y's runs, stores each run's report; a write with an older run's
// fence, as from a run on a host that was paused past its lease, is
// refused and changes nothing; and the session shown prints what it shows.
func TestFenceRefusesALateWrite(t *testing.T) {
	s := withList(t, "work", "a")
	store := startRedis(t)
	bin := t.TempDir()
	writeExecutable(t, filepath.Join(bin, "store-report"), []byte(doctest.Block(t, "docs/reference.md", "sh", "store-report BODY")))
	s.setenv("PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "STORE_URL="+store.URL)
	for run := range 2 {
		r := s.run("store-report", fmt.Sprintf("run %d", run))
		r.wantExit(t, 0)
		r.wantStdout(t, "stored\n")
	}
	fence := s.Client.Get(ctx(t), s.key("fence")).Val()
	if got := store.Client.HGetAll(ctx(t), "report:a").Val(); got["fence"] != fence || got["body"] != "run 1" {
		t.Fatalf("the store holds %v, want the second run's report with its fence %s", got, fence)
	}

	// The first run's fence, late.
	late := exec.Command(filepath.Join(bin, "store-report"), "late")
	late.Env = append(os.Environ(), s.env...)
	late.Env = append(late.Env, "W8Y_ITEM=a", "W8Y_FENCE=1")
	out, err := late.CombinedOutput()
	if err != nil || string(out) != "refused: fence 1, and "+fence+" wrote last\n" {
		t.Errorf("a late write printed %q (%v), want it refused", out, err)
	}
	if got := store.Client.HGet(ctx(t), "report:a", "body").Val(); got != "run 1" {
		t.Errorf("a late write changed the report to %q", got)
	}

	// The page's session, as a shell runs it.
	shown := doctest.Block(t, "docs/reference.md", "", "$ W8Y_ITEM=a W8Y_FENCE=8 store-report")
	var want strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(shown, "\n"), "\n") {
		command, ok := strings.CutPrefix(line, "$ ")
		if !ok {
			continue
		}
		sh := exec.Command("sh", "-c", command)
		sh.Env = append(os.Environ(), s.env...)
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", command, err, out)
		}
		want.WriteString(line + "\n" + string(out))
	}
	if want.String() != shown {
		t.Errorf("the session printed:\n%s\nwhere the page shows:\n%s", want.String(), shown)
	}
}

// TestLateTakeStartsWithAWholeLease: a take that Redis answers late (its
// writes paused, as in a failover) leaves less of the lease, as w8y counts
// it from the take's sending, than the child needs: w8y refreshes the lock
// before the child starts, so neither its guard nor its lease takes the
// child for one that overran its lease. The child runs longer than what
// was left of the first lease, and ends well.
func TestLateTakeStartsWithAWholeLease(t *testing.T) {
	s := withList(t, "late", "a")
	const ttl = 3 * time.Second
	// A first run leaves the item due and the scripts loaded: the next
	// run's first call, a look, takes it.
	s.run("-x", ttl.String(), "true").mustExit(t, 0)
	if err := s.Client.Do(ctx(t), "CLIENT", "PAUSE", 60_000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Client.Do(ctx(t), "CLIENT", "UNPAUSE") })
	p := s.start(append([]string{"-x", ttl.String()}, report(":", "sleep 1.5")...)...)
	poll.WaitFor(t, "w8y's take to wait on Redis", func() bool {
		clients, _ := s.Client.ClientList(ctx(t)).Result()
		return strings.Contains(clients, "flags=b") && strings.Contains(clients, "cmd=evalsha")
	})
	// How late the take is answered: from here on, less than the guard's
	// margin (a third of the TTL and a twentieth) is left of the lease
	// counted from its sending. Later only leaves less.
	time.Sleep(ttl * 2 / 3)
	if err := s.Client.Do(ctx(t), "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	s.popStarted(t)
	r := p.wait(t)
	r.wantExit(t, 0)
	if strings.Contains(r.Stderr, "lock lost") {
		t.Errorf("the lock was taken for lost:\n%s", r.Stderr)
	}
	s.noLocks()
}

// TestFence: every take increments the list's fencing token, across
// workers: each child gets its own in W8Y_FENCE, the start events carry them
// strictly increasing in the order of the takes, and each item's state hash
// keeps its last run's.
func TestFence(t *testing.T) {
	s := withList(t, "fc", redistest.Items(6)...)
	child := `redis-cli -p "$REDIS_PORT" rpush fences "$W8Y_ITEM $W8Y_FENCE $W8Y_HOLDER" >/dev/null`
	var workers []*proc
	for range 3 {
		workers = append(workers, s.start("-c", "-q", "--cooldown", "100ms", "--idle-wait", "50ms", "sh", "-c", child))
	}
	poll.WaitFor(t, "30 runs", func() bool { return s.Client.LLen(ctx(t), "fences").Val() >= 30 })
	drain(t, workers)

	// The starts, in the order of the takes.
	type run struct{ item, holder string }
	started := map[int64]run{}
	last := map[string]int64{}
	var fences []int64
	for _, m := range s.Client.XRange(ctx(t), s.key("events"), "-", "+").Val() {
		if m.Values["type"] != "start" {
			continue
		}
		fence, err := strconv.ParseInt(m.Values["fence"].(string), 10, 64)
		if err != nil || len(fences) > 0 && fence <= fences[len(fences)-1] {
			t.Errorf("the start event's fence %q follows %v", m.Values["fence"], fences[max(len(fences)-1, 0):])
		}
		fences = append(fences, fence)
		item := m.Values["item"].(string)
		started[fence] = run{item, m.Values["holder"].(string)}
		last[item] = max(last[item], fence)
	}
	// Each child got its take's fence. The drain may stop a child before it
	// records its own: at most one per worker.
	children := s.server.list(t, "fences")
	holders := map[string]bool{}
	for _, record := range children {
		f := strings.Fields(record)
		fence, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || started[fence] != (run{f[0], f[2]}) {
			t.Errorf("a child of %s by %s got W8Y_FENCE %q, whose take was of %+v", f[0], f[2], f[1], started[fence])
		}
		holders[f[2]] = true
	}
	if len(started)-len(children) > len(workers) || len(started) < len(children) {
		t.Errorf("%d starts, %d children that recorded their fence", len(started), len(children))
	}
	if len(holders) < 2 {
		t.Errorf("the runs came from %d workers, want several", len(holders))
	}
	for item, fence := range last {
		if got := s.Client.HGet(ctx(t), s.key("state:"+item), "last_fence").Val(); got != strconv.FormatInt(fence, 10) {
			t.Errorf("state of %s: last_fence %q, want its last take's %d", item, got, fence)
		}
	}
	if got := s.Client.Get(ctx(t), s.key("fence")).Val(); got != strconv.FormatInt(slices.Max(fences), 10) {
		t.Errorf("fc:fence is %q, want the last take's %d", got, slices.Max(fences))
	}
}
