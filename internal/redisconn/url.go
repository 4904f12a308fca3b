package redisconn

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// schemes are the forms of --redis-url that w8y takes.
const schemes = "redis://host:port, rediss://host:port (TLS) or unix:///path/to/socket"

// checkURL refuses, in words, the URLs that go-redis would take without a
// word or refuse in its own: an empty one ("invalid URL scheme: "), one
// without a scheme, such as host:port ("first path segment in URL cannot
// contain colon", or worse, redis:host:port, which go-redis reads as
// localhost:6379), an unknown scheme, and a database that is not a number
// from 0 up (redis://host/-1, which go-redis quietly reads as database 0).
// Errors show the URL with its password redacted.
func checkURL(rawURL string) error {
	if strings.TrimSpace(rawURL) == "" {
		return fmt.Errorf("--redis-url is empty: give %s", schemes)
	}
	scheme, _, found := strings.Cut(rawURL, "://")
	if !found {
		// redis:host:port and redis:/host lack only the slashes.
		bare := rawURL
		for _, s := range []string{"redis:", "rediss:", "unix:"} {
			bare = strings.TrimLeft(strings.TrimPrefix(bare, s), "/")
		}
		// RedactURL (in shownURL) finds a password only after a scheme.
		written := strings.TrimPrefix(shownURL("redis://"+rawURL), "redis://")
		meant := strings.TrimPrefix(shownURL("redis://"+bare), "redis://")
		return fmt.Errorf("invalid --redis-url %s: it has no scheme: give %s, such as redis://%s", written, schemes, meant)
	}
	switch strings.ToLower(scheme) {
	case "redis", "rediss", "unix":
	default:
		return fmt.Errorf("invalid --redis-url %s: invalid URL scheme %q: give %s", shownURL(rawURL), scheme, schemes)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return badURL(rawURL, err)
	}
	db := u.Query().Get("db")
	if u.Scheme != "unix" {
		if path := strings.Trim(u.Path, "/"); path != "" {
			db = path
		}
	}
	if db != "" {
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			return fmt.Errorf("invalid --redis-url %s: the database %q is not a number from 0 up", shownURL(rawURL), db)
		}
	}
	return nil
}
