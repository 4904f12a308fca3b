// Package redistest starts the redis-server processes that w8y's tests run
// against, each on a free loopback port, and gives the tests one way to wait
// for state and one reader of INFO. Tests never use a Redis that runs on the
// machine already: a test owns its servers, and they stop when it ends.
//
// Only tests import this package. Its files have no _test suffix so that the
// tests of every package can, which a _test.go file would not allow.
package redistest

import (
	"github.com/w8y/w8y/internal/poll"

	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server that one test owns.
type Server struct {
	Port int
	// URL is redis://127.0.0.1:Port, or rediss:// for a server started
	// with TLS, as w8y's --redis-url takes it.
	URL string
	// Dir is the server's working directory: the data it saves, its log
	// (redis.log) and a Cluster node's nodes.conf.
	Dir string
	// Client talks to the server. It never retries a command, so that a
	// test sees every error that w8y would.
	Client *redis.Client

	kind   Kind // the server that ServerEnv chose
	cfg    config
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited
}

// Option changes how Start starts a server.
type Option func(*config)

type config struct {
	args     []string
	port     int    // 0 for a free one, then the one the server got
	dir      string // "" for a new temporary one
	password string
	tls      *tlsServer
	// sentinel is the configuration file of a server started as a
	// Sentinel, which needs a file of its own because it rewrites it.
	sentinel string
	// pick chooses a port to try; tests of the retry replace it.
	pick func(testing.TB) int
}

// Args adds redis-server arguments, such as "--cluster-enabled", "yes".
func Args(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// OnPort starts the server on port instead of a free one: for a test that
// starts w8y first, on an address where no server answers yet.
func OnPort(port int) Option {
	return func(c *config) { c.port = port }
}

// Password makes the server require password (--requirepass), and gives
// Client the password.
func Password(password string) Option {
	return func(c *config) { c.password = password }
}

// startAttempts is how many free ports Start tries: a port that was free
// when the kernel named it can be taken by another test before the server
// binds it.
const startAttempts = 5

// errPortTaken is a server that could not bind its port or, for a Cluster
// node, its bus port.
var errPortTaken = errors.New("address already in use")

// Start starts a redis-server on a free loopback port, in a temporary
// directory, without saving anything to disk unless told to (SHUTDOWN SAVE);
// waits until it answers PING; and stops it when the test ends. Tests fail
// when redis-server is not installed (make test installs it); benchmarks,
// which CI may run without it, are skipped.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	kind := chosen(tb)
	if err := kind.Installed(); err != nil {
		if _, isBench := tb.(*testing.B); isBench {
			tb.Skip(err)
		}
		tb.Fatal(err)
	}
	s := &Server{kind: kind}
	for _, opt := range opts {
		opt(&s.cfg)
	}
	s.Dir = s.cfg.dir
	if s.Dir == "" {
		s.Dir = tb.TempDir()
	}
	tb.Cleanup(func() {
		s.Stop()
		if s.Client != nil {
			s.Client.Close()
		}
		if s.cfg.sentinel != "" && tb.Failed() {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			tb.Logf("sentinel on port %d logged:\n%s", s.Port, log)
		}
	})
	s.start(tb)
	return s
}

// FreePort asks the kernel for a free loopback port. Another process may
// take it before the caller binds it; Start retries for that reason.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start starts the server on its port, or on a free one that it keeps from
// then on, so that a restarted server answers where the old one did.
func (s *Server) start(tb testing.TB) {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		port := s.cfg.port
		if port == 0 {
			port = s.cfg.pickPort(tb)
		}
		err := s.launch(port)
		if err == nil {
			s.cfg.port = port
			return
		}
		if !errors.Is(err, errPortTaken) || s.cfg.port != 0 || attempt == startAttempts {
			tb.Fatal(err)
		}
	}
}

// pickPort chooses a port to start on: for a Cluster node, one whose bus
// port is free too.
func (c config) pickPort(tb testing.TB) int {
	tb.Helper()
	switch {
	case c.pick != nil:
		return c.pick(tb)
	case c.clusterEnabled():
		return clusterPort(tb, FreePort)
	default:
		return FreePort(tb)
	}
}

// launch starts redis-server on port and waits until it answers PING, or
// returns why it did not: errPortTaken for a port in use.
func (s *Server) launch(port int) error {
	// The server logs to its stdout, which is the log file: what it says
	// before it could open a log of its own (a bad argument) is kept too,
	// and no pipe outlives it in a child it forked. A restarted server
	// appends to the log: only what it adds is its own.
	log, err := os.OpenFile(filepath.Join(s.Dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	logStart, err := log.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	args := s.serverArgs(port)
	cmd := exec.Command(s.kind.Server, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.kind.Server, err)
	}
	exited := make(chan struct{})
	// The one owner of Wait: Stop and Restart learn of the exit from
	// exited.
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited, s.Port = cmd, exited, port
	scheme := "redis"
	opt := &redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1, Password: s.cfg.password}
	if s.cfg.tls != nil {
		scheme = "rediss"
		opt.TLSConfig = s.cfg.tls.clientConfig()
	}
	s.URL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
	if s.Client != nil {
		s.Client.Close()
	}
	s.Client = redis.NewClient(opt)

	return s.ready(opt, logStart)
}

// serverArgs is the server's command line for port.
func (s *Server) serverArgs(port int) []string {
	var args []string
	if s.cfg.sentinel != "" {
		args = append(args, s.cfg.sentinel, "--sentinel")
	}
	if s.cfg.tls != nil {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(port))
		args = append(args, s.cfg.tls.serverArgs()...)
	} else {
		args = append(args, "--port", strconv.Itoa(port))
	}
	// Nothing on disk unless asked (SHUTDOWN SAVE); a replica's first sync
	// at once, where redis-server would wait 5s for more replicas to share
	// it.
	args = append(args, "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0")
	if s.cfg.password != "" {
		args = append(args, "--requirepass", s.cfg.password)
	}
	return append(args, s.cfg.args...)
}

// ready waits until the server just started answers PING with the options
// opt, or returns why it did not (its log from logStart on says).
func (s *Server) ready(opt *redis.Options, logStart int64) error {
	// The server gives no signal that it is ready but its answer. The probe
	// gives up on a PING after a second, where Client would wait for its
	// read timeout: on a port that another process took, a PING may get
	// no answer at all.
	port, exited := s.Port, s.exited
	probeOpt := *opt
	probeOpt.DialTimeout, probeOpt.ReadTimeout, probeOpt.WriteTimeout = time.Second, time.Second, time.Second
	probe := redis.NewClient(&probeOpt)
	defer probe.Close()
	answered := poll.Poll(poll.Timeout, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		return probe.Ping(context.Background()).Err() == nil
	})
	select {
	case <-exited:
		log := s.logSince(logStart)
		if strings.Contains(log, "Address already in use") {
			return fmt.Errorf("%s on port %d: %w:\n%s", s.kind.Server, port, errPortTaken, log)
		}
		return fmt.Errorf("%s on port %d exited at start (%v):\n%s", s.kind.Server, port, s.cmd.ProcessState, log)
	default:
	}
	if !answered {
		s.Stop()
		return fmt.Errorf("%s on port %d never answered PING within %s:\n%s", s.kind.Server, port, poll.Timeout, s.logSince(logStart))
	}
	return nil
}

// logSince is what the server has logged from offset on.
func (s *Server) logSince(offset int64) string {
	log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if offset <= int64(len(log)) {
		log = log[offset:]
	}
	return string(log)
}

// running reports whether the server has not exited.
func (s *Server) running() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Stop kills the server, as a crash would, without letting it save, and
// waits until it has exited. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if !s.running() {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// ShutDown shuts the server down with SHUTDOWN SAVE, as an operator stops
// one without losing its data, and waits until it has exited; Restart
// starts it again. Shutting down a stopped server does nothing.
func (s *Server) ShutDown(tb testing.TB) {
	tb.Helper()
	if !s.running() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	// SHUTDOWN SAVE saves even without save points; its reply is the
	// connection closing.
	_ = s.Client.Do(ctx, "SHUTDOWN", "SAVE").Err()
	select {
	case <-s.exited:
	case <-ctx.Done():
		tb.Fatalf("redis-server on port %d did not shut down within %s", s.Port, poll.Timeout)
	}
	if !s.cmd.ProcessState.Success() {
		tb.Fatalf("redis-server on port %d did not shut down cleanly: %v", s.Port, s.cmd.ProcessState)
	}
}

// Restart starts the server again on its port, in its directory and with
// its options, so that the new one loads what the old one saved. A running
// server is first shut down (see ShutDown); one that Stop killed comes back
// with only what it had saved before, as after a crash. Client is replaced
// by one for the new server.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.ShutDown(tb)
	s.start(tb)
}

// argValue is the value that follows the redis-server argument name in
// args, or "".
func argValue(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// Client starts a redis-server for the test, as Start does, and returns its
// client with the context for the test's calls to it. The context ends when
// the test does, and a test's at poll.Timeout too, so that a call that Redis never
// answers fails the test instead of hanging it; a benchmark's has no
// deadline, since it runs as long as -benchtime asks.
func Client(tb testing.TB, opts ...Option) (*redis.Client, context.Context) {
	tb.Helper()
	rdb := Start(tb, opts...).Client
	ctx := tb.Context()
	if _, bench := tb.(*testing.B); !bench {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, poll.Timeout)
		tb.Cleanup(cancel)
	}
	return rdb, ctx
}

// RestartWith restarts the server as Restart does, with opts added to the
// options it was started with: a restart that brings another
// configuration, as an operator's or a managed service's may.
func (s *Server) RestartWith(tb testing.TB, opts ...Option) {
	tb.Helper()
	for _, opt := range opts {
		opt(&s.cfg)
	}
	s.Restart(tb)
}
