package integration_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	procscan "github.com/w8y/w8y/internal/proc"

	"github.com/w8y/w8y/internal/poll"
	"golang.org/x/sys/unix"
)

// checkLiveness checks the first promise over a chaos run from began to
// ended: each of items that no fault touched (paused or removed) started
// at least once, as the events stream's start events say. It returns the
// longest wait of any of them between two starts (or from began to its
// first, or from its last to ended), and adds a violation for each item
// that never started.
func checkLiveness(t *testing.T, s *server, items []string, touched map[string]bool, began, ended time.Time, violations *[]string) (time.Duration, string) {
	starts := map[string][]time.Time{}
	for _, e := range s.Client.XRange(ctx(t), "chaos:events", "-", "+").Val() {
		if e.Values["type"] != "start" {
			continue
		}
		item, _ := e.Values["item"].(string)
		ms, err := strconv.ParseInt(strings.SplitN(e.ID, "-", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("event ID %q", e.ID)
		}
		starts[item] = append(starts[item], time.UnixMilli(ms))
	}
	var longest time.Duration
	var longestItem string
	for _, item := range items {
		if touched[item] {
			continue
		}
		if len(starts[item]) == 0 {
			*violations = append(*violations, fmt.Sprintf("item %q never started in %s", item, ended.Sub(began).Round(time.Second)))
			continue
		}
		at := append(append([]time.Time{began}, starts[item]...), ended)
		for i := 1; i < len(at); i++ {
			if wait := at[i].Sub(at[i-1]); wait > longest {
				longest, longestItem = wait, item
			}
		}
	}
	return longest, longestItem
}

// holderOfLongItem returns the index of a worker that holds the lock of an
// item ending in 0 or 5 (see chaosChild), or -1.
func holderOfLongItem(t *testing.T, s *server, workers []*chaosWorker) int {
	for _, key := range s.keys(t, "chaos:lock:*") {
		if !strings.HasSuffix(key, "0") && !strings.HasSuffix(key, "5") {
			continue
		}
		token, _ := s.Client.Get(ctx(t), key).Result()
		for i, w := range workers {
			if strings.Contains(token, ":"+itoa(w.p.cmd.Process.Pid)+":") {
				return i
			}
		}
	}
	return -1
}

// stopPastLease SIGSTOPs a worker that holds a lock (a long item's where
// one does, see holderOfLongItem) until each item it held has been tried by
// another run, which it can be once the lock has expired, then SIGCONTs it:
// as a debugger or a freezer on its cgroup would. Its guard must have
// stopped its children before their locks could expire: a child that ran
// on would hold the item's flock, and the other run would record an
// overlap (see chaosChild). It reports false if no worker held a lock.
func stopPastLease(t *testing.T, s *server, workers []*chaosWorker, ttl time.Duration, dir string) bool {
	i := holderOfLongItem(t, s, workers)
	held := map[string]int{} // item: its runs and overlaps so far
	tried := func(item string) int {
		n := 0
		for _, line := range slices.Concat(lines(t, filepath.Join(dir, "runs")), lines(t, filepath.Join(dir, "overlaps"))) {
			if line == item {
				n++
			}
		}
		return n
	}
	for _, key := range s.keys(t, "chaos:lock:*") {
		token, _ := s.Client.Get(ctx(t), key).Result()
		for j, w := range workers {
			if strings.Contains(token, ":"+itoa(w.p.cmd.Process.Pid)+":") && (i < 0 || i == j) {
				item := strings.TrimPrefix(key, "chaos:lock:")
				i, held[item] = j, tried(item)
			}
		}
	}
	if i < 0 {
		return false
	}
	w := workers[i].p
	w.signal(t, syscall.SIGSTOP)
	// Bounded all the same: an item may be left untried (paused by the
	// operator's faults, say), and the test goes on.
	poll.Poll(10*ttl, func() bool {
		for item, before := range held {
			if tried(item) == before {
				return false
			}
		}
		return true
	})
	w.signal(t, syscall.SIGCONT)
	return true
}

// exitedAt blocks until the process pid has exited, without reaping it.
func exitedAt(t *testing.T, pid int) {
	t.Helper()
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	if err != nil && !errors.Is(err, syscall.ECHILD) { // ECHILD: already reaped
		t.Fatalf("waitid %d: %v", pid, err)
	}
}

// waitMarkerGone waits until no process carries marker in its environment,
// and returns the pids of those that still do after timeout.
func waitMarkerGone(marker string, timeout time.Duration) []int {
	var left []int
	poll.Poll(timeout, func() bool {
		left = procscan.ProcessesWithEnv(marker)
		return len(left) == 0
	})
	return left
}

// mostStarts is the most of starts (Unix milliseconds) in any window of
// length window.
func mostStarts(starts []int64, window time.Duration) int {
	most, _ := mostInWindow(starts, window.Milliseconds())
	return most
}
