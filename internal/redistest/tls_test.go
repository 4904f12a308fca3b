package redistest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTLSServer: a TLS server answers only TLS from clients that trust its
// CA, and, when it asks for them, only those with a certificate.
func TestTLSServer(t *testing.T) {
	t.Parallel()
	right, wrong := NewPKI(t, "right"), NewPKI(t, "wrong")
	ping := func(s *Server, config *tls.Config) error {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(s.Port), TLSConfig: config, MaxRetries: -1})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.Ping(ctx).Err()
	}
	trusting := func(p *PKI) *tls.Config {
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(p.CACert)
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("CA certificate %s: %v", p.CACert, err)
		}
		return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	}

	s := Start(t, TLS(right, false))
	if !strings.HasPrefix(s.URL, "rediss://127.0.0.1:") {
		t.Errorf("URL %q, want rediss://", s.URL)
	}
	if err := ping(s, trusting(right)); err != nil {
		t.Errorf("PING with the right CA: %v", err)
	}
	if err := ping(s, trusting(wrong)); err == nil {
		t.Error("PING with the wrong CA answered")
	}
	if err := ping(s, nil); err == nil {
		t.Error("PING without TLS answered")
	}

	mutual := Start(t, TLS(right, true))
	if err := mutual.Client.Ping(context.Background()).Err(); err != nil {
		t.Errorf("Client, with its certificate: %v", err)
	}
	if err := ping(mutual, trusting(right)); err == nil {
		t.Error("PING without a client certificate answered")
	}
}
