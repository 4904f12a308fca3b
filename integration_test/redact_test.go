package integration_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestPercentEncodedPasswordNeverShows: a password written in the URL
// percent-encoded (p%40ss for p@ss, as a URL must write an '@') shows in no
// line that w8y or w8yctl writes, neither as written nor decoded, whether
// Redis refuses it, refuses the user a command, or the URL is refused
// before Redis is reached.
func TestPercentEncodedPasswordNeverShows(t *testing.T) {
	t.Parallel()
	s := setup(t, "pe")
	s.items("a")
	// The right password, p@ss, for a user who may only PING: its first
	// script is refused with NOPERM.
	if err := s.Client.Do(ctx(t), "ACL", "SETUSER", "pinger", "on", ">p@ss Tower-9", "~*", "resetchannels", "-@all", "+ping").Err(); err != nil {
		t.Fatal(err)
	}
	url := func(user, password, rest string) string {
		return fmt.Sprintf("redis://%s:%s@127.0.0.1:%d%s", user, password, s.Port, rest)
	}
	const encoded, decoded = "p%40ss%20Tower-9", "p@ss Tower-9"
	cases := []struct {
		name string
		cmd  func(args ...string) result
		args []string
		code int
		want string
	}{
		{"w8y, wrong password", w8yRun(t), []string{"-u", url("nobody", encoded, ""), "-k", "pe", "true"}, 125, "WRONGPASS"},
		{"w8y, NOPERM", w8yRun(t), []string{"-u", url("pinger", encoded, ""), "-k", "pe", "true"}, 125, "ACL"},
		{"w8y, --status", w8yRun(t), []string{"-u", url("pinger", encoded, ""), "-k", "pe", "--status"}, 125, "ACL"},
		{"w8y, a database that is not a number", w8yRun(t), []string{"-u", url("pinger", encoded, "/x"), "-k", "pe", "true"}, 125, "database"},
		{"w8y, no scheme", w8yRun(t), []string{"-u", strings.TrimPrefix(url("pinger", encoded, ""), "redis://"), "-k", "pe", "true"}, 125, "no scheme"},
		{"w8y, a scheme pasted with a space", w8yRun(t), []string{"-u", " " + url("pinger", encoded, ""), "-k", "pe", "true"}, 125, "scheme"},
		{"w8yctl status, wrong password", ctlRun(t), []string{"-u", url("nobody", encoded, ""), "-k", "pe", "status"}, 125, "WRONGPASS"},
		{"w8yctl pause, NOPERM", ctlRun(t), []string{"-u", url("pinger", encoded, ""), "-k", "pe", "pause", "a"}, 125, ""},
	}
	for _, c := range cases {
		r := c.cmd(c.args...)
		if r.Code != c.code || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s: exit %d, want %d with %q: %s", c.name, r.Code, c.code, c.want, r)
		}
		for _, secret := range []string{encoded, decoded, "p@ss", "p%40ss", "Tower-9"} {
			if strings.Contains(r.Stderr+r.Stdout, secret) {
				t.Errorf("%s: the output shows %q:\n%s%s", c.name, secret, r.Stdout, r.Stderr)
			}
		}
	}
}

func w8yRun(t *testing.T) func(args ...string) result {
	return func(args ...string) result { t.Helper(); return runW8y(t, nil, args...) }
}

func ctlRun(t *testing.T) func(args ...string) result {
	return func(args ...string) result { t.Helper(); return runCtl(t, nil, args...) }
}
