package control

import (
	"errors"
	"testing"
)

// TestWho: $USER first, then the login name, then the uid; always with the
// host.
func TestWho(t *testing.T) {
	noLogin := func() (string, error) { return "", errors.New("unknown userid 1000") }
	login := func() (string, error) { return "root", nil }
	host := func() (string, error) { return "vm", nil }
	noHost := func() (string, error) { return "", errors.New("no name") }
	env := func(user string) func(string) string {
		return func(name string) string {
			if name == "USER" {
				return user
			}
			return ""
		}
	}
	for _, tt := range []struct {
		user  string
		login func() (string, error)
		host  func() (string, error)
		want  string
	}{
		{"ops", login, host, "ops@vm"},
		{"", login, host, "root@vm"},
		{"", noLogin, host, "uid 1000@vm"},
		{"ops", noLogin, noHost, "ops@unknown-host"},
	} {
		if got := who(env(tt.user), tt.login, 1000, tt.host); got != tt.want {
			t.Errorf("USER=%q: %q, want %q", tt.user, got, tt.want)
		}
	}
}
