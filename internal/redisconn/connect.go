package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/clip"
)

// dialTimeout bounds one attempt to connect to Redis, so an address that
// never answers fails within seconds instead of hanging cron jobs.
const dialTimeout = 3 * time.Second

// redisLog passes go-redis' internal messages (such as dial retries) to
// w8y's logger at debug level, so they never reach stderr as stray lines.
type redisLog struct{ log zerolog.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Msgf("go-redis: "+format, v...)
}

// SetLogger sends go-redis' own messages to log at debug level. go-redis
// logs through one process-wide logger, and only w8y's logger may write to
// stderr: call it once, before the first client is made.
func SetLogger(log zerolog.Logger) { redis.SetLogger(redisLog{log: log}) }

// Connect returns the client for a w8y command (see New). A client that
// accepts any server certificate is announced on every run, so that it
// cannot be forgotten.
func Connect(opts *Options, conns int, log zerolog.Logger) (redis.UniversalClient, error) {
	client, err := New(opts, conns)
	if err != nil {
		return nil, err
	}
	if insecureTLS(client) {
		log.Warn().Msg("TLS CERTIFICATE VERIFICATION IS OFF: the connection to Redis is encrypted, but anyone on the network path can pose as the server and read the password and every item")
	}
	warnIfPasswordUnneeded(client, opts, log)
	return client, nil
}

// New returns a client for the Redis that opts describe: one
// server (redis://, rediss://, unix://), a Cluster (--redis-cluster), or
// the master that Sentinel names (--sentinel-master), with a pool of conns
// connections (per node, on a Cluster). It reads the password file and the
// TLS files. Errors never contain a password.
func New(opts *Options, conns int) (redis.UniversalClient, error) {
	rawURL := opts.URL
	if err := checkURL(rawURL); err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, badURL(rawURL, err)
	}
	// go-redis takes any whole number for the protocol, and speaks RESP3,
	// or RESP2 where the server refuses what HELLO asked: a mistyped
	// ?protocol=9 would run without a word. Only the two that Redis speaks
	// are taken.
	if q := u.Query(); q.Has("protocol") && q.Get("protocol") != "2" && q.Get("protocol") != "3" {
		return nil, fmt.Errorf("invalid --redis-url %s: protocol=%s: protocol takes 2 (RESP2) or 3 (RESP3, the default)", shownURL(rawURL), clip.OneLine(q.Get("protocol")))
	}
	password, err := readPassword(opts, u)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "unix" && (opts.Cluster || opts.SentinelMaster != "") {
		return nil, fmt.Errorf("a unix:// socket reaches one server: it cannot be used with --redis-cluster or --sentinel-master")
	}
	switch {
	case opts.Cluster:
		opt, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, badURL(rawURL, err)
		}
		if err := (shared{&opt.Password, &opt.TLSConfig, &opt.DialTimeout, &opt.MaxRetries, &opt.DialerRetries, &opt.ContextTimeoutEnabled, &opt.PoolSize, &opt.PipelinePoolSize, &opt.DisableIdentity, &opt.Dialer}).apply(opts, password, conns); err != nil {
			return nil, err
		}
		opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		return redis.NewClusterClient(opt), nil
	case opts.SentinelMaster != "":
		if u.Query().Has("password") || u.Query().Has("username") {
			return nil, fmt.Errorf("invalid --redis-url %s: give the master's user and password in the URL's user info (redis://user:password@sentinel:26379), %s or --redis-password-file, not as query parameters", shownURL(rawURL), PasswordVar)
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
		opt.SentinelUsername, opt.SentinelPassword = "", opts.SentinelPassword
		if err := (shared{&opt.Password, &opt.TLSConfig, &opt.DialTimeout, &opt.MaxRetries, &opt.DialerRetries, &opt.ContextTimeoutEnabled, &opt.PoolSize, &opt.PipelinePoolSize, &opt.DisableIdentity, &opt.Dialer}).apply(opts, password, conns); err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(opt), nil
	default:
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			if u.Query().Has("addr") {
				return nil, fmt.Errorf("invalid --redis-url %s: several addresses (?addr=) need --redis-cluster or --sentinel-master", shownURL(rawURL))
			}
			return nil, badURL(rawURL, err)
		}
		if err := (shared{&opt.Password, &opt.TLSConfig, &opt.DialTimeout, &opt.MaxRetries, &opt.DialerRetries, &opt.ContextTimeoutEnabled, &opt.PoolSize, &opt.PipelinePoolSize, &opt.DisableIdentity, &opt.Dialer}).apply(opts, password, conns); err != nil {
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
	return fmt.Errorf("invalid --redis-url %s: %s", shownURL(rawURL), redact(queryWords(rawURL, err.Error()), rawURL))
}

// goRedisQuery matches go-redis' words for a query option of the URL that
// it could not read, which end in Go's own (strconv.Atoi: parsing "x":
// invalid syntax). It is compiled on first use, by a URL that fails.
var goRedisQuery = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^redis: invalid (\w+) (number|duration|boolean): `)
})

// queryWords puts go-redis' message for a query option it could not read
// (msg) in the user's words: the option as they wrote it, and what it
// takes. Other messages are left as they are.
func queryWords(rawURL, msg string) string {
	if rest, ok := strings.CutPrefix(msg, "redis: unexpected option: "); ok {
		return "unknown query option " + rest + ": the URL's query takes go-redis' options (dial_timeout, read_timeout, write_timeout, max_retries...), and addr= with --redis-cluster or --sentinel-master"
	}
	m := goRedisQuery().FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	name, value := m[1], ""
	if u, err := url.Parse(rawURL); err == nil {
		value = u.Query().Get(name)
	}
	takes := map[string]string{
		"number":   "a whole number",
		"duration": "a length of time, such as 500ms or 5s (a bare number is seconds; 0 or less turns the timeout off)",
		"boolean":  "true or false (or 1 or 0)",
	}[m[2]]
	return fmt.Sprintf("%s=%s: %s takes %s", name, clip.OneLine(value), name, takes)
}

// readPassword returns the password from W8Y_REDIS_PASSWORD or
// --redis-password-file, or "" when neither gives one and the URL's own (if
// any) stands. A password given in the URL as well is refused: which of two
// should win is a guess that would fail at the worst time.
func readPassword(opts *Options, u *url.URL) (string, error) {
	password, from := opts.Password, PasswordVar
	if opts.PasswordFile != "" {
		data, err := os.ReadFile(opts.PasswordFile)
		if err != nil {
			// The error names the file, never its contents.
			return "", fmt.Errorf("read --redis-password-file: %w", err)
		}
		// Editors and `echo secret >file` end the file with a newline that
		// is not part of the password.
		password = strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
		if password == "" {
			return "", fmt.Errorf("--redis-password-file %s is empty", opts.PasswordFile)
		}
		from = "--redis-password-file"
	}
	if password == "" {
		return "", nil
	}
	if _, set := u.User.Password(); set {
		return "", fmt.Errorf("the password is given twice, in --redis-url and in %s: give it once", from)
	}
	return password, nil
}

// shared points at the fields that all of go-redis' option structs share
// and that w8y sets the same way whatever the deployment.
type shared struct {
	password        *string
	tls             **tls.Config
	dialTimeout     *time.Duration
	maxRetries      *int
	dialerRetries   *int
	contextTimeout  *bool
	poolSize        *int
	pipelinePool    *int
	disableIdentity *bool
	dialer          *func(ctx context.Context, network, addr string) (net.Conn, error)
}

// apply sets password (if not "") and the TLS options, bounds dials and
// retries, and sizes the pool to conns connections, pipelines' too.
func (c shared) apply(opts *Options, password string, conns int) error {
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
	// answers. One retry of a command (with a dial of its own) still rides
	// out a connection that a Redis restart closed; --continuous retries
	// beyond that with its own backoff, and the lease with its own pace.
	// A dial_timeout or max_retries in the URL's query still wins.
	if *c.dialTimeout == 0 {
		*c.dialTimeout = dialTimeout
	}
	*c.dialer = dialer(config, *c.dialTimeout)
	if *c.maxRetries == 0 {
		*c.maxRetries = 1
	}
	// w8y's dialer reports a failed dial on the connection's first use (see
	// failOnUse), so go-redis never sees one fail: the command's retry is
	// the dial's.
	*c.dialerRetries = 1
	// Deadlines on our contexts must bound every call: the lock refresher
	// relies on them to give up before the lease runs out.
	*c.contextTimeout = true
	*c.poolSize = conns
	// go-redis (v9.23) sends pipelines through a pool of their own, of up
	// to ten more connections, which it keeps open once dialed: a worker's
	// few pipelines (its start's checks, the rate's record) held a third
	// connection beside its wait and its beat for as long as it ran, a
	// third of an idle fleet's connections, each of which Redis tends
	// every second (clientsCron). Pipelines share the pool above, which
	// conns counts them in. A pipeline_pool_size in the URL's query still
	// wins.
	if *c.pipelinePool == 0 {
		*c.pipelinePool = -1
	}
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
			return nil, fmt.Errorf("the --tls-* options need a rediss:// URL")
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
			return nil, fmt.Errorf("--tls-ca-cert %s holds no PEM certificate", opts.TLSCACert)
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
