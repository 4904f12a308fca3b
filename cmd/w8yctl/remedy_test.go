package main

import (
	"testing"

	"github.com/w8y/w8y/internal/redisconn"
)

// TestRemediesCarryTheConnection: the repairs that check prints reach the
// Redis that w8yctl reached, with the prefix, and never show a password.
func TestRemediesCarryTheConnection(t *testing.T) {
	for _, tt := range []struct {
		name          string
		opts          ConnectionOptions
		ctl, redisCLI string
	}{
		{"plain", ConnectionOptions{Options: redisconn.Options{URL: "redis://10.0.0.5:6380/2"}, KeyPrefix: "reports:"},
			"w8yctl -u redis://10.0.0.5:6380/2 -k reports", "redis-cli -h 10.0.0.5 -p 6380 -n 2"},
		{"password in the URL", ConnectionOptions{Options: redisconn.Options{URL: "redis://ops:s3cret@db:6379/0"}, KeyPrefix: "r:"},
			"w8yctl -u redis://ops@db:6379/0 -k r", "redis-cli -h db -p 6379 --user ops --askpass"},
		{"cluster, TLS, password file", ConnectionOptions{Options: redisconn.Options{URL: "rediss://a:7000", Cluster: true, TLSCACert: "/etc/ca.pem", PasswordFile: "/run/pw"}, KeyPrefix: "{r}:"},
			"w8yctl -u rediss://a:7000 --redis-cluster --redis-password-file /run/pw --tls-ca-cert /etc/ca.pem -k '{r}'",
			"redis-cli -h a -p 7000 -c --tls --cacert /etc/ca.pem --askpass"},
		{"unix socket", ConnectionOptions{Options: redisconn.Options{URL: "unix:///run/redis.sock?db=3", Password: "x"}, KeyPrefix: "it's:"},
			`w8yctl -u 'unix:///run/redis.sock?db=3' -k 'it'\''s'`, "redis-cli -s /run/redis.sock -n 3 --askpass"},
		{"sentinel", ConnectionOptions{Options: redisconn.Options{URL: "redis://s1:26379", SentinelMaster: "main"}, KeyPrefix: "w:"},
			"w8yctl -u redis://s1:26379 --sentinel-master main -k w", "redis-cli -h MASTER_HOST -p MASTER_PORT"},
	} {
		r := remedies(&tt.opts)
		if r.W8yctl != tt.ctl || r.RedisCLI != tt.redisCLI {
			t.Errorf("%s:\n got %s\n     %s\nwant %s\n     %s", tt.name, r.W8yctl, r.RedisCLI, tt.ctl, tt.redisCLI)
		}
	}
}
