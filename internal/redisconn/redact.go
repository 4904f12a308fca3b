package redisconn

import (
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/w8y/w8y/internal/clip"
)

// userinfoPassword finds the password in scheme://user:password@host even when
// the URL is too malformed for net/url to parse, whatever stands before
// "://": a scheme that is not one (" redis", pasted with a space) is the
// first thing wrong with the URL, and its error quotes it. It is compiled on first use:
// only a URL that fails to parse needs it, and a run that never does should
// not pay for it at start-up.
var userinfoPassword = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?s)^(.*?://[^:/]*:)([^/]*)@`)
})

// queryPassword finds a password given as a query parameter, which
// go-redis' Sentinel URLs accept and w8y refuses, in an error that quotes
// the URL.
var queryPassword = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`([?&][a-z_]*password=)[^&#]*`)
})

// RedactURL returns rawURL with any password replaced by "xxxxx".
func RedactURL(rawURL string) string {
	rawURL = userinfoPassword().ReplaceAllString(rawURL, "${1}xxxxx@")
	return queryPassword().ReplaceAllString(rawURL, "${1}xxxxx")
}

// shownURL is rawURL as a message shows it: its password redacted, and its
// control characters (a newline pasted with it) escaped as Go writes them,
// so that the message stays one line.
func shownURL(rawURL string) string {
	return clip.OneLine(RedactURL(rawURL))
}

// redact removes the password of rawURL from msg, wherever msg quotes it:
// as the URL writes it (p%40ss%20w), decoded (p@ss w), or escaped again as
// a query writes it (p%40ss+w).
func redact(msg, rawURL string) string {
	var password, written string
	if m := userinfoPassword().FindStringSubmatch(rawURL); m != nil {
		written = m[2]
	}
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		password, _ = u.User.Password()
	} else {
		password = written
	}
	if password == "" {
		return msg
	}
	for _, shown := range []string{password, written, url.QueryEscape(password)} {
		if shown != "" {
			msg = strings.ReplaceAll(msg, shown, "xxxxx")
		}
	}
	return msg
}
