package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// dialer returns how w8y connects to a server: over TCP or a unix socket,
// or with TLS when config is not nil (see tlsDialer), within timeout; a
// failed dial reaches go-redis as a connection that fails (see failOnUse).
func dialer(config *tls.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if config != nil {
		return failOnUse(tlsDialer(config, timeout))
	}
	// go-redis' own dialer, as NewDialer makes it: its keep-alive probes
	// notice a server that vanished without closing the connection.
	plain := &net.Dialer{Timeout: timeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
	return failOnUse(plain.DialContext)
}

// failOnUse hands go-redis a failed dial as a connection that fails its
// first use with the dial's error, instead of as the error.
//
// go-redis' pool (v9.23) counts failed dials, and after as many as it
// holds connections it dials no more: it returns the last dial's error to
// every caller until a dial of its own, tried once a second, succeeds.
// w8y's pools hold two or three connections, so any outage trips it, and
// every command fails for up to a second after Redis is back: long enough
// for a lock's lease to run out while its child runs on (issue 24). w8y
// paces its retries itself (the lease's refreshes, the loop's back-off),
// so it has no use for the pool's: as a connection that failed, a failed
// dial is dropped from the pool, and the next command dials again at once.
// The command fails with the dial's own error, a *net.OpError, which
// go-redis retries (MaxRetries) and Wrap sorts as it did before.
func failOnUse(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return failedConn{err: failedDial{err}, addr: dialAddr{network, addr}}, nil
		}
		return conn, nil
	}
}

// failedConn is a dial that failed with err, as a connection that fails
// every read and write with it.
type failedConn struct {
	err  error
	addr net.Addr
}

func (c failedConn) Read([]byte) (int, error)         { return 0, c.err }
func (c failedConn) Write([]byte) (int, error)        { return 0, c.err }
func (c failedConn) Close() error                     { return nil }
func (c failedConn) LocalAddr() net.Addr              { return c.addr }
func (c failedConn) RemoteAddr() net.Addr             { return c.addr }
func (c failedConn) SetDeadline(time.Time) error      { return nil }
func (c failedConn) SetReadDeadline(time.Time) error  { return nil }
func (c failedConn) SetWriteDeadline(time.Time) error { return nil }

// failedDial is a dial's error as the connection's reads and writes
// report it. go-redis unwraps the error of a connection that failed its
// handshake once, for the caller; without this layer that would strip the
// *net.OpError of its address ("connect: connection refused").
type failedDial struct{ err error }

func (e failedDial) Error() string { return e.err.Error() }
func (e failedDial) Unwrap() error { return e.err }

// dialAddr is the address that a failed dial was for.
type dialAddr struct{ network, addr string }

func (a dialAddr) Network() string { return a.network }
func (a dialAddr) String() string  { return a.addr }

// tlsDialer returns a dialer for rediss:// that makes the TLS handshake
// itself, within timeout, so that a failed one says what it likely means.
// Against a Redis that speaks plain text, go-redis' own dialer waits for a
// handshake that never comes and reports "context deadline exceeded".
//
// go-redis dials again at once when a dial fails (DialerRetries), which
// rides out a restarting server but would only wait out the same silence a
// second time: for one timeout after a handshake went unanswered, a dial to
// that address fails at once with the same error.
func tlsDialer(config *tls.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return rememberingTLSDialer(config, timeout, timeout)
}

// rememberingTLSDialer is tlsDialer, failing at once for remember after an
// address left a handshake unanswered for timeout.
func rememberingTLSDialer(config *tls.Config, timeout, remember time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var (
		mu     sync.Mutex
		silent = map[string]silence{}
	)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		last, seen := silent[addr]
		mu.Unlock()
		if seen && time.Since(last.at) < remember {
			return nil, last.err
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		config := config
		if config.ServerName == "" {
			// As tls.Dial does: the name to verify is the address's host.
			config = config.Clone()
			config.ServerName, _, _ = net.SplitHostPort(addr)
		}
		conn := tls.Client(raw, config)
		if err := conn.HandshakeContext(ctx); err != nil {
			raw.Close()
			var header tls.RecordHeaderError
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				err = fmt.Errorf("no TLS handshake with %s within %s: the server seems to speak plain text; a rediss:// URL needs a Redis with TLS, and redis:// is for one without", addr, timeout)
				// The caller's deadline may have cut the wait short, and go-redis
				// gives each dial exactly the timeout given here too: a server
				// that stayed silent for a second, which a TLS server never
				// does, is taken at its silence.
				if time.Since(start) >= min(timeout, time.Second) {
					mu.Lock()
					silent[addr] = silence{time.Now(), err}
					mu.Unlock()
				}
				return nil, err
			case errors.As(err, &header):
				return nil, fmt.Errorf("no TLS handshake with %s: it answered in plain text; a rediss:// URL needs a Redis with TLS, and redis:// is for one without", addr)
			}
			return nil, err
		}
		return conn, nil
	}
}

// silence is a TLS handshake that an address left unanswered: when, and
// the error it gave.
type silence struct {
	at  time.Time
	err error
}
