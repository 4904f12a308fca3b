package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/rs/zerolog"
)

// errRedis marks a failure talking to Redis: unreachable, timing out, or
// answering with an error.
var errRedis = errors.New("redis")

// errFatalRedis marks a Redis failure that retrying cannot mend: a key of the
// wrong type, or credentials or permissions that Redis refuses.
var errFatalRedis = errors.New("redis refused")

// dialTimeout bounds one attempt to connect to Redis, so an address that
// never answers fails within seconds instead of hanging cron jobs.
const dialTimeout = 3 * time.Second

// redisLog passes go-redis' internal messages (such as dial retries) to
// w8y's logger at debug level, so they never reach stderr as stray lines.
type redisLog struct{ log zerolog.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Msgf("go-redis: "+format, v...)
}

// workerConns is the connections a worker needs for children children at
// once: taking items uses one at a time, and each running child's lock
// refresher and finish one more.
func workerConns(children int) int { return children + 1 }

// newRedisClient parses rawURL and returns a client for it with a pool of
// conns connections. Errors never contain the password.
func newRedisClient(rawURL string, conns int) (*redis.Client, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		// url.Error repeats the whole URL; its inner error is the cause.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, usageError("invalid --redis-url %s: %s", redactURL(rawURL), redact(err.Error(), rawURL))
	}
	// Left to itself, go-redis would try five dials per command and retry a
	// command three times: up to a minute against an address that never
	// answers. One retry of each still rides out a connection that a Redis
	// restart closed; --continuous retries beyond that with its own backoff.
	// A dial_timeout or max_retries in the URL's query still wins.
	if opt.DialTimeout == 0 {
		opt.DialTimeout = dialTimeout
	}
	if opt.MaxRetries == 0 {
		opt.MaxRetries = 1
	}
	opt.DialerRetries = 2
	// Deadlines on our contexts must bound every call: the lock refresher
	// relies on them to give up before the lease runs out.
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = conns
	// CLIENT SETINFO and maintenance-notification handshakes are round trips
	// that w8y has no use for.
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return redis.NewClient(opt), nil
}

// redisError classifies err from a Redis call made for what (a short phrase
// such as "read length of work:list") as errFatalRedis or errRedis.
func redisError(what string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, prefix := range []string{"WRONGTYPE", "NOAUTH", "WRONGPASS", "NOPERM", "ERR unknown command", "ERR AUTH"} {
		if strings.HasPrefix(msg, prefix) {
			return fmt.Errorf("%s: %w: %s", what, errFatalRedis, msg)
		}
	}
	return fmt.Errorf("%s: %w: %w", what, errRedis, err)
}

// userinfoPassword finds the password in scheme://user:password@host even when
// the URL is too malformed for net/url to parse. It is compiled on first use:
// only a URL that fails to parse needs it, and a run that never does should
// not pay for it at start-up.
var userinfoPassword = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*:)([^@]*)@`)
})

// redactURL returns rawURL with any password replaced by "xxxxx".
func redactURL(rawURL string) string {
	return userinfoPassword().ReplaceAllString(rawURL, "${1}xxxxx@")
}

// redact removes the password of rawURL from msg, wherever msg quotes it.
func redact(msg, rawURL string) string {
	password := ""
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		password, _ = u.User.Password()
	} else if m := userinfoPassword().FindStringSubmatch(rawURL); m != nil {
		password = m[2]
	}
	if password == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, password, "xxxxx")
	return strings.ReplaceAll(msg, url.QueryEscape(password), "xxxxx")
}
