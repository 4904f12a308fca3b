package integration_test

import (
	"errors"
	"fmt"
	"os"
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

// fill writes keys without expiry to s until it refuses one for lack of
// memory: a server full to its maxmemory, as an application sharing it
// would leave it.
func (s *server) fill(t *testing.T) {
	t.Helper()
	value := strings.Repeat("x", 16<<10)
	for i := 0; ; i++ {
		err := s.Client.Set(ctx(t), "fill:"+itoa(i), value, 0).Err()
		if err != nil && strings.HasPrefix(err.Error(), "OOM") {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if i > 1<<16 {
			t.Fatal("the server took 1 GiB without refusing a write: is its maxmemory set?")
		}
	}
}

// policy sets the server's maxmemory and maxmemory-policy, as an operator
// or a managed service's default would.
func (s *server) policy(t *testing.T, maxmemory, policy string) {
	t.Helper()
	for _, kv := range [][2]string{{"maxmemory", maxmemory}, {"maxmemory-policy", policy}} {
		if err := s.Client.ConfigSet(ctx(t), kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEvictionPolicies: every policy that may evict w8y's keys is refused,
// in one-shot and continuous modes alike, with one line that names the
// policy and the fix, and the list left as it was; w8yctl check reports
// it; --allow-eviction runs, saying so once; noeviction, and a maxmemory
// of 0 (which never evicts, whatever the policy), run without a word.
func TestEvictionPolicies(t *testing.T) {
	t.Parallel()
	b := setup(t, "evict")
	tests := []struct {
		maxmemory, policy string
		evicts            bool
	}{
		{"64mb", "volatile-lru", true},
		{"64mb", "volatile-ttl", true},
		{"64mb", "allkeys-lru", true},
		{"64mb", "allkeys-random", true},
		{"64mb", "noeviction", false},
		{"0", "volatile-lru", false},
	}
	for _, tt := range tests {
		name := tt.policy + " with maxmemory " + tt.maxmemory
		b.policy(t, tt.maxmemory, tt.policy)
		b.items("a", "b", "c")
		for _, mode := range [][]string{{"-q"}, {"-q", "-c", "--cooldown", "1h", "--until-idle"}} {
			r := b.run(append(mode, "true")...)
			if !tt.evicts {
				if r.Code != 0 || r.Stderr != "" {
					t.Errorf("%s, %q: %s; want exit 0 and nothing on stderr", name, mode, r)
				}
				continue
			}
			if r.Code != 125 {
				t.Errorf("%s, %q: exit %d, want 125", name, mode, r.Code)
			}
			oneLine(t, r.Stderr, "maxmemory-policy "+tt.policy)
			for _, want := range []string{"noeviction", "--allow-eviction (W8Y_ALLOW_EVICTION)"} {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("%s: the refusal does not name %s: %s", name, want, r.Stderr)
				}
			}
			b.wantList("a", "b", "c")
			b.noLocks()
		}
		r := b.ctl("check")
		if tt.evicts && (r.Code != 1 || !strings.Contains(r.Stdout, "maxmemory-policy "+tt.policy)) {
			t.Errorf("%s: w8yctl check %s; want exit 1 and the policy named", name, r)
		}
		if !tt.evicts && r.Code != 0 {
			t.Errorf("%s: w8yctl check %s; want exit 0", name, r)
		}
		if tt.evicts {
			json := b.ctl("check", "--json")
			if !strings.Contains(json.Stdout, `"kind":"may_evict"`) && !strings.Contains(json.Stdout, `"kind": "may_evict"`) {
				t.Errorf("%s: w8yctl check --json has no may_evict: %s", name, json)
			}
			b.items("a", "b", "c")
			b.setenv("W8Y_ALLOW_EVICTION=1")
			r := b.run("true")
			b.env = b.env[:len(b.env)-1]
			r.wantExit(t, 0)
			if n := strings.Count(r.Stderr, "--allow-eviction lets w8y run"); n != 1 {
				t.Errorf("%s with W8Y_ALLOW_EVICTION=1: said %d times that it runs anyway, want once: %s", name, n, r)
			}
		}
	}
}

// TestFullServerBeforeARun: a noeviction server at its maxmemory refuses a
// take; the run says so in one plain line, how full Redis is, without a
// script's hash or Lua line, and changes nothing.
func TestFullServerBeforeARun(t *testing.T) {
	b := withList(t, "full", "a", "b", "c")
	b.policy(t, "8mb", "noeviction")
	b.fill(t)
	r := b.run("true")
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, "Redis is full")
	for _, want := range []string{"used memory", "of maxmemory 8mb", "maxmemory-policy noeviction"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("the line does not say %q: %s", want, r.Stderr)
		}
	}
	for _, never := range []string{"@user_script", "script:", "OOM command"} {
		if strings.Contains(r.Stderr, never) {
			t.Errorf("the line shows Redis' own words %q: %s", never, r.Stderr)
		}
	}
	b.wantList("a", "b", "c")
	b.noLocks()
	if keys := b.keys(t, b.key("*")); !slices.Equal(keys, []string{b.key("list")}) {
		t.Errorf("a refused take left keys: %q", keys)
	}
}

// TestFullServerDuringARun: a run under way when the server fills keeps
// its lock through its refreshes, and its finish is recorded; the next
// take is refused until there is room, and then runs.
func TestFullServerDuringARun(t *testing.T) {
	b := withList(t, "fullrun", "a", "b")
	b.policy(t, "16mb", "noeviction")
	// The child waits for the test to fill the server, then outlives
	// three refreshes (-x 600ms refreshes every 200ms) on a full server.
	dir := t.TempDir()
	b.setenv("DIR=" + dir)
	p := b.start("-x", "600ms", "--cooldown", "1h", "sh", "-c", `redis-cli -p "$REDIS_PORT" rpush started "$1" >/dev/null
until [ -e "$DIR/filled" ]; do sleep 0.05; done
sleep 1`, "sh", "{}")
	item := b.popStarted(t)
	b.fill(t)
	if err := os.WriteFile(filepath.Join(dir, "filled"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	r.wantExit(t, 0)
	state := b.Client.HGetAll(ctx(t), b.key("state:"+item)).Val()
	if state["last_result"] != "success" || state["runs"] != "1" {
		t.Errorf("the run's record on a full server: %v, want a success counted", state)
	}
	if b.Client.Exists(ctx(t), b.key("lock:"+item)).Val() != 0 {
		t.Error("the run's lock is left on a full server")
	}
	if ttl := b.Client.PTTL(ctx(t), b.key("cooldown:"+item)).Val(); ttl <= 0 {
		t.Errorf("the run's cooldown on a full server: %s, want its hour", ttl)
	}
	b.wantItems("a", "b")

	r = b.run("true")
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, "Redis is full")
	b.policy(t, "0", "noeviction")
	b.run("true").wantExit(t, 0)
	b.wantItems("a", "b")
}

// TestReplicaAsURL: a replica given as --redis-url is named as one, with
// its primary's address and the fix; w8yctl check reports it.
func TestReplicaAsURL(t *testing.T) {
	primary := withList(t, "rep", "a")
	replica := startRedis(t, redistest.Args("--replicaof", "127.0.0.1", itoa(primary.Port)))
	poll.WaitFor(t, "the replica to have the list", func() bool {
		return replica.Client.LLen(ctx(t), "rep:list").Val() == 1
	})
	for _, mode := range [][]string{{"true"}, {"-c", "true"}} {
		r := runW8y(t, nil, append([]string{"-u", replica.URL, "-k", "rep"}, mode...)...)
		r.wantExit(t, 125)
		oneLine(t, r.Stderr, "is a replica (its primary is 127.0.0.1:"+itoa(primary.Port)+")")
		if !strings.Contains(r.Stderr, "--sentinel-master") {
			t.Errorf("the line does not give the fix: %s", r.Stderr)
		}
	}
	r := runCtl(t, nil, "-u", replica.URL, "-k", "rep", "check")
	if r.Code != 1 || !strings.Contains(r.Stdout, "is a replica") {
		t.Errorf("w8yctl check on a replica: %s; want exit 1 and the replica named", r)
	}
	primary.wantList("a")
}

// TestEvictionsLogged: a worker that runs on an evicting server with
// --allow-eviction logs a rise of Redis' evicted_keys.
func TestEvictionsLogged(t *testing.T) {
	b := withList(t, "evlog", "a")
	b.policy(t, "8mb", "volatile-lru")
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	p := b.start("--allow-eviction", "-c", "--cooldown", "1h", "--metrics-addr", addr, "true")
	poll.WaitFor(t, "the worker to run a", func() bool {
		return b.Client.HGet(ctx(t), b.key("state:a"), "runs").Val() == "1"
	})
	// The metrics say so, for the alert W8yRedisMayEvict.
	if got, ok := scrape(t, "http://"+addr+"/metrics")["w8y_redis_may_evict"]; !ok || got != 1 {
		t.Errorf("w8y_redis_may_evict = %v (exported: %v), want 1", got, ok)
	}
	// An application's cache keys beyond maxmemory, each with an expiry:
	// Redis evicts among the keys with one to make room.
	value := strings.Repeat("x", 16<<10)
	poll.WaitFor(t, "Redis to evict keys", func() bool {
		for i := range 256 {
			b.Client.Set(ctx(t), "cache:"+strconv.Itoa(i)+":"+strconv.FormatInt(time.Now().UnixNano(), 36), value, time.Hour)
		}
		n, _ := strconv.Atoi(redistest.Info(t, b.Client, "stats")["evicted_keys"])
		return n > 0
	})
	poll.WaitFor(t, "the worker to log the evictions", func() bool {
		return strings.Contains(p.stderrSoFar(), "Redis evicted")
	})
	p.stop(t)
}

// TestEvictionCheckedOnReconnect: a server that comes back from a restart
// with an evicting policy stops a continuous worker, with the same line
// as at start.
func TestEvictionCheckedOnReconnect(t *testing.T) {
	b := withList(t, "evre", "a")
	p := b.start("-c", "--cooldown", "1h", "true")
	poll.WaitFor(t, "the worker to run a", func() bool {
		return b.Client.HGet(ctx(t), b.key("state:a"), "runs").Val() == "1"
	})
	b.ShutDown(t)
	poll.WaitFor(t, "the worker to meet the outage", func() bool {
		return strings.Contains(p.stderrSoFar(), "retrying in")
	})
	b.RestartWith(t, redistest.Args("--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"))
	r := p.wait(t)
	r.wantEnd(t, 125, "maxmemory-policy volatile-lru")
	b.wantList("a")
}

// TestEvictionUncheckedWithoutINFO: a server whose ACL refuses INFO cannot
// be checked; the worker says so once, and runs.
func TestEvictionUncheckedWithoutINFO(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	const password = "Lamp-Tower-52"
	commands := slices.DeleteFunc(strings.Fields(aclCommands), func(c string) bool { return c == "+info" })
	s.setACLUser(t, "noinfo", password, "~ni:*", commands...)
	s.seed(t, "ni:list", "a", "b")
	url := "redis://noinfo:" + password + "@127.0.0.1:" + itoa(s.Port)
	r := runW8y(t, nil, "-u", url, "-k", "ni", "--log-level", "warn", "-c", "--until-idle", "--cooldown", "1h", "true")
	r.wantExit(t, 0)
	if n := strings.Count(r.Stderr, "could not check whether Redis may evict"); n != 1 {
		t.Errorf("said %d times that it could not check, want once: %s", n, r)
	}
	if got := s.Client.HGet(ctx(t), "ni:state:b", "runs").Val(); got != "1" {
		t.Errorf("b ran %q times, want 1", got)
	}
}

// TestDocsRedisNeeds runs the session of docs/operating.md's "The Redis
// w8y needs": the refusal it shows is the one w8y prints.
func TestDocsRedisNeeds(t *testing.T) {
	t.Parallel()
	b := setup(t, "reports", redistest.Args("--maxmemory", "64mb"))
	b.items("a")
	block := doctest.Block(t, "docs/operating.md", "console", "maxmemory-policy volatile-lru")
	lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	var last result
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if !strings.HasPrefix(line, "$ ") {
			continue
		}
		var want []string
		for j := i + 1; j < len(lines) && !strings.HasPrefix(lines[j], "$ "); j++ {
			want = append(want, lines[j])
		}
		words := strings.Fields(strings.TrimPrefix(line, "$ "))
		var got string
		switch words[0] {
		case "redis-cli":
			reply, err := b.Client.Do(ctx(t), redistest.Values(words[1:])...).Text()
			if err != nil {
				t.Fatal(errors.Join(errors.New(line), err))
			}
			got = reply
		case "w8y":
			last = runW8y(t, nil, append([]string{"-u", b.URL}, words[1:]...)...)
			got = strings.TrimRight(last.Stderr+last.Stdout, "\n")
		case "echo":
			got = itoa(last.Code)
		default:
			t.Fatalf("the session has a command the test does not run: %s", line)
		}
		if w := strings.Join(want, "\n"); got != w {
			t.Errorf("%s printed\n%s\nthe page shows\n%s", line, got, w)
		}
	}
	b.wantList("a")
}
