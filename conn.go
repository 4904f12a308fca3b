package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
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

// connect returns the client for a run of w8y, worker or --status (see
// newRedisClient). A client that accepts any server certificate is
// announced on every run, so that it cannot be forgotten.
func connect(opts *Options, conns int, log zerolog.Logger) (redis.UniversalClient, error) {
	// go-redis logs through a process-wide logger, and only w8y's own
	// logger may write to stderr.
	redis.SetLogger(redisLog{log: log})
	client, err := newRedisClient(opts, conns)
	if err != nil {
		return nil, err
	}
	if insecureTLS(client) {
		log.Warn().Msg("TLS CERTIFICATE VERIFICATION IS OFF: the connection to Redis is encrypted, but anyone on the network path can pose as the server and read the password and every item")
	}
	return client, nil
}

// workerConns is the connections a worker needs for children children at
// once: taking items uses one at a time, and each running child's lock
// refresher and finish one more. With a Cluster, that is per node.
func workerConns(children int) int { return children + 1 }

// newRedisClient returns a client for the Redis that opts describe: one
// server (redis://, rediss://, unix://), a Cluster (--redis-cluster), or
// the master that Sentinel names (--sentinel-master), with a pool of conns
// connections (per node, on a Cluster). It reads the password file and the
// TLS files. Errors never contain a password.
func newRedisClient(opts *Options, conns int) (redis.UniversalClient, error) {
	rawURL := opts.RedisURL
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, badURL(rawURL, err)
	}
	password, err := readPassword(opts, u)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "unix" && (opts.RedisCluster || opts.SentinelMaster != "") {
		return nil, usageError("a unix:// socket reaches one server: it cannot be used with --redis-cluster or --sentinel-master")
	}
	switch {
	case opts.RedisCluster:
		opt, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, badURL(rawURL, err)
		}
		c := common{&opt.Password, &opt.TLSConfig, &opt.DialTimeout, &opt.MaxRetries, &opt.DialerRetries, &opt.ContextTimeoutEnabled, &opt.PoolSize, &opt.DisableIdentity}
		if err := c.tune(opts, password, conns); err != nil {
			return nil, err
		}
		opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		return redis.NewClusterClient(opt), nil
	case opts.SentinelMaster != "":
		if u.Query().Has("password") || u.Query().Has("username") {
			return nil, usageError("invalid --redis-url %s: give the master's user and password in the URL's user info (redis://user:password@sentinel:26379), %s or --redis-password-file, not as query parameters", redactURL(rawURL), redisPasswordVar)
		}
		opt, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, badURL(rawURL, err)
		}
		opt.MasterName = opts.SentinelMaster
		// go-redis takes the URL's user info for the sentinels'. w8y takes
		// it for the master's, as in every other form of --redis-url: that
		// is where the data and its ACL users live. Sentinels that want a
		// password of their own get it from W8Y_SENTINEL_PASSWORD.
		opt.Username, opt.Password = opt.SentinelUsername, opt.SentinelPassword
		opt.SentinelUsername, opt.SentinelPassword = "", opts.sentinelPassword
		c := common{&opt.Password, &opt.TLSConfig, &opt.DialTimeout, &opt.MaxRetries, &opt.DialerRetries, &opt.ContextTimeoutEnabled, &opt.PoolSize, &opt.DisableIdentity}
		if err := c.tune(opts, password, conns); err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(opt), nil
	default:
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			if u.Query().Has("addr") {
				return nil, usageError("invalid --redis-url %s: several addresses (?addr=) need --redis-cluster or --sentinel-master", redactURL(rawURL))
			}
			return nil, badURL(rawURL, err)
		}
		c := common{&opt.Password, &opt.TLSConfig, &opt.DialTimeout, &opt.MaxRetries, &opt.DialerRetries, &opt.ContextTimeoutEnabled, &opt.PoolSize, &opt.DisableIdentity}
		if err := c.tune(opts, password, conns); err != nil {
			return nil, err
		}
		opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		return redis.NewClient(opt), nil
	}
}

// badURL is the error for a --redis-url that go-redis cannot parse.
func badURL(rawURL string, err error) error {
	// url.Error repeats the whole URL; its inner error is the cause.
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return usageError("invalid --redis-url %s: %s", redactURL(rawURL), redact(err.Error(), rawURL))
}

// readPassword returns the password from W8Y_REDIS_PASSWORD or
// --redis-password-file, or "" when neither gives one and the URL's own (if
// any) stands. A password given in the URL as well is refused: which of two
// should win is a guess that would fail at the worst time.
func readPassword(opts *Options, u *url.URL) (string, error) {
	password, from := opts.redisPassword, redisPasswordVar
	if opts.RedisPasswordFile != "" {
		data, err := os.ReadFile(opts.RedisPasswordFile)
		if err != nil {
			// The error names the file, never its contents.
			return "", fmt.Errorf("read --redis-password-file: %w", err)
		}
		// Editors and `echo secret >file` end the file with a newline that
		// is not part of the password.
		password = strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
		if password == "" {
			return "", usageError("--redis-password-file %s is empty", opts.RedisPasswordFile)
		}
		from = "--redis-password-file"
	}
	if password == "" {
		return "", nil
	}
	if _, set := u.User.Password(); set {
		return "", usageError("the password is given twice, in --redis-url and in %s: give it once", from)
	}
	return password, nil
}

// common points at the fields that all of go-redis' option structs share
// and that w8y sets the same way whatever the deployment.
type common struct {
	password        *string
	tls             **tls.Config
	dialTimeout     *time.Duration
	maxRetries      *int
	dialerRetries   *int
	contextTimeout  *bool
	poolSize        *int
	disableIdentity *bool
}

// tune applies password (if not "") and the TLS options, bounds dials and
// retries, and sizes the pool to conns connections.
func (c common) tune(opts *Options, password string, conns int) error {
	if password != "" {
		*c.password = password
	}
	config, err := tlsConfig(*c.tls, opts)
	if err != nil {
		return err
	}
	*c.tls = config
	// Left to itself, go-redis would try five dials per command and retry a
	// command three times: up to a minute against an address that never
	// answers. One retry of each still rides out a connection that a Redis
	// restart closed; --continuous retries beyond that with its own backoff.
	// A dial_timeout or max_retries in the URL's query still wins.
	if *c.dialTimeout == 0 {
		*c.dialTimeout = dialTimeout
	}
	if *c.maxRetries == 0 {
		*c.maxRetries = 1
	}
	*c.dialerRetries = 2
	// Deadlines on our contexts must bound every call: the lock refresher
	// relies on them to give up before the lease runs out.
	*c.contextTimeout = true
	*c.poolSize = conns
	// CLIENT SETINFO and maintenance-notification handshakes are round trips
	// that w8y has no use for.
	*c.disableIdentity = true
	return nil
}

// tlsConfig applies the --tls-* options to base, the configuration that
// go-redis made for a rediss:// URL, or nil for a URL without TLS.
func tlsConfig(base *tls.Config, opts *Options) (*tls.Config, error) {
	if base == nil {
		if opts.TLSCACert != "" || opts.TLSCert != "" || opts.TLSServerName != "" || opts.TLSInsecureSkipVerify {
			return nil, usageError("the --tls-* options need a rediss:// URL")
		}
		return nil, nil
	}
	config := base.Clone()
	config.MinVersion = max(config.MinVersion, tls.VersionTLS12)
	if opts.TLSServerName != "" {
		config.ServerName = opts.TLSServerName
	}
	if opts.TLSCACert != "" {
		pem, err := os.ReadFile(opts.TLSCACert)
		if err != nil {
			return nil, fmt.Errorf("read --tls-ca-cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageError("--tls-ca-cert %s holds no PEM certificate", opts.TLSCACert)
		}
		config.RootCAs = pool
	}
	if opts.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCert, opts.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("load --tls-cert and --tls-key: %w", err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	if opts.TLSInsecureSkipVerify {
		config.InsecureSkipVerify = true
	}
	return config, nil
}

// insecureTLS reports whether client accepts any server certificate, through
// --tls-insecure-skip-verify or the URL's skip_verify=true.
func insecureTLS(client redis.UniversalClient) bool {
	var config *tls.Config
	switch c := client.(type) {
	case *redis.Client:
		config = c.Options().TLSConfig
	case *redis.ClusterClient:
		config = c.Options().TLSConfig
	}
	return config != nil && config.InsecureSkipVerify
}

// redisError classifies err from a Redis call made for what (a short phrase
// such as "read length of work:list") as errFatalRedis or errRedis.
func redisError(what string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	// A certificate that does not verify will not verify on the next try
	// either: it takes an operator, as a wrong password does.
	var verify *tls.CertificateVerificationError
	if errors.As(err, &verify) || strings.Contains(msg, "x509: ") {
		return fmt.Errorf("%s: %w: the server's TLS certificate was not accepted (see --tls-ca-cert and --tls-server-name): %s", what, errFatalRedis, msg)
	}
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

// queryPassword finds a password given as a query parameter, which
// go-redis' Sentinel URLs accept and w8y refuses, in an error that quotes
// the URL.
var queryPassword = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`([?&][a-z_]*password=)[^&#]*`)
})

// redactURL returns rawURL with any password replaced by "xxxxx".
func redactURL(rawURL string) string {
	rawURL = userinfoPassword().ReplaceAllString(rawURL, "${1}xxxxx@")
	return queryPassword().ReplaceAllString(rawURL, "${1}xxxxx")
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
