package redisconn

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// unneededCheckTimeout bounds the one AUTH that checks a password (see
// warnIfPasswordUnneeded): a Redis that does not answer it in 2s is left
// for the first real command to report.
const unneededCheckTimeout = 2 * time.Second

// warnIfPasswordUnneeded warns, once, when a password was given for the
// default user (no user in --redis-url, or "default") and the server asks
// for none: Redis then takes any password without a word (HELLO's AUTH
// for a user with nopass), so that a worker pointed at the wrong server,
// a test instance without requirepass say, would otherwise run there
// silently. The old one-argument AUTH is the one command that tells: a
// server without a password for the default user refuses it with "called
// without any password configured". It costs one round trip at start, and
// only when a password is given; any other answer, or none, says nothing.
func warnIfPasswordUnneeded(client redis.UniversalClient, opts *Options, log zerolog.Logger) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		return
	}
	if user := u.User.Username(); user != "" && user != "default" {
		return
	}
	password, given := u.User.Password()
	from := "--redis-url"
	if !given {
		if password, err = readPassword(opts, u); err != nil || password == "" {
			return
		}
		from = PasswordVar
		if opts.PasswordFile != "" {
			from = "--redis-password-file"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), unneededCheckTimeout)
	defer cancel()
	if err := client.Do(ctx, "AUTH", password).Err(); err != nil && strings.Contains(err.Error(), "without any password configured") {
		log.Warn().Msgf("the server at %s asks for no password, yet %s gives one: is it the Redis you meant? (the password is not needed there)", shownURL(opts.URL), from)
	}
}
