package proc

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
)

// sent is a signal that the guard's book had the guard send.
type sent struct {
	pgid  int
	sig   syscall.Signal
	first bool
}

// watchLine is w8y's word that it starts a child (id) in group pgid whose
// lock is held until until on the boot clock, with margin and grace.
func watchLine(id, pgid int, until, margin, grace time.Duration) string {
	return fmt.Sprintf("+%d %d %d %d %d", id, pgid, until, margin, grace)
}

// TestGuardDeadline drives the guard's book of deadlines on a clock of the
// test's own: each step is a word of w8y's, or the clock moved to a moment
// with what the guard must send then. A lock held until 10s with a margin
// of 2s and a grace of 1s gets SIGTERM at 8s and SIGKILL at 9s, unless a
// newer word came first.
func TestGuardDeadline(t *testing.T) {
	const s = time.Second
	// A step is a word, or (at > 0) the clock moved to at, and what the
	// guard sends then.
	type step struct {
		word string
		at   time.Duration
		want []sent
	}
	term := func(pgid int, first bool) sent { return sent{pgid, syscall.SIGTERM, first} }
	kill := func(pgid int, first bool) sent { return sent{pgid, syscall.SIGKILL, first} }
	tests := []struct {
		name  string
		steps []step
		// gone are groups found ended when signalled.
		gone []int
	}{
		{"no newer word: SIGTERM at the margin, SIGKILL after the grace", []step{
			{word: watchLine(1, 100, 10*s, 2*s, s)},
			{at: 7999 * time.Millisecond},
			{at: 8 * s, want: []sent{term(100, true)}},
			{at: 8500 * time.Millisecond},
			{at: 9 * s, want: []sent{kill(100, false)}},
			{at: 60 * s},
		}, nil},
		{"a newer word moves the deadline", []step{
			{word: watchLine(1, 100, 10*s, 2*s, s)},
			{at: 7 * s},
			{word: "@1 13000000000"},
			{at: 8 * s},
			{at: 10999 * time.Millisecond},
			{at: 11 * s, want: []sent{term(100, true)}},
			{at: 12 * s, want: []sent{kill(100, false)}},
		}, nil},
		{"a word too late changes nothing: the SIGKILL stays due", []step{
			{word: watchLine(1, 100, 10*s, 2*s, s)},
			{at: 8 * s, want: []sent{term(100, true)}},
			{word: "@1 20000000000"},
			{at: 9 * s, want: []sent{kill(100, false)}},
		}, nil},
		{"each child its own deadline (--parallel)", []step{
			{word: watchLine(1, 100, 10*s, 2*s, s)},
			{word: watchLine(2, 200, 12*s, 2*s, s)},
			{at: 8 * s, want: []sent{term(100, true)}},
			{at: 9 * s, want: []sent{kill(100, false)}},
			{word: "@2 14000000000"},
			{at: 11 * s},
			{at: 12 * s, want: []sent{term(200, true)}},
			{at: 13 * s, want: []sent{kill(200, false)}},
		}, nil},
		{"signalled by w8y, or stopped: no SIGTERM, SIGKILL at the last moment", []step{
			{word: watchLine(1, 100, 10*s, 2*s, s)},
			{word: "s1"},
			{at: 8 * s},
			{at: 9 * s, want: []sent{kill(100, true)}},
		}, nil},
		{"continued: SIGTERM at the margin again", []step{
			{word: watchLine(1, 100, 10*s, 2*s, s)},
			{word: "s1"},
			{word: "@1 11000000000"},
			{word: "c1"},
			{at: 9 * s, want: []sent{term(100, true)}},
			{at: 10 * s, want: []sent{kill(100, false)}},
		}, nil},
		{"a grace of nothing: both at once", []step{
			{word: watchLine(1, 100, 10*s, s, 0)},
			{at: 9 * s, want: []sent{term(100, true), kill(100, false)}},
		}, nil},
		{"forgotten: nothing", []step{
			{word: watchLine(1, 100, 10*s, 2*s, s)},
			{word: "-1"},
			{at: 60 * s},
		}, nil},
		{"no deadline: nothing", []step{
			{word: "+1 100"},
			{word: "@1 1"},
			{at: 60 * s},
		}, nil},
		{"a group found ended gets nothing more: its id may be another's", []step{
			{word: watchLine(1, 100, 10*s, 2*s, s)},
			{at: 8 * s},
			{at: 9 * s},
		}, []int{100}},
		{"words it cannot read are dropped", []step{
			{word: watchLine(1, 100, 10*s, 2*s, s)},
			{word: "@1 x"},
			{word: "@"},
			{word: ""},
			{word: "+2 200 1 2"},
			{word: "s9"},
			{at: 8 * s, want: []sent{term(100, true)}},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			book := newDeadlines()
			var got []sent
			stop := func(_, pgid int, sig syscall.Signal, first bool) bool {
				if slices.Contains(tt.gone, pgid) {
					return false
				}
				got = append(got, sent{pgid, sig, first})
				return true
			}
			var now time.Duration
			for _, st := range tt.steps {
				if st.at == 0 {
					if book.apply(st.word) {
						t.Fatalf("%q read as the goodbye", st.word)
					}
					continue
				}
				now, got = st.at, nil
				book.enforce(now, stop)
				if !slices.Equal(got, st.want) {
					t.Errorf("at %s: sent %v, want %v", now, got, st.want)
				}
			}
		})
	}
}

// TestGuardWakesInTime: the guard sleeps until the next signal falls due,
// and without end when none is pending.
func TestGuardWakesInTime(t *testing.T) {
	const s = time.Second
	book := newDeadlines()
	if _, ok := book.next(0); ok {
		t.Error("an empty book has something due")
	}
	book.apply("+1 100")
	if _, ok := book.next(0); ok {
		t.Error("a group without a deadline has something due")
	}
	book.apply(watchLine(2, 200, 10*s, 2*s, s))
	book.apply(watchLine(3, 300, 20*s, 2*s, s))
	for _, tt := range []struct {
		word string
		now  time.Duration
		want time.Duration
	}{
		{"", 0, 8 * s},
		{"", 7 * s, s},
		{"s2", 7 * s, 2 * s},
		{"", 12 * s, 0},
		{"-2", 12 * s, 6 * s},
	} {
		if tt.word != "" {
			book.apply(tt.word)
		}
		if got, ok := book.next(tt.now); !ok || got != tt.want {
			t.Errorf("after %q, at %s: next in %s (%v), want %s", tt.word, tt.now, got, ok, tt.want)
		}
	}
	if !book.apply("q") {
		t.Error("q was not read as the goodbye")
	}
}
