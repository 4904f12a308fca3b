package integration_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/status"
)

// summary is the summary that w8y --status --json prints with args.
func (b *bundle) summary(args ...string) status.Summary {
	b.t.Helper()
	r := b.run(append([]string{"--status", "--json"}, args...)...)
	r.mustExit(b.t, 0)
	var got struct {
		Summary status.Summary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
		b.t.Fatalf("--status --json %q: %v\n%s", args, err, r.Stdout)
	}
	return got.Summary
}

// counts is what --status --json counts: whole, by reading every item
// (the reference), and without the list (--limit 0, from the indexes).
func (b *bundle) counts() (whole, indexed status.Summary) {
	b.t.Helper()
	whole = b.summary()
	indexed = b.summary("--limit", "0")
	if whole.WholeReadAt != nil {
		b.t.Errorf("a whole read's summary says it was counted at %d: it counts itself", *whole.WholeReadAt)
	}
	if indexed.WholeReadAt == nil {
		b.t.Errorf("--limit 0 read the list whole: it should count from the indexes, with the last whole read's duplicates")
	}
	indexed.WholeReadAt, whole.WholeReadAt = nil, nil
	return whole, indexed
}

// wantCounts fails the test unless the summary without the list is the
// whole read's, and the whole read's is want.
func (b *bundle) wantCounts(when string, want status.Summary) {
	b.t.Helper()
	whole, indexed := b.counts()
	if whole != want {
		b.t.Errorf("%s: a whole read counts\n%+v\nwant\n%+v", when, whole, want)
	}
	if indexed != whole {
		b.t.Errorf("%s: the summary without the list counts\n%+v\na whole read\n%+v", when, indexed, whole)
	}
}

// TestCountsWithoutTheList: the summary that does not read the list
// (--status --limit 0, the dashboard's counts) counts what a whole read
// counts, in every state an item can be in: never run, running (taken by
// the pass and by --item, its lock refreshed), cooling, backing off,
// failing, paused (idle, running, cooling, backing off; with and without
// an expiry), resumed while it cools, run now, due after its cooldown
// expired, removed with w8yctl while it runs, and added and removed by
// outside writers, a duplicate and a blocked item among them.
func TestCountsWithoutTheList(t *testing.T) {
	b := withList(t, "cnt", "n0", "n1", "n2", "c1", "c2", "c3", "c4", "c5", "f1", "f2", "p1", "r1")
	b.wantCounts("never run", status.Summary{Items: 12, Idle: 12})

	for _, item := range []string{"c1", "c2", "c3", "c5"} {
		b.run("-q", "--item", item, "--cooldown", "1h", "true").mustExit(t, 0)
	}
	b.run("-q", "--item", "c4", "--cooldown", "300ms", "true").mustExit(t, 0)
	b.run("-q", "--item", "f1", "--failure-backoff", "1h", "false").mustExit(t, 1)
	b.run("-q", "--item", "f2", "false").mustExit(t, 1)
	// A run of r1 by name, and one that the pass takes (n0, the first
	// item free), each with a lock of 1.5s that its lease refreshes.
	named := b.start("-q", "-x", "1.5", "--item", "r1", "sleep", "60")
	taken := b.start("-q", "-x", "1.5", "sleep", "60")
	t.Cleanup(named.kill)
	t.Cleanup(taken.kill)
	for _, item := range []string{"r1", "n0"} {
		first := float64(0)
		poll.WaitFor(t, "a refresh of "+item+"'s lock", func() bool {
			score, err := b.Client.ZScore(ctx(t), b.key("locks"), item).Result()
			if err != nil {
				return false
			}
			if first == 0 {
				first = score
			}
			return score > first
		})
	}
	poll.WaitFor(t, "the end of c4's cooldown", func() bool { return b.Client.Exists(ctx(t), b.key("cooldown:c4")).Val() == 0 })
	b.wantCounts("run", status.Summary{Items: 12, Running: 2, Cooling: 4, BackingOff: 1, Failing: 2, Idle: 5})

	b.ctl("pause", "p1").mustExit(t, 0)
	b.ctl("pause", "c2", "--for", "1h").mustExit(t, 0)
	b.ctl("pause", "r1").mustExit(t, 0)
	b.ctl("pause", "f1", "--for", "1h").mustExit(t, 0)
	b.ctl("pause", "c5").mustExit(t, 0)
	b.ctl("resume", "c5").mustExit(t, 0)
	b.ctl("run-now", "c3").mustExit(t, 0)
	b.wantCounts("paused", status.Summary{Items: 12, Running: 2, Paused: 4, Cooling: 2, Failing: 2, Idle: 5})

	// Outside writers: two items pushed, one of them twice; an idle item
	// removed; a lock key of another type.
	b.Client.RPush(ctx(t), b.key("list"), "a1", "a2", "a2")
	b.Client.LRem(ctx(t), b.key("list"), 0, "n1")
	b.Client.HSet(ctx(t), b.key("lock:n2"), "not", "a lock")
	b.wantCounts("written by others", status.Summary{Items: 14, Duplicates: 1, Running: 2, Paused: 4, Cooling: 2, Failing: 2, Idle: 5, Blocked: 1})

	// w8yctl remove of a running item: the list no longer holds it, and
	// its run, which goes on, counts for nothing.
	b.ctl("remove", "n0").mustExit(t, 0)
	b.wantCounts("removed while it runs", status.Summary{Items: 13, Duplicates: 1, Running: 1, Paused: 4, Cooling: 2, Failing: 2, Idle: 5, Blocked: 1})

	// What drifts: a cooling item removed by an outside LREM (the summary
	// counts it until its cooldown ends), a cooldown deleted by hand (until
	// the fleet's sweep), a cooldown set by hand. w8yctl check finds each,
	// and --fix mends them.
	b.Client.LRem(ctx(t), b.key("list"), 0, "c1")
	b.Client.Del(ctx(t), b.key("cooldown:c5"))
	b.Client.Set(ctx(t), b.key("cooldown:a1"), "by hand", time.Hour)
	whole, indexed := b.counts()
	if whole == indexed {
		t.Errorf("after writes by hand, the summary without the list still counts as a whole read: %+v", whole)
	}
	r := b.ctl("check")
	r.wantExit(t, 1)
	for _, found := range []string{`orphan_due: the due index holds "c1"`, `counts_drift: the summaries count "c5"`, `counts_drift: the summaries count "a1"`} {
		if !strings.Contains(r.Stdout, found) {
			t.Errorf("w8yctl check does not find %s:\n%s", found, r.Stdout)
		}
	}
	// The lock of another type is left to an operator: exit 1.
	b.ctl("check", "--fix").mustExit(t, 1)
	b.wantCounts("mended by w8yctl check --fix", status.Summary{Items: 11, Running: 1, Paused: 4, Cooling: 1, Failing: 2, Idle: 5, Blocked: 1})
}

// TestCountsOfAListRunBefore: a list that a fleet before the counts'
// indexes ran is recorded as such by the first worker of this version, and
// counted by reading it whole until w8yctl check --fix indexes it.
func TestCountsOfAListRunBefore(t *testing.T) {
	b := withList(t, "old", "a", "b", "c")
	// What an earlier fleet leaves: its fencing token, its marks, a
	// cooldown that no index mirrors.
	b.Client.Set(ctx(t), b.key("fence"), 7, 0)
	b.Client.Set(ctx(t), b.key("cooldown:b"), "earlier", time.Hour)
	b.run("-q", "--item", "a", "true").mustExit(t, 0)
	if v := b.Client.Get(ctx(t), b.key("schema")).Val(); v != "1" {
		t.Errorf("the first worker recorded version %q on a list run before, want 1", v)
	}
	want := status.Summary{Items: 3, Cooling: 1, Idle: 2}
	if got := b.summary("--limit", "0"); got.WholeReadAt != nil || got.Cooling != 1 {
		t.Errorf("a list run before is counted without a whole read: %+v", got)
	}
	r := b.ctl("check")
	r.wantExit(t, 1)
	if !strings.Contains(r.Stdout, "not_indexed:") {
		t.Errorf("w8yctl check does not say the list is not indexed:\n%s", r.Stdout)
	}
	b.ctl("check", "--fix").mustExit(t, 0)
	if v := b.Client.Get(ctx(t), b.key("schema")).Val(); v != "2" {
		t.Errorf("check --fix recorded version %q, want 2", v)
	}
	b.wantCounts("indexed", want)
	b.ctl("check").mustExit(t, 0)
}
