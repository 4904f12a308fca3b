package redisconn

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

// reply is an error reply as go-redis hands it over: a redis.Error.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

// TestWrapSortsByCode: every class, in the words of Redis 7 and of
// Valkey 8 where they differ (both servers' replies, copied from
// redis-cli and valkey-cli), and wrapped as w8y's callers wrap them; and
// for each, whether NotApplied lets a run's finish be sent again. Of the
// codes that a test server cannot easily be made to answer (LOADING,
// NOREPLICAS, TRYAGAIN), this table is the only test.
func TestWrapSortsByCode(t *testing.T) {
	const refused, unavailable = true, false
	// again: the server refused the command without running it, in a
	// state that passes, so that a run's finish may be sent again (see
	// NotApplied).
	const again, notAgain = true, false
	tests := []struct {
		name    string
		err     error
		refused bool
		again   bool
		hint    string
	}{
		{"WRONGTYPE", reply("WRONGTYPE Operation against a key holding the wrong kind of value"), refused, notAgain, ""},
		{"WRONGTYPE in a script", reply("WRONGTYPE Operation against a key holding the wrong kind of value script: 9663b8, on @user_script:1."), refused, notAgain, ""},
		{"WRONGPASS", reply("WRONGPASS invalid username-password pair or user is disabled."), refused, notAgain, ""},
		{"NOAUTH", reply("NOAUTH Authentication required."), refused, notAgain, ""},
		{"NOPERM on Redis", reply("NOPERM this user has no permissions to run the 'zrangebyscore' command"), refused, notAgain, "the ACL rule in docs/recipes.md"},
		{"NOPERM on Valkey", reply("NOPERM User w has no permissions to run the 'zrangebyscore' command"), refused, notAgain, "the ACL rule in docs/recipes.md"},
		{"a script's ACL refusal on Redis", reply("ERR The user executing the script can't run this command or subcommand script: e43b68, on @user_script:1."), refused, notAgain, "the ACL rule in docs/recipes.md"},
		{"a script's ACL refusal on Valkey", reply("ERR ACL failure in script: User worker has no permissions to run the 'zrangebyscore' command script: e43b68, on @user_script:1."), refused, notAgain, "the ACL rule in docs/recipes.md"},
		{"an unknown command", reply("ERR unknown command 'LMOVE', with args beginning with: "), refused, notAgain, ""},
		{"AUTH without a password set", reply("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"), refused, notAgain, ""},
		{"CROSSSLOT", reply("CROSSSLOT Keys in request don't hash to the same slot"), refused, notAgain, "hash tag"},
		{"LOADING", reply("LOADING Redis is loading the dataset in memory"), unavailable, again, ""},
		{"LOADING on Valkey", reply("LOADING Valkey is loading the dataset in memory"), unavailable, again, ""},
		{"BUSY", reply("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), unavailable, again, ""},
		{"BUSY on Valkey", reply("BUSY Valkey is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), unavailable, again, ""},
		{"READONLY", reply("READONLY You can't write against a read only replica."), unavailable, again, ""},
		{"MASTERDOWN", reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), unavailable, again, ""},
		{"TRYAGAIN", reply("TRYAGAIN Multiple keys request during rehashing of slot"), unavailable, again, ""},
		{"CLUSTERDOWN", reply("CLUSTERDOWN Hash slot not served"), unavailable, again, ""},
		{"NOREPLICAS", reply("NOREPLICAS Not enough good replicas to write."), unavailable, again, ""},
		{"NOSCRIPT on Redis", reply("NOSCRIPT No matching script. Please use EVAL."), unavailable, notAgain, ""},
		{"NOSCRIPT on Valkey", reply("NOSCRIPT No matching script."), unavailable, notAgain, ""},
		{"OOM", reply("OOM command not allowed when used memory > 'maxmemory'."), unavailable, again, ""},
		{"OOM in a script", reply("OOM command not allowed when used memory > 'maxmemory'. script: 4bee2263aa, on @user_script:190."), unavailable, again, ""},
		{"max clients", reply("ERR max number of clients reached"), unavailable, notAgain, ""},
		{"a connection refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), unavailable, notAgain, ""},
		{"a dial that failed", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, unavailable, again, ""},
		{"a read that failed", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, unavailable, notAgain, ""},
		// Text that looks like a code but is no reply: only a reply has
		// one.
		{"NOPERM as text, not a reply", errors.New("NOPERM in a log line"), unavailable, notAgain, ""},
		{"another server", errors.New(`redis: invalid reply: "<!DOCTYPE HTML>\n"`), unavailable, notAgain, "the server does not answer as Redis does"},
		{"a certificate", errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority"), refused, notAgain, "--tls-ca-cert"},
		{"a reply wrapped on its way up", fmt.Errorf("lua.Look: %w", reply("NOPERM User w has no permissions to run the 'zrangebyscore' command")), refused, notAgain, "the ACL rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Wrap("op", tt.err)
			if errors.Is(err, ErrRefused) != tt.refused || errors.Is(err, ErrUnavailable) == tt.refused {
				t.Errorf("Wrap(%q) = %v: refused %v, want %v", tt.err, err, errors.Is(err, ErrRefused), tt.refused)
			}
			if !strings.HasPrefix(err.Error(), "op: ") {
				t.Errorf("Wrap(%q) = %v, which does not start with what failed", tt.err, err)
			}
			if tt.hint != "" && !strings.Contains(err.Error(), tt.hint) {
				t.Errorf("Wrap(%q) = %v, which lacks %q", tt.err, err, tt.hint)
			}
			if NotApplied(tt.err) != tt.again {
				t.Errorf("NotApplied(%q) = %v, want %v", tt.err, NotApplied(tt.err), tt.again)
			}
		})
	}
	if Wrap("op", nil) != nil {
		t.Error("Wrap of nil is not nil")
	}
}

func TestCode(t *testing.T) {
	tests := []struct {
		err  error
		code string
	}{
		{reply("WRONGTYPE Operation against a key"), "WRONGTYPE"},
		{reply("ERR unknown command"), "ERR"},
		{reply("NOSCRIPT"), "NOSCRIPT"},
		{fmt.Errorf("wrapped: %w", reply("BUSY Valkey is busy")), "BUSY"},
		{reply("not a code"), ""},
		{errors.New("READONLY but not a reply"), ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := Code(tt.err); got != tt.code {
			t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.code)
		}
	}
}

func TestUnknownCommandAndSlotMoving(t *testing.T) {
	lmove := reply("ERR unknown command 'lmove', with args beginning with: ")
	if !UnknownCommand(lmove, "lmove") || UnknownCommand(reply("ERR wrong number of arguments for 'lmove' command"), "lmove") {
		t.Error("UnknownCommand does not tell an unknown LMOVE from another error")
	}
	if !SlotMoving(reply("TRYAGAIN Multiple keys request during rehashing of slot")) || SlotMoving(reply("CLUSTERDOWN Hash slot not served")) {
		t.Error("SlotMoving does not tell TRYAGAIN from CLUSTERDOWN")
	}
	if !NoScript(reply("NOSCRIPT No matching script.")) || NoScript(errors.New("NOSCRIPT")) {
		t.Error("NoScript does not tell a NOSCRIPT reply from text")
	}
}
