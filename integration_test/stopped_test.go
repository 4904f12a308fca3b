package integration_test

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/poll"
)

// flockChild holds an exclusive flock(1) on a file named for its item for
// as long as any process of its run lives, as the chaos test's children do,
// and reports "ITEM PID HOLDER" on the list "started" once it holds it, PID
// being the process that holds it. A run that overlaps another of its item
// cannot take it, and records the overlap in $DIR/overlaps instead.
const flockChild = `flock -n -E 99 "$DIR/lock.$W8Y_ITEM" sh -c ` +
	`'redis-cli -p "$REDIS_PORT" rpush started "$W8Y_ITEM $$ $W8Y_HOLDER" >/dev/null; exec sleep 1000'; ` +
	`if [ $? = 99 ]; then echo "$W8Y_ITEM" >> "$DIR/overlaps"; fi`

// startedRun is what a flockChild reported of its start.
type startedRun struct {
	item   string
	pid    int
	holder string
}

// popFlockRun waits for a flockChild's start.
func (b *bundle) popFlockRun() startedRun {
	b.t.Helper()
	f := strings.Fields(b.pop(b.t, "started"))
	if len(f) != 3 {
		b.t.Fatalf("a child reported %q, want its item, pid and holder", f)
	}
	return startedRun{item: f[0], pid: atoi(b.t, f[1]), holder: f[2]}
}

// TestStoppedWorkerNeverOutlivesItsLease is the scenario of a worker
// stopped past its lease (SIGSTOP, as a debugger or a freezer on its cgroup
// would): two --continuous workers with a lease of 3s over the same items,
// whose children hold a flock on a file named for their item. The first
// worker's guard stops its children while the worker is still stopped,
// before their locks could expire, so the second worker's children, which
// take the items once the locks have expired, find the flock free: no
// overlap. Once continued, the first worker says so once for each run and
// records it as a lost lock (exit code 122, event lock_lost), and goes on.
// With --parallel, each child has its own deadline.
func TestStoppedWorkerNeverOutlivesItsLease(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		items []string
		args  []string
	}{
		{"one item", []string{"a"}, nil},
		{"--parallel 2", []string{"a", "b"}, []string{"--parallel", "2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "sp")
			s.items(tt.items...)
			dir := t.TempDir()
			s.setenv("DIR=" + dir)
			args := slices.Concat([]string{"-c", "-x", "3"}, tt.args, []string{"sh", "-c", flockChild})
			// At error level, stderr also carries the line that tells of a
			// failed run, with its exit code, as cron would mail it.
			first := s.start(append([]string{"--log-level", "error"}, args...)...)
			var firsts []startedRun
			for range tt.items {
				firsts = append(firsts, s.popFlockRun())
			}
			second := s.start(args...)

			first.signal(t, syscall.SIGSTOP)
			waitState(t, first.cmd.Process.Pid, "T")
			for _, run := range firsts {
				processGone(t, run.pid)
			}
			if state := processState(first.cmd.Process.Pid); state != "T" {
				t.Fatalf("the first worker is in state %q, not stopped: its guard, not w8y, must have stopped its children", state)
			}
			// The second worker takes each item once its lock has expired,
			// and its child finds the flock free.
			for range tt.items {
				if run := s.popFlockRun(); slices.ContainsFunc(firsts, func(f startedRun) bool { return f.holder == run.holder }) {
					t.Errorf("%s started again under the first worker's holder %s while it was stopped", run.item, run.holder)
				}
			}

			first.signal(t, syscall.SIGCONT)
			const told = "lock lost while w8y was stopped or stalled: its guard stopped the child"
			poll.WaitFor(t, "the first worker to tell of each stop", func() bool {
				return strings.Count(first.stderrSoFar(), told) == len(tt.items) &&
					strings.Count(first.stderrSoFar(), "(exit code 122)") == len(tt.items)
			})
			for _, run := range firsts {
				poll.WaitFor(t, "the first run of "+run.item+" to be recorded", func() bool {
					return endOf(t, s, run.holder) != nil
				})
				if end := endOf(t, s, run.holder); end["type"] != "lock_lost" || end["result"] != "lock_lost" {
					t.Errorf("the first run of %s ended with the event %v, want a lost lock", run.item, end)
				}
				failed := fmt.Sprintf(`w8y: item %q failed: lock lost: w8y was stopped or stalled past its lease, and its guard acted `, run.item)
				if n := strings.Count(first.stderrSoFar(), failed); n != 1 {
					t.Errorf("stderr tells %d times that %s failed, want once:\n%s", n, run.item, first.stderrSoFar())
				}
			}
			drain(t, []*proc{first, second})
			if n := strings.Count(first.stderrSoFar(), told); n != len(tt.items) {
				t.Errorf("the first worker told of the guard's stops %d times, want once for each of %d runs:\n%s", n, len(tt.items), first.stderrSoFar())
			}
			noOverlaps(t, dir)
		})
	}
}

// endOf returns the event that ended the run of holder, or nil.
func endOf(t *testing.T, s *bundle, holder string) map[string]any {
	t.Helper()
	for _, e := range s.Client.XRange(ctx(t), s.key("events"), "-", "+").Val() {
		if e.Values["holder"] == holder && e.Values["type"] != "start" {
			return e.Values
		}
	}
	return nil
}
