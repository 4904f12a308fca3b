package redisconn

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/w8y/w8y/internal/clip"
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
		// The password, if any, is found in the URL meant: RedactURL finds
		// one only after a scheme.
		meant := meantURL(rawURL)
		return fmt.Errorf("invalid --redis-url %s: it has no scheme: give %s, such as %s", clip.OneLine(redact(rawURL, meant)), schemes, shownURL(meant))
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
	// An option given twice: go-redis reads the first and drops the
	// other without a word (?db=3&db=4 ran on database 3). Only addr=
	// (the addresses of --redis-cluster and --sentinel-master) repeats.
	for name, values := range u.Query() {
		if len(values) > 1 && name != "addr" {
			return fmt.Errorf("invalid --redis-url %s: %s= is given %d times: give it once", shownURL(rawURL), clip.OneLine(name), len(values))
		}
	}
	// A client name that the server refuses at every connection (CLIENT
	// SETNAME takes the characters from ! to ~ alone): refused here, where
	// a worker would otherwise retry it for ever.
	if name := u.Query().Get("client_name"); strings.IndexFunc(name, func(r rune) bool { return r < '!' || r > '~' }) >= 0 {
		return fmt.Errorf("invalid --redis-url %s: client_name=%s: a client name takes letters, digits and the signs from ! to ~, without spaces", shownURL(rawURL), clip.OneLine(name))
	}
	// A port out of range is refused here, in the words of the URL, not
	// at the first dial ("dial tcp: address 99999: invalid port").
	if u.Scheme != "unix" {
		for _, hostPort := range append([]string{u.Host}, u.Query()["addr"]...) {
			_, port, err := net.SplitHostPort(hostPort)
			if err != nil || port == "" {
				continue
			}
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("invalid --redis-url %s: the port %q of %s is not a port number (1 to 65535)", shownURL(rawURL), port, clip.OneLine(hostPort))
			}
		}
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

// mistypedScheme is a scheme written with its "://" mistyped: redis:host,
// redis:/host, redis//host, rediss:host, unix:/path.
var mistypedScheme = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^(rediss?|unix)([:/]+)(.*)$`)
})

// hostPort is what follows "redis:" in redis:6379, a host named redis (a
// container's, say) and its port, not a scheme.
var hostPort = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9]+(/.*)?$`)
})

// meantURL is the URL that rawURL, which lacks "://", most likely means:
// its scheme with the separator mended (redis//host:port is
// redis://host:port, unix:/run/redis.sock is unix:///run/redis.sock), or
// redis:// before the whole of it (localhost:6379, redis:6379).
func meantURL(rawURL string) string {
	m := mistypedScheme().FindStringSubmatch(rawURL)
	if m == nil || m[2] == ":" && hostPort().MatchString(m[3]) {
		return "redis://" + rawURL
	}
	scheme, rest := strings.ToLower(m[1]), strings.TrimLeft(m[3], "/")
	if scheme == "unix" {
		return "unix:///" + rest
	}
	return scheme + "://" + rest
}
