package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// tlsDialer returns a dialer for rediss:// that makes the TLS handshake
// itself, within timeout, so that a failed one says what it likely means.
// Against a Redis that speaks plain text, go-redis' own dialer waits for a
// handshake that never comes and reports "context deadline exceeded".
func tlsDialer(config *tls.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
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
				return nil, fmt.Errorf("no TLS handshake with %s within %s: the server seems to speak plain text; a rediss:// URL needs a Redis with TLS, and redis:// is for one without", addr, timeout)
			case errors.As(err, &header):
				return nil, fmt.Errorf("no TLS handshake with %s: it answered in plain text; a rediss:// URL needs a Redis with TLS, and redis:// is for one without", addr)
			}
			return nil, err
		}
		return conn, nil
	}
}
