package redisconn

import (
	"errors"
	"strings"
	"testing"
)

func TestParseInfo(t *testing.T) {
	text := "# Memory\r\nused_memory:5242880\r\nmaxmemory:4194304\r\nmaxmemory_policy:volatile-lru\r\n# Replication\r\nrole:slave\r\nmaster_host:10.0.0.1\r\nmaster_port:6380\r\n# Stats\r\nevicted_keys:17\r\n"
	s := ParseInfo(text)
	want := Server{MaxMemory: 4 << 20, UsedMemory: 5 << 20, Policy: "volatile-lru", Role: "slave", Primary: "10.0.0.1:6380", EvictedKeys: 17}
	if s != want {
		t.Errorf("ParseInfo = %+v, want %+v", s, want)
	}
	if !s.MayEvict() || !s.Replica() {
		t.Errorf("%+v: MayEvict %v, Replica %v; want both", s, s.MayEvict(), s.Replica())
	}
	for _, tt := range []struct {
		s     Server
		evict bool
	}{
		{Server{MaxMemory: 1, Policy: "noeviction"}, false},
		{Server{MaxMemory: 0, Policy: "allkeys-lru"}, false},
		{Server{MaxMemory: 1, Policy: "allkeys-lfu"}, true},
		{Server{MaxMemory: 1, Policy: ""}, false},
	} {
		if tt.s.MayEvict() != tt.evict {
			t.Errorf("%+v: MayEvict %v, want %v", tt.s, tt.s.MayEvict(), tt.evict)
		}
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{4 << 20: "4mb", 1 << 30: "1gb", 512: "512b", 2048: "2kb", 5*(1<<20) + 1: "5.0mb"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestPlain: a reply a user can act on is told in w8y's words, and no
// reply keeps a script's hash or Lua line; the code beneath still sorts it.
func TestPlain(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{reply("OOM command not allowed when used memory > 'maxmemory'. script: 4bee2263aa, on @user_script:190."), "Redis is full"},
		{reply("READONLY You can't write against a read only replica. script: 4bee2263aa, on @user_script:12."), "read-only replica"},
		{reply("LOADING Redis is loading the dataset in memory"), "loading its data"},
		{reply("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), "busy running another client's script"},
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value script: 9663b8, on @user_script:1."), "WRONGTYPE Operation against a key holding the wrong kind of value"},
	} {
		got := Wrap("op", tt.err)
		if !strings.Contains(got.Error(), tt.want) || strings.Contains(got.Error(), "@user_script") || strings.Contains(got.Error(), "script: ") {
			t.Errorf("Wrap(%q) = %q, want %q and no script's hash or line", tt.err, got, tt.want)
		}
		if !errors.Is(got, ErrRefused) && Code(got) != Code(tt.err) {
			t.Errorf("Wrap(%q) lost its code: %q", tt.err, Code(got))
		}
	}
	if err := errors.New("dial tcp: refused"); Plain(err) != err {
		t.Error("Plain changed an error that is no reply")
	}
}
