// Package redisconn connects w8y to the Redis its options name (one server,
// a Cluster or the master that Sentinel names; TLS, passwords, ACL users),
// keeps passwords out of messages and out of children's environments,
// sorts Redis' failures into those that a retry may mend and those it
// cannot, and confirms writes with replicas.
package redisconn

import (
	"errors"
	"fmt"
	"strings"
)

// Options are the connection options that every w8y command shares, as
// flags (go-flags tags) and W8Y_* variables. Embed them in a command's
// options.
type Options struct {
	URL                   string `short:"u" long:"redis-url" env:"W8Y_REDIS_URL" default:"redis://localhost:6379" value-name:"URL" description:"Redis: redis://host:port[/db], rediss://, unix://" details:"The Redis to use: redis://[user[:password]@]host:port[/db], rediss:// for TLS, unix:///path/to/redis.sock[?db=N]. With --redis-cluster or --sentinel-master, more addresses as ?addr=host:port&addr=... w8y's messages show a password as xxxxx, and the child gets the URL without it."`
	Cluster               bool   `long:"redis-cluster" env:"W8Y_REDIS_CLUSTER" description:"Redis is a Cluster; the URL's addresses are seeds" details:"Redis is a Cluster: the URL's addresses are seed nodes."`
	SentinelMaster        string `long:"sentinel-master" env:"W8Y_SENTINEL_MASTER" value-name:"NAME" description:"Use the master that Sentinel names NAME" details:"Use the master that Sentinel names NAME: the URL's addresses are the sentinels', its user and password the master's. The sentinels' own password, if any, is W8Y_SENTINEL_PASSWORD."`
	PasswordFile          string `long:"redis-password-file" env:"W8Y_REDIS_PASSWORD_FILE" value-name:"PATH" description:"Read the password from this file" details:"Read the Redis password from this file (one trailing newline is dropped). Or set W8Y_REDIS_PASSWORD, for which there is no flag, so that ps never shows it. Give the password once."`
	TLSCACert             string `long:"tls-ca-cert" env:"W8Y_TLS_CA_CERT" value-name:"PATH" description:"Trust only the CAs in this PEM file" details:"With rediss://, trust only the CAs in this PEM file instead of the system's."`
	TLSCert               string `long:"tls-cert" env:"W8Y_TLS_CERT" value-name:"PATH" description:"Present this client certificate (PEM)" details:"With rediss://, present this PEM client certificate (needs --tls-key)."`
	TLSKey                string `long:"tls-key" env:"W8Y_TLS_KEY" value-name:"PATH" description:"The private key of --tls-cert (PEM)"`
	TLSServerName         string `long:"tls-server-name" env:"W8Y_TLS_SERVER_NAME" value-name:"NAME" description:"The name the server's certificate must carry" details:"With rediss://, the name the server's certificate must carry (by default the URL's host)."`
	TLSInsecureSkipVerify bool   `long:"tls-insecure-skip-verify" env:"W8Y_TLS_INSECURE_SKIP_VERIFY" description:"Accept any server certificate (warns)" details:"With rediss://, accept any server certificate: encrypted, but anyone on the network path can pose as the server. Every run logs a warning. skip_verify=true in the URL does the same."`

	// Password and SentinelPassword come from PasswordVar and
	// SentinelPasswordVar only (see ReadSecrets): a flag would put them in
	// argv, where ps shows them to every user of the host.
	Password         string `no-flag:"true"`
	SentinelPassword string `no-flag:"true"`
}

// Variables that hold secrets. They are read by ReadSecrets, not by
// go-flags, so that no flag can carry a secret, and WithoutSecrets keeps
// them from children.
const (
	PasswordVar         = "W8Y_REDIS_PASSWORD"
	SentinelPasswordVar = "W8Y_SENTINEL_PASSWORD"
)

// ReadSecrets fills in the passwords from the environment that getenv reads.
func (o *Options) ReadSecrets(getenv func(string) string) {
	o.Password = getenv(PasswordVar)
	o.SentinelPassword = getenv(SentinelPasswordVar)
}

// Validate checks what go-flags cannot check of the connection options.
func (o *Options) Validate() error {
	if o.Cluster && o.SentinelMaster != "" {
		return errors.New("--redis-cluster and --sentinel-master exclude each other: a Cluster fails over by itself")
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	if o.PasswordFile != "" && o.Password != "" {
		return fmt.Errorf("the password is given twice, in %s and --redis-password-file: give it once", PasswordVar)
	}
	return checkURL(o.URL)
}

// URLVar holds --redis-url, which may carry a password.
const URLVar = "W8Y_REDIS_URL"

// WithoutSecrets returns environ without the variables that hold Redis
// passwords, and with the password in W8Y_REDIS_URL shown as "xxxxx", for
// a child's environment: a child has no business with them. The URL keeps
// the rest (host, port, database, user), which tells a child where its
// items live.
func WithoutSecrets(environ []string) []string {
	kept := make([]string, 0, len(environ))
	for _, kv := range environ {
		if strings.HasPrefix(kv, PasswordVar+"=") || strings.HasPrefix(kv, SentinelPasswordVar+"=") {
			continue
		}
		if url, ok := strings.CutPrefix(kv, URLVar+"="); ok {
			kv = URLVar + "=" + RedactURL(url)
		}
		kept = append(kept, kv)
	}
	return kept
}
