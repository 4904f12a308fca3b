package integration_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
)

// TestCtlCheck seeds a mess of each kind that check finds beside a running
// worker: check reports each, with the command that repairs it; --fix
// repairs exactly the safe ones and says so, a second check finds only the
// locks and the item that it leaves to an operator, and the running
// worker's lock, and a removed item's lock that expires, are untouched.
func TestCtlCheck(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := s.Client
	s.seed(t, "ck:list", "run")
	w := startW8y(t, portEnv(s), append([]string{"-u", s.URL, "-k", "ck", "-q"}, gated...)...)
	if got := s.popStarted(t); got != "run" {
		t.Fatalf("the worker took %q, want run", got)
	}
	holder := c.Get(ctx(t), "ck:lock:run").Val()
	c.RPush(ctx(t), "ck:list", "a", "b", "a", "c", "a", "")
	c.Set(ctx(t), "ck:lock:b", "lost-holder", 0)
	c.HSet(ctx(t), "ck:lock:c", "f", "v")
	c.HSet(ctx(t), "ck:cooldown:a", "f", "v")
	c.RPush(ctx(t), "ck:backoff:a", "x")
	c.Set(ctx(t), "ck:pause:c", "x", time.Hour)
	c.HSet(ctx(t), "ck:state:old", "runs", 3)
	c.Set(ctx(t), "ck:cooldown:old", "x", time.Hour)
	c.HSet(ctx(t), "ck:pause:old", "reason", "r")
	c.HSet(ctx(t), "ck:settings:old", "timeout", "1h0m0s")
	c.ZAdd(ctx(t), "ck:due", redis.Z{Member: "old"}, redis.Z{Member: "a"})
	// An item removed while it runs: its lock ends by itself.
	c.Set(ctx(t), "ck:lock:old", "removed-run", time.Hour)
	// Keys of another fleet, and w8y's own keys: none is a finding.
	c.Set(ctx(t), "ckx:lock:z", "x", 0)
	c.Set(ctx(t), "ck:fence", "7", 0)

	at := []string{"-u", s.URL, "-k", "ck"}
	// The repairs carry the connection options, so that pasted into a
	// shell they go to this Redis, not to whatever listens on 6379.
	ctl := "w8yctl -u " + s.URL + " -k ck"
	cli := fmt.Sprintf("redis-cli -h 127.0.0.1 -p %d", s.Port)
	want := []string{
		`cannot_run: "" can never run: it is empty, and every worker skips it; to repair: ` + ctl + ` remove -- ''`,
		`duplicate: "a" is in the list 3 times, and runs 3 times as often as the others; to repair: ` + ctl + ` check --fix`,
		`lock_without_expiry: the lock "ck:lock:b", held by "lost-holder", has no expiry: if its holder is gone, no worker will take "b" again; to repair: ` + cli + ` DEL 'ck:lock:b'  # once no run holds it`,
		`orphan_due: the due index holds "old", which the list does not; to repair: ` + ctl + ` check --fix`,
		`orphan_key: "ck:cooldown:old" belongs to "old", which the list does not hold; to repair: ` + ctl + ` check --fix`,
		`orphan_key: "ck:pause:old" belongs to "old", which the list does not hold; to repair: ` + ctl + ` check --fix`,
		`orphan_key: "ck:settings:old" belongs to "old", which the list does not hold; to repair: ` + ctl + ` check --fix`,
		`orphan_key: "ck:state:old" belongs to "old", which the list does not hold; to repair: ` + ctl + ` check --fix`,
		`wrong_type: "ck:backoff:a" is a list, not a string (w8y writes a string there), and holds "a" up for good (it has no expiry); to repair: ` + ctl + ` check --fix`,
		`wrong_type: "ck:cooldown:a" is a hash, not a string (w8y writes a string there), and holds "a" up for good (it has no expiry); to repair: ` + ctl + ` check --fix`,
		`wrong_type: the lock "ck:lock:c" is a hash, not a string: no worker can take "c" until it is deleted; to repair: ` + cli + ` DEL 'ck:lock:c'`,
	}
	pauseLine := `wrong_type: "ck:pause:c" is a string, not a hash (w8y writes a hash there), and holds "c" up for `
	before := s.snapshot(t)
	r := runCtl(t, nil, append(at, "check")...)
	r.wantExit(t, 1)
	got := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	if len(got) != len(want)+2 || !strings.HasPrefix(got[len(got)-2], pauseLine) || got[len(got)-1] != `found 12 problems under "ck:"` ||
		!slices.Equal(got[:len(got)-2], want) || r.Stderr != "" {
		t.Errorf("check printed:\n%s\nwant:\n%s\n%s...\nfound 12 problems under \"ck:\"\n(stderr %q)", r.Stdout, strings.Join(want, "\n"), pauseLine, r.Stderr)
	}
	if after := s.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("check without --fix changed Redis")
	}

	r = runCtl(t, nil, append(at, "check", "--json")...)
	r.wantExit(t, 1)
	var findings []struct {
		Kind, Item, Key, Problem string
		Fixed, Remedy            *string
	}
	if err := json.Unmarshal([]byte(r.Stdout), &findings); err != nil || len(findings) != 12 {
		t.Fatalf("check --json: %v\n%s", err, r)
	}
	if f := findings[2]; f.Kind != "lock_without_expiry" || f.Item != "b" || f.Key != "ck:lock:b" || f.Fixed != nil || f.Remedy == nil {
		t.Errorf("check --json's third finding: %+v", f)
	}

	r = runCtl(t, nil, append(at, "check", "--fix")...)
	r.wantExit(t, 1)
	for _, line := range []string{
		`duplicate: "a" is in the list 3 times, and runs 3 times as often as the others: removed 2 extra occurrences, kept the first`,
		`orphan_due: the due index holds "old", which the list does not: removed the entry`,
		`orphan_key: "ck:state:old" belongs to "old", which the list does not hold: deleted it`,
		`wrong_type: "ck:cooldown:a" is a hash, not a string (w8y writes a string there), and holds "a" up for good (it has no expiry): deleted it`,
		`wrong_type: the lock "ck:lock:c" is a hash, not a string: no worker can take "c" until it is deleted; to repair: ` + cli + ` DEL 'ck:lock:c'`,
		`orphan_key: "ck:settings:old" belongs to "old", which the list does not hold: deleted it`,
		`found 12 problems under "ck:", repaired 9`,
	} {
		if !strings.Contains(r.Stdout, line+"\n") {
			t.Errorf("check --fix did not print %q:\n%s", line, r.Stdout)
		}
	}
	if got := s.list(t, "ck:list"); !slices.Equal(got, []string{"run", "a", "b", "c", ""}) {
		t.Errorf("the list after check --fix: %q", got)
	}
	for _, key := range []string{"ck:cooldown:a", "ck:backoff:a", "ck:pause:c", "ck:state:old", "ck:cooldown:old", "ck:pause:old"} {
		if c.Exists(ctx(t), key).Val() != 0 {
			t.Errorf("check --fix left %s", key)
		}
	}
	// The worker's take put "run" there, due when its lock would expire.
	due := c.ZRange(ctx(t), "ck:due", 0, -1).Val()
	slices.Sort(due)
	if !slices.Equal(due, []string{"a", "run"}) {
		t.Errorf("the due index after check --fix: %q", due)
	}
	for key, value := range map[string]string{"ck:lock:run": holder, "ck:lock:old": "removed-run", "ck:lock:b": "lost-holder", "ckx:lock:z": "x", "ck:fence": "7"} {
		if got := c.Get(ctx(t), key).Val(); got != value {
			t.Errorf("%s is %q after check --fix, want %q", key, got, value)
		}
	}
	if ttl := c.PTTL(ctx(t), "ck:lock:run").Val(); ttl <= 0 {
		t.Errorf("the running worker's lock has PTTL %v after check --fix", ttl)
	}
	if c.Type(ctx(t), "ck:lock:c").Val() != "hash" {
		t.Errorf("check --fix touched the lock of another type")
	}

	// What is left is an operator's: the remedies, run, leave none.
	r = runCtl(t, nil, append(at, "check")...)
	r.wantExit(t, 1)
	if n := strings.Count(r.Stdout, "\n"); n != 4 || !strings.Contains(r.Stdout, "cannot_run:") || !strings.Contains(r.Stdout, "lock_without_expiry:") ||
		!strings.Contains(r.Stdout, `wrong_type: the lock "ck:lock:c"`) {
		t.Errorf("the second check:\n%s", r.Stdout)
	}
	// Run as a shell runs them, where W8Y_REDIS_URL is not set. A remedy
	// without this server's port is not run: it would go to port 6379.
	r = runCtl(t, nil, append(at, "check", "--json")...)
	findings = nil
	if err := json.Unmarshal([]byte(r.Stdout), &findings); err != nil || len(findings) != 3 {
		t.Fatalf("check --json: %v\n%s", err, r)
	}
	path := commandsPath(t)
	for _, f := range findings {
		if f.Remedy == nil || !strings.HasPrefix(*f.Remedy, ctl+" ") && !strings.HasPrefix(*f.Remedy, cli+" ") {
			t.Errorf("the repair of %s is not one for this Redis: %v", f.Key, f.Remedy)
			continue
		}
		r := startCommand(t, []string{path}, "bash", "-c", *f.Remedy).wait(t)
		r.mustExit(t, 0)
	}
	r = runCtl(t, nil, append(at, "check")...)
	r.mustExit(t, 0)
	r.wantStdout(t, "found 0 problems under \"ck:\"\n")
	r = runCtl(t, nil, append(at, "check", "--json")...)
	r.mustExit(t, 0)
	r.wantStdout(t, "[]\n")

	c.RPush(ctx(t), "gate:run", "0")
	w.wait(t).wantExit(t, 0)
}

// TestCtlCheckCluster: on a Cluster, with a hash tag in the prefix and
// without (where the keys lie on every node), check finds and --fix
// repairs a duplicate and the keys of an item gone from the list, beside a
// worker whose locks it leaves alone.
func TestCtlCheckCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	for _, prefix := range []string{"{ck}:", "ck:"} {
		t.Run(prefix, func(t *testing.T) {
			at := []string{"--redis-cluster", "-u", c.URL, "-k", prefix}
			items := []string{"a", "b", "c", "d", "e", "f"}
			if err := c.Client.RPush(ctx(t), prefix+"list", "a", "b", "c", "d", "e", "f", "a").Err(); err != nil {
				t.Fatal(err)
			}
			var gone []string
			for i := range 20 {
				key := fmt.Sprintf("%sstate:gone%d", prefix, i)
				c.Client.HSet(ctx(t), key, "runs", 1)
				gone = append(gone, key)
			}
			w := startW8y(t, nil, append(at, "-c", "-q", "--idle-wait", "50ms", "--cooldown", "50ms", "true")...)
			r := runCtl(t, nil, append(at, "check")...)
			r.wantExit(t, 1)
			if n := strings.Count(r.Stdout, "orphan_key:"); n != 20 || !strings.Contains(r.Stdout, `duplicate: "a" is in the list 2 times`) {
				t.Errorf("check on the Cluster:\n%s", r)
			}
			r = runCtl(t, nil, append(at, "check", "--fix")...)
			r.mustExit(t, 0)
			for _, key := range gone {
				if c.Client.Exists(ctx(t), key).Val() != 0 {
					t.Errorf("check --fix left %s", key)
				}
			}
			got, _ := c.Client.LRange(ctx(t), prefix+"list", 0, -1).Result()
			slices.Sort(got)
			if !slices.Equal(got, items) {
				t.Errorf("the list after check --fix: %q", got)
			}
			r = runCtl(t, nil, append(at, "check")...)
			r.mustExit(t, 0)
			poll.WaitFor(t, "the worker to run every item", func() bool {
				for _, item := range items {
					if c.Client.Exists(ctx(t), prefix+"state:"+item).Val() == 0 {
						return false
					}
				}
				return true
			})
			w.stop(t)
		})
	}
}

// TestDocsCtlCheck runs docs/operating.md's check session, a command at a
// time, on the mess that the page describes, and checks that it prints what
// the page shows and ends each command as the page says: 1, 0, 0.
func TestDocsCtlCheck(t *testing.T) {
	s := withList(t, "work", "report:alpha", "report:beta", "report:alpha")
	s.Client.HSet(ctx(t), s.key("state:report:old"), "runs", 3)
	s.Client.HSet(ctx(t), s.key("cooldown:report:beta"), "by", "hand")
	session := doctest.Block(t, "docs/operating.md", "sh", "w8yctl -k work check --fix")
	path := commandsPath(t)
	var stdout strings.Builder
	var codes []int
	for _, line := range strings.Split(strings.TrimSpace(session), "\n") {
		r := startCommand(t, []string{path, "W8Y_REDIS_URL=" + s.URL}, "bash", "-c", line).wait(t)
		if r.Stderr != "" {
			t.Errorf("%q wrote on stderr: %s", line, r)
		}
		stdout.WriteString(r.Stdout)
		codes = append(codes, r.Code)
	}
	// The page's server, where the repairs go.
	printed := strings.ReplaceAll(stdout.String(), "-u "+s.URL+" ", "-u redis://redis.internal:6379 ")
	if want := doctest.Block(t, "docs/operating.md", "", `found 3 problems under "work:"`); printed != want {
		t.Errorf("the session printed:\n%s\nwant the page's:\n%s", stdout.String(), want)
	}
	if !slices.Equal(codes, []int{1, 0, 0}) {
		t.Errorf("the session's exit codes: %v, want [1 0 0]", codes)
	}
}

// TestCtlCheckNotDue: check names the items that nothing will run before
// the fleet's next sweep (in the list, tried by the fleet, held by
// nothing, absent from the due index), and --fix makes them due; an item
// that a cooldown holds, one with an entry, and those that the fleet has
// yet to try (appended, or a list no worker has seen) are not findings.
func TestCtlCheckNotDue(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	c := s.Client
	at := []string{"-u", s.URL, "-k", "nd"}
	s.seed(t, "nd:list", "a", "b", "c", "d")
	// No worker has seen the list: every item is to be tried.
	runCtl(t, nil, append(at, "check")...).mustExit(t, 0)

	// What a fleet of this version left: its marks, and its version.
	c.Set(ctx(t), "nd:seen", 4, 0)
	c.Set(ctx(t), "nd:untried", 0, 0)
	c.Set(ctx(t), "nd:schema", 2, 0)
	c.ZAdd(ctx(t), "nd:due", redis.Z{Member: "a", Score: 1}, redis.Z{Member: "b", Score: float64(time.Now().Add(time.Hour).UnixMilli())})
	c.Set(ctx(t), "nd:cooldown:c", "hand", time.Hour)
	c.RPush(ctx(t), "nd:list", "appended")
	r := runCtl(t, nil, append(at, "check")...)
	r.wantExit(t, 1)
	// b's entry is in the future with nothing to hold it, and c's cooldown,
	// set by hand, has no entry: the summary that does not read the list
	// would count b as cooling and c as idle.
	fix := "; to repair: w8yctl -u " + s.URL + " -k nd check --fix\n"
	r.wantStdout(t, `counts_drift: the summaries count "b" otherwise than its keys say (a key set or deleted by hand)`+fix+
		`counts_drift: the summaries count "c" otherwise than its keys say (a key set or deleted by hand)`+fix+
		`not_due: "d" is in the list and nothing holds it, but the due index has no entry for it: no take finds it before the fleet's next sweep`+fix+
		`found 3 problems under "nd:"`+"\n")
	r = runCtl(t, nil, append(at, "check", "--fix")...)
	r.wantExit(t, 0)
	if !strings.Contains(r.Stdout, `not_due: "d" is in the list and nothing holds it, but the due index has no entry for it: no take finds it before the fleet's next sweep: made it due now`) {
		t.Errorf("check --fix:\n%s", r)
	}
	if score, err := c.ZScore(ctx(t), "nd:due", "d").Result(); err != nil || score != 0 {
		t.Errorf("d's entry after check --fix: %v (%v), want 0 (now)", score, err)
	}
	runCtl(t, nil, append(at, "check")...).mustExit(t, 0)
}
