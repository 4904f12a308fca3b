package integration_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// startTimes are the Unix milliseconds of the start events of the list
// under prefix, from the events stream's IDs: the stream's clock is Redis',
// which the rate counts on, and a take writes its start event in its own
// call. The ID is Redis' clock as the call began, the rate's TIME a moment
// later in the same call: on a loaded machine, where Redis itself waits for
// a core, the two part by a few milliseconds (streamSlack).
func (s *server) startTimes(t *testing.T, prefix string) []int64 {
	t.Helper()
	entries, err := s.Client.XRange(ctx(t), prefix+":events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		if e.Values["type"] != "start" {
			continue
		}
		ms, _, _ := strings.Cut(e.ID, "-")
		at, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			t.Fatalf("stream ID %q", e.ID)
		}
		out = append(out, at)
	}
	return out
}

// streamSlack is how far, in milliseconds, a start event's ID may fall
// before the TIME that its take counted (see startTimes): two starts that
// the rate spaced by its window may show in the stream as this much
// closer. A worker that ignored the rate would start many more than N in a
// window this much shorter.
const streamSlack = 50

// mostInWindow is the most of starts (sorted) in any window [s,
// s+window-streamSlack) that begins at one of them: the most that any
// window of that length holds, as far as the stream's clock tells.
func mostInWindow(starts []int64, window int64) (most int, at int64) {
	for i, s := range starts {
		j, _ := slices.BinarySearch(starts, s+window-streamSlack)
		if j-i > most {
			most, at = j-i, s
		}
	}
	return most, at
}

// TestFleetRate: four workers with --parallel 2 and --fleet-rate 5/2s over
// 40 items start, in the first 10s, 20 to 30 items (the rate allows 25:
// five at once, then five each time the window has room), and no window of
// 2s ever holds more than 5 starts (the rate's burst is its N: no more in
// any window), however many workers and slots wait. w8yctl status and
// w8y --status show the rate and the starts in its window.
func TestFleetRate(t *testing.T) {
	b := withList(t, "rate", redistest.Items(40)...)
	var workers []*proc
	for range 4 {
		workers = append(workers, b.start("-c", "--parallel", "2", "--fleet-rate", "5/2s", "--idle-wait", "100ms",
			"--log-level", "warn", "--", "sh", "-c", "sleep 0.2"))
	}
	var first int64
	poll.WaitFor(t, "the first start", func() bool {
		starts := b.startTimes(t, b.prefix)
		if len(starts) > 0 {
			first = starts[0]
		}
		return first > 0
	})
	// The rate and its window, as an operator reads them while it binds.
	line := regexp.MustCompile(`(?m)^rate: [0-5] of 5 in the last 2s(, next start in [0-9.]+m?s)? \(--fleet-rate 5/2s\)$`)
	poll.WaitFor(t, "w8yctl status to show the rate", func() bool {
		r := b.ctl("status", "--limit", "0")
		return r.Code == 0 && line.MatchString(r.Stdout)
	})
	if out := statusOutput(t, b.env, b.at("--status", "--limit", "0")...); !line.MatchString(out) {
		t.Errorf("w8y --status shows no rate:\n%s", out)
	}
	var doc struct {
		Rate *struct {
			Rate    string `json:"rate"`
			Limit   int64  `json:"limit"`
			PerMs   int64  `json:"per_ms"`
			Started int64  `json:"started"`
		} `json:"fleet_rate"`
	}
	r := b.ctl("status", "--json", "--limit", "0")
	r.mustExit(t, 0)
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil || doc.Rate == nil || doc.Rate.Rate != "5/2s" || doc.Rate.Limit != 5 || doc.Rate.PerMs != 2000 || doc.Rate.Started > 5 {
		t.Errorf("status --json: %+v (%v)\n%s", doc.Rate, err, r.Stdout)
	}
	// Ten seconds of starts: the first start event at or past them is
	// Redis' word that they have passed.
	poll.WaitFor(t, "ten seconds of starts", func() bool {
		starts := b.startTimes(t, b.prefix)
		return starts[len(starts)-1] >= first+10_000
	})
	drain(t, workers)
	starts := b.startTimes(t, b.prefix)
	in10, _ := slices.BinarySearch(starts, first+10_000)
	if in10 < 20 || in10 > 30 {
		t.Errorf("%d starts in the first 10s under --fleet-rate 5/2s, want 20 to 30", in10)
	}
	if most, at := mostInWindow(starts, 2000); most > 5 {
		i, _ := slices.BinarySearch(starts, at)
		t.Errorf("%d starts in the 2s from %d, more than --fleet-rate 5/2s allows: %v", most, at, starts[i:i+most])
	}
	t.Logf("%d starts in the first 10s, %d in all; the most in a window of 2s: %d", in10, len(starts), func() int { m, _ := mostInWindow(starts, 2000); return m }())
	b.noLocks()
	b.wantItems(redistest.Items(40)...)
}

// TestFleetRateRefused: a value that is not N/DURATION is refused with one
// line that names the option (or its variable) and exit 125, before w8y
// touches the list.
func TestFleetRateRefused(t *testing.T) {
	b := withList(t, "badrate", "a", "b")
	before := b.snapshot(t)
	for _, tt := range []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"--fleet-rate", "5"}, want: `w8y: --fleet-rate "5": "5" is not a rate: give N/DURATION, at most N starts in any DURATION, such as 100/1h or 5/2s`},
		{args: []string{"--fleet-rate", "0/1s"}, want: `w8y: --fleet-rate "0/1s": "0/1s" is not a rate: N must be a whole number of starts from 1 to 1000000, as in 100/1h (leave the option out for no rate)`},
		{args: []string{"--fleet-rate", "5/0s"}, want: `w8y: --fleet-rate "5/0s": "5/0s" is not a rate: the DURATION after the slash must be at least 1ms and not inf, as in 100/1h`},
		{args: []string{"--fleet-rate", "x/1s"}, want: `w8y: --fleet-rate "x/1s": "x/1s" is not a rate: N must be a whole number of starts from 1 to 1000000, as in 100/1h (leave the option out for no rate)`},
		{env: "W8Y_FLEET_RATE=5/soon", want: `w8y: W8Y_FLEET_RATE="5/soon": "5/soon" is not a rate: after the slash, "soon" is neither seconds nor a duration such as 1500ms or 30d`},
	} {
		env := b.env
		if tt.env != "" {
			env = append(slices.Clone(env), tt.env)
		}
		r := runW8y(t, env, b.at(append(tt.args, "-c", "true")...)...)
		r.wantExit(t, 125)
		oneLine(t, r.Stderr, tt.want)
	}
	if after := b.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("a refused --fleet-rate changed Redis:\n%q\nwas\n%q", after, before)
	}
}

// TestFleetRateItem: w8y --item under --fleet-rate waits for the rate as
// for its lock: with --wait 0, exit 121 and one line; with a --wait, it
// runs once the window has room, and not before.
func TestFleetRateItem(t *testing.T) {
	t.Parallel()
	b := setup(t, "rateitem")
	dir := t.TempDir()
	b.setenv("DIR=" + dir)
	b.items("a")
	b.run("--item", "a", "--fleet-rate", "1/3s", "--", "sh", "-c", `: >"$DIR/$W8Y_ITEM"`).wantExit(t, 0)
	r := b.run("--item", "x", "--fleet-rate", "1/3s", "--", "sh", "-c", `: >"$DIR/$W8Y_ITEM"`)
	r.wantExit(t, 121)
	oneLine(t, r.Stderr, `w8y: item "x": the fleet's --fleet-rate allows no start now (--wait 0: not waiting for it)`)
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("--item ran past the rate")
	}
	waiting := b.start("--item", "x", "--fleet-rate", "1/3s", "--wait", "60s", "--", "sh", "-c", `: >"$DIR/$W8Y_ITEM"`)
	poll.WaitFor(t, "--item to wait for the rate", func() bool {
		return strings.Contains(waiting.stderrSoFar(), "the fleet's --fleet-rate allows no start now: waiting for it (--wait)")
	})
	waiting.wait(t).wantExit(t, 0)
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Errorf("--item with --wait did not run once the rate allowed it: %v", err)
	}
	starts := b.startTimes(t, b.prefix)
	if len(starts) != 2 || starts[1]-starts[0] < 3000-streamSlack {
		t.Errorf("the starts of --item under --fleet-rate 1/3s: %v, want two at least 3s apart", starts)
	}
}

// TestFleetRateTwoFleets: two fleets on one list with other rates. Each
// take holds to its own rate over the whole fleet's starts, so the list
// starts at no more than the laxer rate, and each worker warns at its start
// that its rate is not the one the list's last take recorded.
func TestFleetRateTwoFleets(t *testing.T) {
	b := withList(t, "tworates", redistest.Items(20)...)
	strict := b.start("-c", "--fleet-rate", "2/3s", "--idle-wait", "100ms", "--", "sh", "-c", "sleep 0.1")
	poll.WaitFor(t, "the stricter fleet's first start", func() bool { return len(b.startTimes(t, b.prefix)) > 0 })
	lax := b.start("-c", "--fleet-rate", "4/3s", "--idle-wait", "100ms", "--", "sh", "-c", "sleep 0.1")
	poll.WaitFor(t, "the laxer worker's warning", func() bool {
		return strings.Contains(lax.stderrSoFar(), "the list's last take ran under --fleet-rate 2/3s, and this worker's is 4/3s")
	})
	poll.WaitFor(t, "starts over 9s", func() bool {
		starts := b.startTimes(t, b.prefix)
		return starts[len(starts)-1]-starts[0] >= 9000
	})
	drain(t, []*proc{strict, lax})
	starts := b.startTimes(t, b.prefix)
	if most, at := mostInWindow(starts, 3000); most > 4 {
		i, _ := slices.BinarySearch(starts, at)
		t.Errorf("%d starts in the 3s from %d, more than the laxer rate 4/3s allows: %v", most, at, starts[i:i+most])
	}
}

// TestFleetRateExample runs the scheduling page's example of --fleet-rate
// as three hosts would, each its own w8y with the page's line: the page's
// status line shows the starts in the rate's window.
func TestFleetRateExample(t *testing.T) {
	b := withList(t, "repos", "w8y/w8y", "redis/redis", "golang/go", "torvalds/linux", "rust-lang/rust", "nodejs/node")
	_, hosts, statusLine := pageFleet(t, b, "--fleet-rate", "sync-repo.sh", "exit 0")
	poll.WaitFor(t, "every repository synced", func() bool { return len(b.startTimes(t, b.prefix)) == 6 })
	r := runCtl(t, nil, append([]string{"-u", b.URL}, statusLine...)...)
	r.mustExit(t, 0)
	if !strings.Contains(r.Stdout, "\nrate: 6 of 100 in the last 1h (--fleet-rate 100/1h)\n") {
		t.Errorf("the page's status line shows no rate:\n%s", r.Stdout)
	}
	drain(t, hosts)
}

// TestFleetRateUntilIdle: a --until-idle worker that the rate holds back
// is not idle: it waits for the rate, runs every item once, then exits 0.
func TestFleetRateUntilIdle(t *testing.T) {
	b := withList(t, "rateidle", "a", "b", "c", "d", "e")
	r := b.run("-c", "--until-idle", "--cooldown", "1h", "--fleet-rate", "2/1s", "--idle-wait", "100ms", "true")
	r.wantExit(t, 0)
	starts := b.startTimes(t, b.prefix)
	if len(starts) != 5 {
		t.Fatalf("%d starts, want each of the 5 items once", len(starts))
	}
	if most, at := mostInWindow(starts, 1000); most > 2 {
		t.Errorf("%d starts in the second from %d, more than --fleet-rate 2/1s allows: %v", most, at, starts)
	}
	if starts[4]-starts[0] < 2000-streamSlack {
		t.Errorf("5 starts under --fleet-rate 2/1s within %dms, want at least 2s", starts[4]-starts[0])
	}
}
