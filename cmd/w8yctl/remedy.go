package main

import (
	"net"
	"net/url"
	"strings"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/redisconn"
)

// remedies are the command lines that check's repairs start with: w8yctl
// and redis-cli with the connection options that reached this Redis, so
// that a repair pasted into a shell goes to the same server, never to
// whatever listens on localhost:6379. The password is left out: w8yctl
// reads it from W8Y_REDIS_PASSWORD or --redis-password-file as this run
// did, and redis-cli asks for it (--askpass).
func remedies(o *ConnectionOptions) control.Remedies {
	return control.Remedies{W8yctl: w8yctlCommand(o), RedisCLI: redisCLICommand(&o.Options)}
}

// w8yctlCommand is w8yctl with o's connection options and prefix.
func w8yctlCommand(o *ConnectionOptions) string {
	args := []string{"w8yctl", "-u", shellWord(withoutPassword(o.URL))}
	switch {
	case o.Cluster:
		args = append(args, "--redis-cluster")
	case o.SentinelMaster != "":
		args = append(args, "--sentinel-master", shellWord(o.SentinelMaster))
	}
	if o.PasswordFile != "" {
		args = append(args, "--redis-password-file", shellWord(o.PasswordFile))
	}
	for _, f := range []struct{ flag, value string }{
		{"--tls-ca-cert", o.TLSCACert}, {"--tls-cert", o.TLSCert}, {"--tls-key", o.TLSKey}, {"--tls-server-name", o.TLSServerName},
	} {
		if f.value != "" {
			args = append(args, f.flag, shellWord(f.value))
		}
	}
	if o.TLSInsecureSkipVerify {
		args = append(args, "--tls-insecure-skip-verify")
	}
	args = append(args, "-k", shellWord(strings.TrimSuffix(o.KeyPrefix, ":")))
	return strings.Join(args, " ")
}

// redisCLICommand is redis-cli with the options that reach the server of
// o's URL; on a Cluster -c, which follows the key to its node. Sentinel
// names a master only when asked, so there the host is the master's, to
// fill in.
func redisCLICommand(o *redisconn.Options) string {
	u, err := url.Parse(o.URL)
	if err != nil {
		return "redis-cli"
	}
	args := []string{"redis-cli"}
	switch {
	case u.Scheme == "unix":
		args = append(args, "-s", shellWord(u.Path))
		if db := u.Query().Get("db"); db != "" {
			args = append(args, "-n", shellWord(db))
		}
	case o.SentinelMaster != "":
		args = append(args, "-h", "MASTER_HOST", "-p", "MASTER_PORT")
	default:
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil {
			host, port = u.Hostname(), "6379"
		}
		args = append(args, "-h", shellWord(host), "-p", shellWord(port))
		if db := strings.Trim(u.Path, "/"); db != "" && db != "0" {
			args = append(args, "-n", shellWord(db))
		}
	}
	if o.Cluster {
		args = append(args, "-c")
	}
	if u.Scheme == "rediss" {
		args = append(args, "--tls")
		for _, f := range []struct{ flag, value string }{
			{"--cacert", o.TLSCACert}, {"--cert", o.TLSCert}, {"--key", o.TLSKey}, {"--sni", o.TLSServerName},
		} {
			if f.value != "" {
				args = append(args, f.flag, shellWord(f.value))
			}
		}
		if o.TLSInsecureSkipVerify {
			args = append(args, "--insecure")
		}
	}
	if user := u.User.Username(); user != "" {
		args = append(args, "--user", shellWord(user))
	}
	if _, ok := u.User.Password(); ok || o.Password != "" || o.PasswordFile != "" {
		args = append(args, "--askpass")
	}
	return strings.Join(args, " ")
}

// withoutPassword is rawURL with the password of its user left out (a
// password in the query too): the remedies are printed.
func withoutPassword(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return redisconn.RedactURL(rawURL)
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	if q.Has("password") {
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// shellWord is s as one word for sh: as it is when it holds nothing sh
// would read otherwise, else in single quotes.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@,=+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
