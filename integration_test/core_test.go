package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// started is shell that reports a child's start by pushing its item to the
// list "started", which the test waits on.
const started = `redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM" >/dev/null`

// report is a child that runs setup, reports its start and then runs rest.
func report(setup, rest string) []string {
	return []string{"sh", "-c", setup + "\n" + started + "\n" + rest}
}

func portEnv(s *server) []string { return []string{fmt.Sprintf("REDIS_PORT=%d", s.Port)} }

// TestRotationExample is the original README's example.
func TestRotationExample(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := strings.Fields("a:0 a:1 a:2 b c d e f g:0 g:1 g:2 g:3 g:4 h i j k l m")
	s.seed(t, "work:list", items...)

	r := runW8y(t, nil, "-u", s.URL, "-k", "work", "-q", "echo", "hello", "world,", "{}")
	if r.Code != 0 || r.Stdout != "hello world, a:0\n" || r.Stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
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
	var started []string
	for range items {
		started = append(started, s.popStarted(t))
	}
	slices.Sort(started)
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
			if r := p.wait(t); r.Code != 0 {
				t.Errorf("an instance without an item exited %d: %s", r.Code, r.Stderr)
			}
		case <-time.After(testTimeout):
			t.Fatal("the instances without an item did not exit")
		}
	}
	for _, item := range items {
		s.Client.RPush(ctx(t), "gate:"+item, "go")
	}
	for _, p := range procs {
		if r := p.wait(t); r.Code != 0 {
			t.Errorf("exit %d: %s", r.Code, r.Stderr)
		}
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
		r := runW8y(t, nil, append([]string{"-u", s.URL, "-k", "none"}, child...)...)
		if r.Code != 0 {
			t.Errorf("exit %d: %s", r.Code, r.Stderr)
		}
	})
	t.Run("no-work exit code", func(t *testing.T) {
		r := runW8y(t, nil, append([]string{"-u", s.URL, "-k", "none", "--no-work-exit-code", "3"}, child...)...)
		if r.Code != 3 {
			t.Errorf("exit %d, want 3: %s", r.Code, r.Stderr)
		}
	})
	t.Run("all locked", func(t *testing.T) {
		items := []string{"p", "q", "r", "s"}
		s.seed(t, "busy:list", items...)
		for _, item := range items {
			s.Client.Set(ctx(t), "busy:lock:"+item, "someone-else", time.Hour)
		}
		r := runW8y(t, nil, append([]string{"-u", s.URL, "-k", "busy"}, child...)...)
		if r.Code != 0 {
			t.Errorf("exit %d: %s", r.Code, r.Stderr)
		}
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

func TestExitCodes(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	notExecutable := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadPort := freePort(t)
	tests := []struct {
		name    string
		args    []string
		code    int
		errLine string // "" when w8y itself prints nothing on stderr
		rotated bool
	}{
		{"success", []string{"sh", "-c", "exit 0"}, 0, "", true},
		{"failure", []string{"sh", "-c", "exit 7"}, 7, "", true},
		{"killed by SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 137, "", true},
		{"not executable", []string{notExecutable}, 126, "cannot be run", false},
		{"not found", []string{"/nonexistent/job"}, 127, "not found", false},
		{"bad flag", []string{"--no-such-flag", "true"}, 125, "unknown flag", false},
		{"zero expiry", []string{"-x", "0", "true"}, 125, "--key-expiry", false},
		{"bad URL", []string{"-u", "tcp://127.0.0.1:1", "true"}, 125, "scheme", false},
		{"redis down", []string{"-u", fmt.Sprintf("redis://127.0.0.1:%d", deadPort), "true"}, 125, "connection refused", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := strings.ReplaceAll(tt.name, " ", "-")
			items := []string{"one", "two"}
			s.seed(t, key+":list", items...)
			args := append([]string{"-u", s.URL, "-k", key, "-q"}, tt.args...)
			r := runW8y(t, nil, args...)
			if r.Code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", r.Code, tt.code, r.Stderr)
			}
			if tt.errLine == "" && r.Stderr != "" {
				t.Errorf("stderr %q, want nothing with -q", r.Stderr)
			}
			if tt.errLine != "" {
				oneLine(t, r.Stderr, tt.errLine)
			}
			want := items
			if tt.rotated {
				want = []string{"two", "one"}
			}
			if got := s.list(t, key+":list"); !slices.Equal(got, want) {
				t.Errorf("list %q, want %q", got, want)
			}
			s.noLocks(t, key)
		})
	}
}

func TestWrongKeyType(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.Client.Set(ctx(t), "typed:list", "not a list", 0)
	r := runW8y(t, nil, "-u", s.URL, "-k", "typed", "true")
	if r.Code != 125 {
		t.Errorf("exit %d, want 125", r.Code)
	}
	oneLine(t, r.Stderr, "WRONGTYPE")
	if v, _ := s.Client.Get(ctx(t), "typed:list").Result(); v != "not a list" {
		t.Errorf("the key changed: %q", v)
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
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "-rw") || !strings.Contains(r.Stdout, "report-7.csv") {
		t.Errorf("ls -l: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}

	r = runW8y(t, nil, "-u", s.URL, "-k", "work", "-q", "--", "sh", "-c", `printf '%s|' "$@"`, "sh", "-k", "--quiet", "x{}y", "{}")
	if r.Code != 0 || r.Stdout != "-k|--quiet|x7y|7|" {
		t.Errorf("after --: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
}

func TestChildEnvironment(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "env:list", "item one")
	r := runW8y(t, []string{"W8Y_ENV_VAR=JOB", "W8Y_KEY_PREFIX=env", "W8Y_QUIET=true", "W8Y_REDIS_URL=" + s.URL},
		"sh", "-c", `printf '%s|%s|%s' "$JOB" "$W8Y_ITEM" "$W8Y_LOCK_KEY"`)
	if r.Code != 0 || r.Stdout != "item one|item one|env:lock:item one" || r.Stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
}

// TestSkipsItemsThatCannotBePassed checks that an item with a NUL byte, or an
// empty one, is skipped with a warning and the pass goes on.
func TestSkipsItemsThatCannotBePassed(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := []string{"bad\x00item", "", "good"}
	s.seed(t, "odd:list", items...)
	r := runW8y(t, nil, "-u", s.URL, "-k", "odd", "echo", "{}")
	if r.Code != 0 || r.Stdout != "good\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Count(r.Stderr, "skipping item") != 2 {
		t.Errorf("want two warnings about skipped items:\n%s", r.Stderr)
	}
	if got := s.list(t, "odd:list"); !slices.Equal(got, items) {
		t.Errorf("list %q, want %q", got, items)
	}
}
