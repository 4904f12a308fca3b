package integration_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/redistest"
)

// TestCtlBadInput: each kind of bad input gets exit 125, one line in the
// user's words, and changes nothing in Redis.
func TestCtlBadInput(t *testing.T) {
	s := withList(t, "bad", "a", "b")
	s.Client.HSet(ctx(t), "hash:list", "f", "v")
	secured := startRedis(t, redistest.Password("right-horse-battery"))
	secured.seed(t, s.key("list"), "a")
	at := []string{"-u", s.URL, "-k", "bad"}
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown verb", nil, append(at, "frobnicate", "a"), `unknown verb "frobnicate"`},
		{"no verb", nil, at, "missing verb"},
		{"missing item", nil, append(at, "pause"), "pause needs at least one ITEM"},
		{"item given twice", nil, append(at, "run-now", "a", "b", "a"), `item "a" is given twice`},
		{"--for that does not parse", nil, append(at, "pause", "a", "--for", "a while"), `--for "a while"`},
		{"--for negative", nil, append(at, "pause", "a", "--for=-1h"), "a pause cannot last a negative time"},
		{"option of another verb", nil, append(at, "resume", "a", "--reason", "x"), "--reason goes with pause or cancel, not resume"},
		{"list of another type", nil, []string{"-u", s.URL, "-k", "hash", "remove", "a"}, `"hash:list" holds a hash, not a list`},
		{"item not in the list", nil, append(at, "pause", "a", "zz"), `"zz" is not in the list "bad:list"`},
		{"unreachable Redis", nil, []string{"-u", fmt.Sprintf("redis://127.0.0.1:%d", redistest.FreePort(t)), "-k", "bad", "pause", "a"}, "connect to Redis"},
		{"refused password", []string{"W8Y_REDIS_PASSWORD=wrong"}, []string{"-u", secured.URL, "-k", "bad", "pause", "a"}, "WRONGPASS"},
		{"no password", nil, []string{"-u", secured.URL, "-k", "bad", "pause", "a"}, "NOAUTH"},
		{"status of an item given twice", nil, append(at, "status", "a", "a"), `item "a" is given twice`},
		{"status --watch of items", nil, append(at, "status", "--watch", "a"), "--watch shows the table of every item: give it without ITEMs"},
		{"check on a list of another type", nil, []string{"-u", s.URL, "-k", "hash", "check", "--fix"}, `"hash:list" holds a hash, not a list`},
		{"unknown option", nil, append(at, "check", "--frobnicate"), "--frobnicate: no such option (see w8yctl --help)"},
		{"check given an item", nil, append(at, "check", "a"), "check takes no items"},
		{"--fix with another verb", nil, append(at, "resume", "a", "--fix"), "--fix goes with check, not resume"},
		{"check on an unreachable Redis", nil, []string{"-u", fmt.Sprintf("redis://127.0.0.1:%d", redistest.FreePort(t)), "-k", "bad", "check"}, "connect to Redis"},
		{"bad variable", []string{"W8Y_REDIS_CLUSTER=perhaps"}, append(at, "pause", "a"), `W8Y_REDIS_CLUSTER="perhaps": not true or false`},
		{"status of an item nothing is known of", nil, append(at, "status", "a", "zz"), `"zz" is not in the list "bad:list", and nothing of it is kept (no key, no event)`},
		{"cancel of an item neither listed nor running", nil, append(at, "cancel", "zz"), `"zz" is not in the list "bad:list", and no run holds it (nothing was changed)`},
		{"events of an item nothing is known of", nil, append(at, "events", "--item", "zz"), `"zz" is not in the list "bad:list", and the events stream holds none of its events`},
		{"set without a setting", nil, append(at, "set", "a"), "set needs at least one setting: --cooldown, --timeout, --failure-backoff or --schedule"},
		{"set a duration that does not parse", nil, append(at, "set", "a", "--cooldown", "soon"), `--cooldown "soon"`},
		{"set a negative timeout", nil, append(at, "set", "a", "b", "--timeout=-1s"), `--timeout "-1s" must not be negative`},
		{"set a backoff upside down", nil, append(at, "set", "a", "--failure-backoff", "5s,1s"), "MAX 1s is less than MIN 5s"},
		{"set a schedule that is not cron", nil, append(at, "set", "a", "--schedule", "every hour"), `--schedule "every hour" is not a cron expression`},
		{"set a cooldown and a schedule", nil, append(at, "set", "a", "--cooldown", "1h", "--schedule", "@hourly"), "--cooldown and --schedule are alternatives: give one"},
		{"set an item not in the list", nil, append(at, "set", "a", "zz", "--timeout", "1s"), `"zz" is not in the list "bad:list"`},
		{"unset with a value", nil, append(at, "unset", "a", "--cooldown=1h"), "unset removes settings and takes no values: give --cooldown alone"},
		{"a setting with another verb", nil, append(at, "pause", "a", "--timeout", "1h"), "--timeout goes with set or unset, not pause"},
	}
	before, securedBefore := s.snapshot(t), secured.snapshot(t)
	for _, tt := range tests {
		r := runCtl(t, tt.env, tt.args...)
		r.wantExit(t, 125)
		oneLineOf(t, "w8yctl", r.Stderr, tt.want)
		if r.Stdout != "" || goSpeak.MatchString(r.Stderr) {
			t.Errorf("%s: %s", tt.name, r)
		}
	}
	if after := s.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("bad input changed Redis")
	}
	if after := secured.snapshot(t); !slices.Equal(after, securedBefore) {
		t.Errorf("bad input changed the secured Redis")
	}
}

// TestCtlACL runs every verb of w8yctl as the recipes' ACL user for it, and
// its bad input as a user without the rights: it must be refused with one
// line that says so.
func TestCtlACL(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	const password = "Operator-Staple-77"
	rule := strings.Fields(strings.TrimSpace(doctest.Block(t, "docs/recipes.md", "", "ACL SETUSER operator")))
	for i, word := range rule {
		switch {
		case word == ">secret":
			rule[i] = ">" + password
		case word == "~reports:*":
			rule[i] = "~ops:*"
		case word == "+cluster|slots":
			// Not a Cluster.
			rule[i] = "+ping"
		}
	}
	args := make([]any, len(rule))
	for i, word := range rule {
		args[i] = word
	}
	if err := s.Client.Do(ctx(t), args...).Err(); err != nil {
		t.Fatalf("%q: %v", rule, err)
	}
	s.seed(t, "ops:list", "a", "b")
	// A list that a fleet of this version runs: its version, its events.
	s.Client.Set(ctx(t), "ops:schema", 2, 0)
	s.Client.XAdd(ctx(t), &redis.XAddArgs{Stream: "ops:events", Values: []string{"type", "start", "item", "a", "holder", "h"}})
	// b runs somewhere, for cancel to ask its holder: its lock, and its
	// entry among the locks, as a take writes them.
	s.Client.Set(ctx(t), "ops:lock:b", "elsewhere:1:abc", time.Minute)
	s.Client.ZAdd(ctx(t), "ops:locks", redis.Z{Score: float64(s.Client.Time(ctx(t)).Val().Add(time.Minute).UnixMilli()), Member: "b"})
	env := []string{"W8Y_REDIS_URL=redis://operator@127.0.0.1:" + itoa(s.Port), "W8Y_REDIS_PASSWORD=" + password, "W8Y_KEY_PREFIX=ops"}
	for _, verb := range [][]string{
		{"add", "c"}, {"pause", "a", "--for", "1h", "--reason", "r"}, {"status"}, {"resume", "a"}, {"run-now", "b"}, {"remove", "c"},
		{"events", "--item", "a"}, {"events", "--since", "1h"}, {"check"}, {"check", "--fix"}, {"status", "a", "b"}, {"cancel", "--reason", "r", "b"}, {"workers"},
		{"set", "a", "--timeout", "1h", "--schedule", "@hourly"}, {"status", "a"}, {"unset", "a", "--timeout"}, {"unset", "a"},
	} {
		r := runCtl(t, env, verb...)
		r.wantExit(t, 0)
		if r.Stderr != "" {
			t.Errorf("as the recipes' ACL user: %s", r)
		}
	}
	if got := s.Client.HGet(ctx(t), "ops:cancel:b", "holder").Val(); got != "elsewhere:1:abc" {
		t.Errorf("the cancel request of b is aimed at %q, want its lock's holder", got)
	}
	// Each change is recorded: the rule allows its XADD, which the script
	// would otherwise leave out without a word.
	var changes []string
	for _, m := range s.Client.XRange(ctx(t), "ops:events", "-", "+").Val() {
		changes = append(changes, fmt.Sprint(m.Values["type"], " ", m.Values["item"]))
	}
	if want := []string{"start a", "add c", "pause a", "resume a", "run_now b", "remove c", "set a", "unset a", "unset a"}; !slices.Equal(changes, want) {
		t.Errorf("as the recipes' ACL user, the events are %q, want %q", changes, want)
	}
	r := runCtl(t, env, "-k", "other", "pause", "a")
	r.wantExit(t, 125)
	oneLineOf(t, "w8yctl", r.Stderr, "NOPERM")
}
