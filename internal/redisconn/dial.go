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
