package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority with the certificates it issued,
// written as PEM files into a test's directory, for servers that speak TLS
// and the w8y runs that connect to them.
type PKI struct {
	Dir    string
	CACert string // the CA's certificate
	// ServerCert and ServerKey are for 127.0.0.1 and localhost.
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	client                tls.Certificate // ClientCert and ClientKey, loaded
}

// NewPKI makes a CA named for name, and a server and a client certificate
// that it signs. Two PKIs trust nothing of each other's, which is what a
// test of a wrong CA needs.
func NewPKI(tb testing.TB, name string) *PKI {
	tb.Helper()
	p := &PKI{Dir: tb.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		tb.Fatal(err)
	}
	p.caKey = key
	p.CACert = p.write(tb, "ca.pem", "CERTIFICATE", der)
	p.ServerCert, p.ServerKey, _ = p.issue(tb, "server", x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.ClientKey, p.client = p.issue(tb, "client", x509.ExtKeyUsageClientAuth)
	return p
}

// issue makes a certificate for 127.0.0.1 and localhost with usage, and
// returns the paths of its certificate and key files, and the pair itself.
func (p *PKI) issue(tb testing.TB, name string, usage x509.ExtKeyUsage) (string, string, tls.Certificate) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	pair := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return p.write(tb, name+".pem", "CERTIFICATE", der), p.write(tb, name+"-key.pem", "PRIVATE KEY", keyDER), pair
}

func (p *PKI) write(tb testing.TB, name, kind string, der []byte) string {
	tb.Helper()
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// tlsServer is how a server speaks TLS: with which PKI, and whether it asks
// clients for a certificate.
type tlsServer struct {
	pki         *PKI
	clientCerts bool
}

// TLS makes the server listen only on a TLS port, with p's server
// certificate, and ask clients for a certificate from p's CA when
// clientCerts is set. URL is then rediss://, and Client trusts p's CA (and
// shows p's client certificate when clientCerts is set).
func TLS(p *PKI, clientCerts bool) Option {
	return func(c *config) { c.tls = &tlsServer{pki: p, clientCerts: clientCerts} }
}

// serverArgs are the redis-server arguments for the TLS port.
func (t *tlsServer) serverArgs() []string {
	auth := "no"
	if t.clientCerts {
		auth = "yes"
	}
	return []string{"--tls-cert-file", t.pki.ServerCert, "--tls-key-file", t.pki.ServerKey,
		"--tls-ca-cert-file", t.pki.CACert, "--tls-auth-clients", auth}
}

// clientConfig is the TLS configuration of the server's own Client.
func (t *tlsServer) clientConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(t.pki.ca)
	config := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if t.clientCerts {
		config.Certificates = []tls.Certificate{t.pki.client}
	}
	return config
}
