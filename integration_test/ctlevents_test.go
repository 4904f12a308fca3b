package integration_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
)

// TestOneWhoForPauseAndCancel: a pause and a cancel given by one person
// record the same who: $USER, else the login name (not "uid 0"), at the
// host.
func TestOneWhoForPauseAndCancel(t *testing.T) {
	s := withList(t, "who", "a", "b")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		env  []string
		want string
	}{
		{nil, me.Username + "@" + host},
		{[]string{"USER=ops"}, "ops@" + host},
	} {
		// b runs somewhere, for cancel to ask its holder.
		s.Client.Set(ctx(t), s.key("lock:b"), "elsewhere:1:abc", time.Minute)
		at := []string{"-u", s.URL, "-k", "who"}
		runCtl(t, tt.env, append(at, "pause", "a")...).mustExit(t, 0)
		runCtl(t, tt.env, append(at, "cancel", "b")...).mustExit(t, 0)
		paused := s.Client.HGet(ctx(t), s.key("pause:a"), "by").Val()
		cancelled := s.Client.HGet(ctx(t), s.key("cancel:b"), "by").Val()
		if paused != tt.want || cancelled != tt.want {
			t.Errorf("with %q: pause by %q, cancel by %q, want both %q", tt.env, paused, cancelled, tt.want)
		}
		s.Client.Del(ctx(t), s.key("cancel:b"))
	}
}

// TestCtlChangesAreEvents: pause, run-now and remove given as alice are
// entries of the events stream, after the workers' starts and ends, with
// who gave them, and a pause's reason and length, a number in --json; the
// text lines show who too.
func TestCtlChangesAreEvents(t *testing.T) {
	s := withList(t, "ce", "a", "b", "c")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// A run starts the stream, as any fleet that keeps events has one.
	s.run("-q", "true").mustExit(t, 0)
	alice := []string{"USER=alice"}
	at := []string{"-u", s.URL, "-k", "ce"}
	runCtl(t, alice, append(at, "pause", "a", "--for", "1h", "--reason", "disk full")...).mustExit(t, 0)
	runCtl(t, alice, append(at, "run-now", "b")...).mustExit(t, 0)
	runCtl(t, alice, append(at, "remove", "c")...).mustExit(t, 0)

	r := s.ctl("events", "--json")
	r.mustExit(t, 0)
	var changes []map[string]any
	for _, line := range strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n") {
		var event map[string]any
		if err := json.Unmarshal([]byte(line), &event); err != nil {
			t.Fatalf("events --json: %v in %q", err, line)
		}
		if event["type"] != "start" && event["type"] != "finish" {
			delete(event, "id")
			delete(event, "time")
			changes = append(changes, event)
		}
	}
	by := "alice@" + host
	want := []map[string]any{
		{"type": "pause", "item": "a", "by": by, "reason": "disk full", "for_ms": float64(3_600_000)},
		{"type": "run_now", "item": "b", "by": by},
		{"type": "remove", "item": "c", "by": by},
	}
	if fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Errorf("events --json's changes:\n%v\nwant\n%v", changes, want)
	}
	r = s.ctl("events", "--item", "c", "-n", "1")
	if !strings.HasSuffix(r.Stdout, ` remove "c" by=`+by+"\n") {
		t.Errorf("events --item c -n 1: %s", r)
	}
}

// TestCtlEvents: events shows the latest runs' starts and ends, and
// --follow prints a new one within a second, until SIGINT, which ends it
// with 0.
func TestCtlEvents(t *testing.T) {
	s := withList(t, "ev", "a", "b")
	at := []string{"-u", s.URL, "-k", "ev"}
	s.run("-q", "true").mustExit(t, 0)
	s.run("-q", "false").mustExit(t, 1)

	r := s.ctl("events")
	r.mustExit(t, 0)
	lines := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], ` start "a" holder=`) ||
		!strings.Contains(lines[3], ` finish "b" holder=`) || !strings.Contains(lines[3], " result=failure exit_code=1 duration_ms=") {
		t.Errorf("events: %s", r)
	}
	r = s.ctl("events", "--item", "a", "-n", "1", "--json")
	r.mustExit(t, 0)
	var event map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &event); err != nil || event["type"] != "finish" || event["item"] != "a" || event["result"] != "success" {
		t.Errorf("events --item a -n 1 --json: %v %s", err, r)
	}
	// Numbers are numbers, as in status --json.
	if _, ok := event["duration_ms"].(float64); !ok || event["exit_code"] != float64(0) {
		t.Errorf("events --json's exit_code and duration_ms are not numbers: %s", r.Stdout)
	}
	r = s.ctl("events", "--item", "a", "-n", "2", "--json")
	if !strings.Contains(r.Stdout, `"fence":`) || strings.Contains(r.Stdout, `"fence":"`) {
		t.Errorf("events --json's fence is not a number: %s", r.Stdout)
	}

	// From the third event on, by its ID; and those of the last hour.
	third := s.Client.XRange(ctx(t), s.key("events"), "-", "+").Val()[2].ID
	r = s.ctl("events", "--since", third)
	r.mustExit(t, 0)
	if got := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n"); !slices.Equal(got, lines[2:]) {
		t.Errorf("events --since %s: %s, want the last two of\n%s", third, r, strings.Join(lines, "\n"))
	}
	r = s.ctl("events", "--since", "1h")
	if r.Code != 0 || strings.Count(r.Stdout, "\n") != 4 {
		t.Errorf("events --since 1h: %s", r)
	}

	f := startCtl(t, nil, append(at, "events", "--follow", "-n", "1")...)
	poll.WaitFor(t, "the latest event", func() bool { return strings.Count(f.stdoutSoFar(), "\n") == 1 })
	// From before the run, so that the time bounds the run and both its
	// events' way to the screen.
	before := time.Now()
	s.run("-q", "true").mustExit(t, 0)
	poll.WaitFor(t, "the new events", func() bool { return strings.Count(f.stdoutSoFar(), "\n") == 3 })
	late := time.Since(before)
	if late > time.Second {
		t.Errorf("the new run's events were printed %s after it started, want within a second", late)
	}
	t.Logf("events --follow: a run's start and end were printed within %s of its start", late)
	if got := f.stdoutSoFar(); !strings.Contains(got, ` start "a"`) || !strings.Contains(got, ` finish "a"`) {
		t.Errorf("followed: %q", got)
	}
	f.signal(t, syscall.SIGINT)
	if r := f.wait(t); r.Code != 0 || r.Stderr != "" {
		t.Errorf("events --follow after SIGINT: %s", r)
	}
}
