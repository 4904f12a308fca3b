package integration_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// started is shell that reports a child's start by pushing its item to the
// list "started", which the test waits on.
const started = `redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null`

// TestRotationExample is the original README's example.
func TestRotationExample(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := strings.Fields("a:0 a:1 a:2 b c d e f g:0 g:1 g:2 g:3 g:4 h i j k l m")
	s.seed(t, "work:list", items...)

	r := runW8y(t, nil, "-u", s.URL, "-k", "work", "-q", "echo", "hello", "world,", "{}")
	r.mustExit(t, 0)
	r.wantStdout(t, "hello world, a:0\n")
	if r.Stderr != "" {
		t.Fatalf("stderr not empty with -q: %s", r)
	}
	want := append(slices.Clone(items[1:]), "a:0")
	if got := s.list(t, "work:list"); !slices.Equal(got, want) {
		t.Errorf("list after the run:\n%q\nwant\n%q", got, want)
	}
	s.noLocks(t, "work")
}

// TestConcurrentInstancesTakeDistinctItems starts more instances than items
// at once: each item goes to exactly one child, and the rest find every item
// locked and exit 0 without running anything.
func TestConcurrentInstancesTakeDistinctItems(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := []string{"x", "y", "z"}
	s.seed(t, "jobs:list", items...)

	const instances = 6
	procs := make([]*proc, instances)
	for i := range procs {
		// Each child holds its item until the test pushes to gate:<item>.
		args := append([]string{"-u", s.URL, "-k", "jobs"}, report(":", `redis-cli -p "$REDIS_PORT" blpop "gate:$W8Y_ITEM" 30 >/dev/null`)...)
		procs[i] = startW8y(t, portEnv(s), args...)
	}
	started := s.popEach(t, "started", len(items))
	if !slices.Equal(started, items) {
		t.Fatalf("children started on %q, want each of %q once", started, items)
	}
	// The instances that found nothing exit 0 while the others still hold
	// their items.
	holders := map[string]bool{}
	for _, item := range items {
		holder, err := s.Client.Get(ctx(t), "jobs:lock:"+item).Result()
		if err != nil {
			t.Fatalf("lock of %q: %v", item, err)
		}
		holders[holder] = true
	}
	if len(holders) != len(items) {
		t.Errorf("lock holders %v: want %d distinct tokens", holders, len(items))
	}
	// The instances that found every item locked exit 0 while the others
	// still hold their items.
	exited := make(chan *proc, instances)
	for _, p := range procs {
		go func() {
			<-p.done
			exited <- p
		}()
	}
	for range instances - len(items) {
		select {
		case p := <-exited:
			p.wait(t).wantExit(t, 0)
		case <-time.After(poll.Timeout):
			t.Fatal("the instances without an item did not exit")
		}
	}
	for _, item := range items {
		s.Client.RPush(ctx(t), "gate:"+item, "go")
	}
	for _, p := range procs {
		p.wait(t).wantExit(t, 0)
	}
	if n, _ := s.Client.LLen(ctx(t), "started").Result(); n != 0 {
		t.Errorf("%d more children started than there are items", n)
	}
	if got := s.list(t, "jobs:list"); len(got) != len(items) {
		t.Errorf("list changed length: %q", got)
	}
	s.noLocks(t, "jobs")
}

func TestNothingEligible(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	marker := filepath.Join(t.TempDir(), "ran")
	child := []string{"touch", marker}

	t.Run("missing list", func(t *testing.T) {
		// A mistyped prefix must not look like a list whose items are all
		// taken (see TestAMissingListIsAMistake).
		r := runW8y(t, nil, append([]string{"-u", s.URL, "-k", "none", "-t", "--no-work-exit-code", "3"}, child...)...)
		r.wantEnd(t, 120, `w8y: the list "none:list" does not exist or is empty: is --key-prefix (W8Y_KEY_PREFIX) right?`)
	})
	items := []string{"p", "q", "r", "s"}
	s.seed(t, "busy:list", items...)
	for _, item := range items {
		s.Client.Set(ctx(t), "busy:lock:"+item, "someone-else", time.Hour)
	}
	t.Run("no-work exit code", func(t *testing.T) {
		r := runW8y(t, nil, append([]string{"-u", s.URL, "-k", "busy", "--no-work-exit-code", "3"}, child...)...)
		r.wantExit(t, 3)
	})
	t.Run("all locked", func(t *testing.T) {
		r := runW8y(t, nil, append([]string{"-u", s.URL, "-k", "busy"}, child...)...)
		r.wantExit(t, 0)
		// One full pass rotates every item once: the order is as before.
		if got := s.list(t, "busy:list"); !slices.Equal(got, items) {
			t.Errorf("list after one pass %q, want %q", got, items)
		}
		for _, item := range items {
			v, _ := s.Client.Get(ctx(t), "busy:lock:"+item).Result()
			ttl, _ := s.Client.TTL(ctx(t), "busy:lock:"+item).Result()
			if v != "someone-else" || ttl < 59*time.Minute {
				t.Errorf("someone else's lock on %q changed: %q, TTL %s", item, v, ttl)
			}
		}
	})
	if _, err := os.Stat(marker); err == nil {
		t.Error("a child ran although nothing was eligible")
	}
}

// TestExitCodes: w8y exits with the child's code, and 128+N for a child
// killed by signal N, printing nothing itself with -q. Bad input, which w8y
// answers with codes of its own, is TestBadInput's.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"success", []string{"sh", "-c", "exit 0"}, 0},
		{"failure", []string{"sh", "-c", "exit 7"}, 7},
		{"killed by SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 137},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := strings.ReplaceAll(tt.name, " ", "-")
			s.seed(t, key+":list", "one", "two")
			r := runW8y(t, nil, append([]string{"-u", s.URL, "-k", key, "-q"}, tt.args...)...)
			r.wantExit(t, tt.code)
			if r.Stderr != "" {
				t.Errorf("stderr not empty with -q: %s", r)
			}
			if got := s.list(t, key+":list"); !slices.Equal(got, []string{"two", "one"}) {
				t.Errorf("list %q, want [two one]", got)
			}
			s.noLocks(t, key)
		})
	}
}

// TestArgumentsAfterTheExecutable checks that option parsing stops at the
// executable, so its own flags reach it, and that {} is replaced inside
// arguments.
func TestArgumentsAfterTheExecutable(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "report-7.csv"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.seed(t, "work:list", "7")

	r := runW8y(t, nil, "-u", s.URL, "-k", "work", "-q", "ls", "-l", dir+"/report-{}.csv")
	r.wantExit(t, 0)
	if !strings.HasPrefix(r.Stdout, "-rw") || !strings.Contains(r.Stdout, "report-7.csv") {
		t.Errorf("ls -l did not list the file: %s", r)
	}

	r = runW8y(t, nil, "-u", s.URL, "-k", "work", "-q", "--", "sh", "-c", `printf '%s|' "$@"`, "sh", "-k", "--quiet", "x{}y", "{}")
	r.wantExit(t, 0)
	r.wantStdout(t, "-k|--quiet|x7y|7|")
}

func TestChildEnvironment(t *testing.T) {
	s := withList(t, "env", "item one")
	r := runW8y(t, append(s.env, "W8Y_ENV_VAR=JOB", "W8Y_KEY_PREFIX=env", "W8Y_QUIET=true", "W8Y_REDIS_URL="+s.URL),
		"sh", "-c", `printf '%s|%s|%s|' "$JOB" "$W8Y_ITEM" "$W8Y_LOCK_KEY"; redis-cli -p "$REDIS_PORT" get "$W8Y_LOCK_KEY" | tr -d '\n'; printf '|%s' "$W8Y_HOLDER"`)
	// W8Y_HOLDER is the lock's value while the child runs.
	prefix := "item one|item one|env:lock:item one|"
	holder, _ := strings.CutPrefix(r.Stdout, prefix)
	r.wantExit(t, 0)
	if !strings.HasPrefix(r.Stdout, prefix) || r.Stderr != "" {
		t.Errorf("want stdout starting %q and nothing on stderr, got %s", prefix, r)
	}
	if token, env, _ := strings.Cut(holder, "|"); token == "" || token != env {
		t.Errorf("the lock held %q, W8Y_HOLDER is %q", token, env)
	}
}

// TestChildGetsNoPassword: whichever way w8y was given the password, the
// child's environment does not carry it (it gets W8Y_* otherwise).
func TestChildGetsNoPassword(t *testing.T) {
	t.Parallel()
	s := startRedis(t, redistest.Password("right-horse-battery"))
	s.seed(t, "pw:list", "a", "b")
	for _, env := range [][]string{
		{"W8Y_REDIS_URL=redis://:right-horse-battery@127.0.0.1:" + itoa(s.Port)},
		{"W8Y_REDIS_URL=redis://127.0.0.1:" + itoa(s.Port), "W8Y_REDIS_PASSWORD=right-horse-battery"},
	} {
		r := runW8y(t, append(env, "W8Y_KEY_PREFIX=pw", "W8Y_QUIET=true"), "env")
		r.wantExit(t, 0)
		if strings.Contains(r.Stdout, "horse") || !strings.Contains(r.Stdout, "W8Y_REDIS_URL=redis://") {
			t.Errorf("the child's environment:\n%s", r.Stdout)
		}
	}
}
