package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

func ptr[T any](v T) *T { return &v }

// sample is a list as docs/operating.md shows it: one item of each state, with
// the holders and results that a fleet leaves.
func sample(now time.Time, item, holder string) []Item {
	ms := func(ago time.Duration) *int64 { return ptr(now.Add(-ago).UnixMilli()) }
	return []Item{
		{Item: item, State: StateLocked, Holder: ptr(holder), LockTTL: ptr(int64(4200)), LastStart: ms(12 * time.Second),
			LastEnd: ms(41 * time.Minute), LastExitCode: ptr(int64(0)), LastDuration: ptr(int64(3100)), LastResult: ptr("success"), Runs: 17},
		{Item: "cool", State: StateCooldown, Cooldown: ptr(int64(52_500)), LastEnd: ms(time.Minute), LastExitCode: ptr(int64(5)),
			LastDuration: ptr(int64(2000)), LastResult: ptr("interrupted"), Runs: 9, Failures: 4, ConsecutiveFailures: 1},
		{Item: "back", State: StateBackoff, Backoff: ptr(int64(29_800))},
		{Item: "", State: StateInvalid, Problem: ptr("it is empty")},
	}
}

// TestTableFits80Columns: with items and hosts of about ten characters, a
// row fits an 80-column terminal without clipping anything.
func TestTableFits80Columns(t *testing.T) {
	now := time.Now()
	var out bytes.Buffer
	writeTable(&out, sample(now, "report-042", "web-3.prod:41780:1f2e3d4c5b6a"), now, 0)
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("a %d-column line: %q", n, line)
		}
	}
	for _, want := range []string{"report-042  locked 4.2s", "web-3.prod:41780 ", "cooldown 52.5s", "interrupted ", "41m ago", `"" is invalid: it is empty`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestTableClipsToTheTerminal: on a terminal, long items and holders are
// clipped so that each line fits its width; elsewhere they are whole.
func TestTableClipsToTheTerminal(t *testing.T) {
	now := time.Now()
	item := "customer:" + strings.Repeat("7", 40)
	holder := "report-workers-5d8f9c7b6-x2x4q:1:1f2e3d4c5b6a"
	for _, width := range []int{80, 100} {
		var out bytes.Buffer
		writeTable(&out, sample(now, item, holder), now, width)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		for _, line := range lines[:len(lines)-1] { // the note below the table is prose
			if n := utf8.RuneCountInString(line); n > width {
				t.Errorf("width %d: a %d-column line: %q", width, n, line)
			}
		}
		if !strings.Contains(out.String(), "customer:777") || !strings.Contains(out.String(), "…") {
			t.Errorf("width %d: no clipped item:\n%s", width, out.String())
		}
	}
	var out bytes.Buffer
	writeTable(&out, sample(now, item, holder), now, 0)
	if !strings.Contains(out.String(), item+"  ") || !strings.Contains(out.String(), "report-workers-5d8f9c7b6-x2x4q:1 ") {
		t.Errorf("not a terminal, yet clipped:\n%s", out.String())
	}
}

// TestStatesOfItemsThatCannotRun: an item whose lock key holds another
// type is blocked, not locked forever, and an empty item or one with a NUL
// byte is invalid, not idle; each says why.
func TestStatesOfItemsThatCannotRun(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "bad:"}
	rdb.RPush(ctx, keys.List(), "hashed", "", "nul\x00", "held", "free")
	rdb.HSet(ctx, keys.Lock("hashed"), "field", "value")
	rdb.Set(ctx, keys.Lock("held"), "host:1:abc", time.Minute)
	got := readAll(ctx, t, &Reader{Client: rdb, Keys: keys})
	want := map[string]struct{ state, problem string }{
		"hashed":  {StateBlocked, "its lock key holds something other than a lock: an operator must delete it"},
		"":        {StateInvalid, "it is empty"},
		"nul\x00": {StateInvalid, "it holds a NUL byte"},
		"held":    {StateLocked, ""},
		"free":    {StateIdle, ""},
	}
	for _, st := range got {
		w := want[st.Item]
		problem := ""
		if st.Problem != nil {
			problem = *st.Problem
		}
		if st.State != w.state || !strings.Contains(problem, w.problem) || (w.problem == "") != (st.Problem == nil) {
			t.Errorf("%q: %s (%q), want %s (%q)", st.Item, st.State, problem, w.state, w.problem)
		}
	}
}

func TestAgo(t *testing.T) {
	now := time.Now()
	for d, want := range map[time.Duration]string{
		-time.Second:                          "0s ago",
		10 * time.Second:                      "10s ago",
		12*time.Second + 700*time.Millisecond: "12s ago",
		41*time.Minute + 59*time.Second:       "41m ago",
		3*time.Hour + 2*time.Minute:           "3h2m ago",
	} {
		if got := ago(ptr(now.Add(-d).UnixMilli()), now); got != want {
			t.Errorf("ago(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestShort(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                                 "0s",
		4230 * time.Millisecond:                      "4.2s",
		41*time.Minute + 2*time.Second:               "41m2s",
		3*time.Hour + 2*time.Minute + 20*time.Second: "3h2m",
		50 * time.Hour:                               "50h0m",
	} {
		if got := short(d); got != want {
			t.Errorf("short(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestPausedItems: a paused item shows as paused, with what is left of its
// pause, and a line under the table says who paused it and why; --status
// reads it so from Redis, whatever else holds the item but its lock.
func TestPausedItems(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "pz:"}
	redistest.Seed(t, rdb, keys.List(), "timed", "forever", "by-hand")
	rdb.HSet(ctx, keys.Pause("timed"), schema.PauseFieldReason, "upstream down", schema.PauseFieldBy, "ops@bastion")
	rdb.PExpire(ctx, keys.Pause("timed"), time.Hour)
	rdb.Set(ctx, keys.Cooldown("timed"), "x", time.Minute)
	rdb.HSet(ctx, keys.Pause("forever"), schema.PauseFieldReason, "", schema.PauseFieldBy, "ops@bastion")
	rdb.Set(ctx, keys.Pause("by-hand"), "stop", 0)
	got := readAll(ctx, t, &Reader{Client: rdb, Keys: keys})
	var out bytes.Buffer
	writeTable(&out, got, time.Now(), 0)
	for _, want := range []string{
		"timed    paused ", "forever  paused forever", "by-hand  paused forever",
		"\ntimed is paused by ops@bastion: upstream down\n", "\nforever is paused by ops@bastion\n", "\nby-hand is paused\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	// What is left of an hour, however the clock turned meanwhile.
	if !regexp.MustCompile(`\ntimed    paused (1h0m|59m)`).MatchString(out.String()) {
		t.Errorf("timed's pause of an hour shows as:\n%s", out.String())
	}
	if got[0].PauseReason == nil || *got[0].PauseReason != "upstream down" || got[0].Cooldown == nil {
		t.Errorf("timed: %+v", got[0])
	}
}

// TestNextSlot: an item that cools down until its next slot under
// --schedule shows that slot, in UTC, where the table shows a cooldown:
// the clock time while it comes within a day, the date beyond, in no more
// room than a cooldown of hours. The slot counts only while the cooldown
// that the success set is there: not after run-now deleted it (the state
// hash keeps the field), nor under a cooldown without expiry or one that
// outlasts the slot (an operator's); and a field that is not a number is
// none.
func TestNextSlot(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "slot:"}
	now := time.Now()
	nightly := now.Add(20*time.Hour + 43*time.Minute).Truncate(time.Second).Add(996 * time.Millisecond)
	weekly := now.Add(5 * 24 * time.Hour)
	redistest.Seed(t, rdb, keys.List(), "nightly", "weekly", "run-now", "held", "longer", "garbled", "plain")
	for item, slot := range map[string]any{
		"nightly": nightly.UnixMilli(), "weekly": weekly.UnixMilli(), "run-now": nightly.UnixMilli(),
		"held": nightly.UnixMilli(), "longer": nightly.UnixMilli(), "garbled": "soon",
	} {
		rdb.HSet(ctx, keys.State(item), schema.FieldNextSlot, slot, schema.FieldLastResult, "success")
	}
	for item, ttl := range map[string]time.Duration{"nightly": time.Until(nightly), "weekly": time.Until(weekly), "held": 0, "longer": 30 * time.Hour, "garbled": time.Hour, "plain": time.Hour} {
		rdb.Set(ctx, keys.Cooldown(item), "x", ttl)
	}
	got := readAll(ctx, t, &Reader{Client: rdb, Keys: keys})
	want := map[string]*int64{"nightly": ptr(nightly.UnixMilli()), "weekly": ptr(weekly.UnixMilli())}
	shown := func(ms *int64) string {
		if ms == nil {
			return "none"
		}
		return strconv.FormatInt(*ms, 10)
	}
	for _, st := range got {
		if shown(st.NextSlot) != shown(want[st.Item]) {
			t.Errorf("%s: next slot %s, want %s", st.Item, shown(st.NextSlot), shown(want[st.Item]))
		}
	}
	var out bytes.Buffer
	writeTable(&out, got, now, 0)
	for _, want := range []string{
		"\nnightly  slot " + nightly.UTC().Format("15:04:05") + "Z  ",
		"\nweekly   slot " + weekly.UTC().Format("2006-01-02") + "  ",
		"\nrun-now  idle ", "\nheld     cooldown forever ", "\nlonger   cooldown 30h0m", "\ngarbled  cooldown 1h0m", "\nplain    cooldown 1h0m",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	for _, slot := range []int64{nightly.UnixMilli(), weekly.UnixMilli()} {
		if cell := "slot " + slotTime(slot, now); len(cell) > len("cooldown 20h43m") {
			t.Errorf("%q is wider than a cooldown of hours", cell)
		}
	}
	line, err := json.Marshal(got[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"next_slot":%d`, nightly.UnixMilli()); !strings.Contains(string(line), want) {
		t.Errorf("--json has %s, want %s", line, want)
	}
}
