package redisconn

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// FuzzURL: whatever --redis-url a user types, checking it does not panic,
// and no message about it shows the password it carries, as typed or
// percent-decoded. The URL is built from a password and the rest, so that
// the fuzzer varies both; a password short enough to occur by chance in
// the rest of the message (such as "s") is not looked for.
func FuzzURL(f *testing.F) {
	f.Add("redis", "worker", "p%40ss", "127.0.0.1:6379/0")
	f.Add("rediss", "", "s3cret", "host:6380?addr=h2:1")
	f.Add("unix", "u", "pw pw", "/run/redis.sock?db=x")
	f.Add("redis", "w", "Stapler-Lamp-71", "host:port/-1")
	f.Add("redis", "w", "%zz", "[::1:6379")
	f.Add("http", "w", "hunter22", "host")
	f.Add("redis", "w", "a:b@c", "h/1?password=hunter22")
	f.Fuzz(func(t *testing.T, scheme, user, password, rest string) {
		// A '/' ends the URL's authority: what follows is a path, as
		// net/url and go-redis read it, and holds no password.
		if strings.Contains(user+password, "/") {
			return
		}
		raw := scheme + "://" + user + ":" + password + "@" + rest
		err := checkURL(raw)
		if err == nil {
			return
		}
		msg := err.Error()
		shown := []string{password}
		if decoded, derr := url.PathUnescape(password); derr == nil {
			shown = append(shown, decoded)
		}
		for _, secret := range shown {
			// Where the rest of the URL, or its escaped form, holds the
			// same text, the message may show it without showing the
			// password.
			if len(secret) < 6 || strings.Contains(strconv.Quote(scheme)+strconv.Quote(user)+strconv.Quote(rest)+schemes, secret) {
				continue
			}
			if strings.Contains(strings.ReplaceAll(RedactURL(raw), "xxxxx", ""), secret) {
				t.Errorf("RedactURL(%q) = %q shows the password %q", raw, RedactURL(raw), secret)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("checkURL(%q): %q shows the password %q", raw, msg, secret)
			}
		}
	})
}
