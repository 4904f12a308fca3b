package redisconn

import (
	"errors"
	"strings"
	"testing"
)

func TestRedisErrorClasses(t *testing.T) {
	tests := []struct {
		msg   string
		fatal bool
		hint  string
	}{
		{"WRONGTYPE Operation against a key holding the wrong kind of value", true, ""},
		{"WRONGPASS invalid username-password pair or user is disabled.", true, ""},
		{"NOAUTH Authentication required.", true, ""},
		{"NOPERM User has no permissions", true, ""},
		{"ERR unknown command 'LMOVE'", true, ""},
		{"ERR The user executing the script can't run this command or subcommand script: 9663b8, on @user_script:1.", true, "the ACL rule in docs/recipes.md"},
		{"LOADING Redis is loading the dataset in memory", false, ""},
		{"dial tcp 127.0.0.1:1: connect: connection refused", false, ""},
		{`redis: invalid reply: "<!DOCTYPE HTML>\n"`, false, "the server does not answer as Redis does"},
	}
	for _, tt := range tests {
		err := Wrap("op", errors.New(tt.msg))
		if tt.hint != "" && !strings.Contains(err.Error(), tt.hint) {
			t.Errorf("%q: %v lacks %q", tt.msg, err, tt.hint)
		}
		if errors.Is(err, ErrRefused) != tt.fatal || errors.Is(err, ErrUnavailable) == tt.fatal {
			t.Errorf("%q: fatal %v, want %v", tt.msg, errors.Is(err, ErrRefused), tt.fatal)
		}
	}
}
