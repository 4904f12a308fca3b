package redisconn

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://localhost:6379", "redis://localhost:6379"},
		{"redis://:secret@localhost:6379/0", "redis://:xxxxx@localhost:6379/0"},
		{"rediss://user:p%40ss@host:6380", "rediss://user:xxxxx@host:6380"},
		{"redis://user:secret@host:bad", "redis://user:xxxxx@host:bad"},
		{"redis://user@host", "redis://user@host"},
		{"redis://s:1?master_name=m&password=secret&sentinel_password=s2", "redis://s:1?master_name=m&password=xxxxx&sentinel_password=xxxxx"},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRedact: a message that quotes a URL's password, as the URL writes
// it, decoded or escaped again as a query writes it, shows none of them;
// without a password the message is left as it is.
func TestRedact(t *testing.T) {
	const withPassword = "redis://u:p%40ss%20Tower-9@host:6379"
	tests := []struct{ url, msg, want string }{
		{withPassword, "auth p%40ss%20Tower-9 refused", "auth xxxxx refused"},
		{withPassword, "auth p@ss Tower-9 refused", "auth xxxxx refused"},
		{withPassword, "auth p%40ss+Tower-9 refused", "auth xxxxx refused"},
		{"redis://u:s3cret@host:bad port", "dial s3cret failed", "dial xxxxx failed"},
		{"redis://u@host:6379", "dial u@host failed", "dial u@host failed"},
	}
	for _, tt := range tests {
		if got := redact(tt.msg, tt.url); got != tt.want {
			t.Errorf("redact(%q, %q) = %q, want %q", tt.msg, tt.url, got, tt.want)
		}
	}
}

// TestCheckURL: the URLs that go-redis would misread or refuse in its own
// words are refused in w8y's.
func TestCheckURL(t *testing.T) {
	tests := []struct{ url, want string }{
		{"redis://localhost:6379", ""},
		{"redis://localhost:6379/", ""},
		{"redis://u:p@localhost:6379/15", ""},
		{"rediss://localhost", ""},
		{"unix:///run/redis.sock?db=2", ""},
		{"REDIS://localhost", ""},
		{"", "--redis-url is empty"},
		{"localhost:6379", "it has no scheme: give redis://host:port, rediss://host:port (TLS) or unix:///path/to/socket, such as redis://localhost:6379"},
		{"redis:localhost:6379", "such as redis://localhost:6379"},
		{"redis//127.0.0.1:7311", "such as redis://127.0.0.1:7311"},
		{"redis:/127.0.0.1:7311/2", "such as redis://127.0.0.1:7311/2"},
		{"rediss//cache.internal:6380", "such as rediss://cache.internal:6380"},
		{"unix:/run/redis.sock", "such as unix:///run/redis.sock"},
		{"redis:6379", "such as redis://redis:6379"},
		{"redis-host:6379", "such as redis://redis-host:6379"},
		{"redis//u:secret@host:1", "such as redis://u:xxxxx@host:1"},
		{"u:secret@host:1", "such as redis://u:xxxxx@host:1"},
		{"http://localhost", `invalid URL scheme "http"`},
		{"redis://localhost/-1", `the database "-1" is not a number from 0 up`},
		{"redis://localhost/x", `the database "x" is not a number from 0 up`},
		{"unix:///s?db=-1", `the database "-1"`},
		{"redis://localhost:99999", `the port "99999" of localhost:99999 is not a port number (1 to 65535)`},
		{"redis://localhost:0", `the port "0" of localhost:0`},
		{"redis://u:secret@[::1]:65536", `the port "65536" of [::1]:65536`},
		{"redis://localhost:65535", ""},
		{"redis://a:1?addr=b:2&addr=c:123456", `the port "123456" of c:123456`},
		{"redis://a:1?addr=b:2&addr=c:3", ""},
		{"redis://a:1?db=3&db=4", "db= is given 2 times: give it once"},
		{"redis://a:1?client_name=a%20b", "client_name=a b: a client name takes letters, digits and the signs from ! to ~, without spaces"},
		{"redis://a:1?client_name=w%C3%A9", "client_name=wé: a client name takes"},
		{"redis://a:1?client_name=worker-1.host_a", ""},
		{"redis://a:1?password=secret&password=secret2", "password= is given 2 times: give it once"},
		{"unix:///s?db=1&dial_timeout=1s&db=2", "db= is given 2 times"},
	}
	for _, tt := range tests {
		err := checkURL(tt.url)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.url, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: error %v, want one saying %q", tt.url, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("%q: the password shows: %v", tt.url, err)
		}
	}
}

func TestNewRedisClientHidesPassword(t *testing.T) {
	for _, raw := range []string{
		"redis://u:topsecret@host:port",
		"redis://u:topsecret@[::1",
		"redis://u:topsecret@host/notadb",
		"redis://u:top%20secret@host:x",
		"redis://host?password=topsecret",
	} {
		_, err := New(&Options{URL: raw}, 2)
		if err == nil {
			t.Errorf("%q: no error", raw)
			continue
		}
		if strings.Contains(err.Error(), "topsecret") || strings.Contains(err.Error(), "top secret") || strings.Contains(err.Error(), "top%20secret") {
			t.Errorf("%q: error shows the password: %v", raw, err)
		}
	}
}

// TestNewRedisClientForms checks which client each form of the options
// builds, with which address, password and TLS settings.
func TestNewRedisClientForms(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		check   func(t *testing.T, c redis.UniversalClient)
		wantErr string
	}{
		{
			name: "single server, password from the environment",
			opts: Options{URL: "redis://u@host:7000/2", Password: "env-pw"},
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				if o.Addr != "host:7000" || o.DB != 2 || o.Username != "u" || o.Password != "env-pw" || o.TLSConfig != nil || o.PoolSize != 2 || o.PipelinePoolSize != -1 {
					t.Errorf("options %+v", o)
				}
			},
		},
		{
			name: "password file drops its line end",
			opts: Options{URL: "redis://host", PasswordFile: pwFile},
			check: func(t *testing.T, c redis.UniversalClient) {
				if p := c.(*redis.Client).Options().Password; p != "from-file" {
					t.Errorf("password %q", p)
				}
			},
		},
		{
			name: "unix socket",
			opts: Options{URL: "unix:///run/redis.sock?db=3"},
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				if o.Network != "unix" || o.Addr != "/run/redis.sock" || o.DB != 3 {
					t.Errorf("options %+v", o)
				}
			},
		},
		{
			name: "TLS with a server name",
			opts: Options{URL: "rediss://10.0.0.1:6380", TLSServerName: "redis.internal"},
			check: func(t *testing.T, c redis.UniversalClient) {
				tc := c.(*redis.Client).Options().TLSConfig
				if tc == nil || tc.ServerName != "redis.internal" || tc.InsecureSkipVerify || insecureTLS(c) {
					t.Errorf("TLS config %+v", tc)
				}
			},
		},
		{
			name: "skip_verify in the URL counts as insecure",
			opts: Options{URL: "rediss://host?skip_verify=true"},
			check: func(t *testing.T, c redis.UniversalClient) {
				if !insecureTLS(c) {
					t.Error("insecureTLS is false")
				}
			},
		},
		{
			name: "cluster seeds",
			opts: Options{URL: "redis://:pw@a:7000?addr=b:7001&addr=c:7002", Cluster: true},
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.ClusterClient).Options()
				if strings.Join(o.Addrs, ",") != "a:7000,b:7001,c:7002" || o.Password != "pw" || o.PoolSize != 2 || o.PipelinePoolSize != -1 {
					t.Errorf("options %+v", o)
				}
			},
		},
		{
			name: "sentinel: the URL's user info is the master's",
			opts: Options{URL: "redis://u:pw@s1:26379?addr=s2:26379", SentinelMaster: "mymaster", SentinelPassword: "spw"},
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				if o.Username != "u" || o.Password != "pw" {
					t.Errorf("master credentials %q %q", o.Username, o.Password)
				}
			},
		},
		{name: "several addresses without a mode", opts: Options{URL: "redis://a:1?addr=b:2"}, wantErr: "need --redis-cluster or --sentinel-master"},
		{name: "TLS options without rediss", opts: Options{URL: "redis://a", TLSServerName: "x"}, wantErr: "need a rediss:// URL"},
		{name: "unix socket as a cluster", opts: Options{URL: "unix:///s", Cluster: true}, wantErr: "cannot be used with --redis-cluster"},
		{name: "password in the URL and the environment", opts: Options{URL: "redis://:pw@a", Password: "x"}, wantErr: "given twice"},
		{name: "empty password file", opts: Options{URL: "redis://a", PasswordFile: "/dev/null"}, wantErr: "is empty"},
		{name: "sentinel password as a query parameter", opts: Options{URL: "redis://s1?password=topsecret", SentinelMaster: "m"}, wantErr: "not as query parameters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(&tt.opts, 2)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "topsecret") {
					t.Errorf("error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tt.check(t, c)
		})
	}
}

// TestURLQueryInTheUsersWords: the query options of --redis-url that
// docs/reference.md shows are taken; one that go-redis cannot read is
// refused with the option as the user wrote it and what it takes, in
// every form of the client, not in Go's words (strconv.Atoi,
// time.ParseDuration) or go-redis'.
func TestURLQueryInTheUsersWords(t *testing.T) {
	c, err := New(&Options{URL: "redis://127.0.0.1:1?dial_timeout=5s&read_timeout=10s"}, 2)
	if err != nil {
		t.Fatalf("the reference's example query: %v", err)
	}
	if o := c.(*redis.Client).Options(); o.DialTimeout != 5*time.Second || o.ReadTimeout != 10*time.Second {
		t.Errorf("?dial_timeout=5s&read_timeout=10s gave dial timeout %s and read timeout %s", o.DialTimeout, o.ReadTimeout)
	}
	_ = c.Close()
	// The two protocols that Redis speaks are taken.
	for _, protocol := range []int{2, 3} {
		c, err := New(&Options{URL: fmt.Sprintf("redis://127.0.0.1:1?protocol=%d", protocol)}, 2)
		if err != nil {
			t.Fatalf("?protocol=%d: %v", protocol, err)
		}
		if got := c.(*redis.Client).Options().Protocol; got != protocol {
			t.Errorf("?protocol=%d gave protocol %d", protocol, got)
		}
		_ = c.Close()
	}
	for _, tt := range []struct{ query, want string }{
		{"dial_timeout=x", "dial_timeout=x: dial_timeout takes a length of time, such as 500ms or 5s"},
		{"pipeline_pool_size=x", "pipeline_pool_size=x: pipeline_pool_size takes a whole number"},
		{"max_retries=-5x", "max_retries=-5x: max_retries takes a whole number"},
		{"read_timeout=1h&pool_fifo=maybe", "pool_fifo=maybe: pool_fifo takes true or false"},
		{"foo=1", "unknown query option foo: the URL's query takes go-redis' options"},
		{"protocol=9", "protocol=9: protocol takes 2 (RESP2) or 3"},
		{"protocol=1", "protocol=1: protocol takes 2 (RESP2) or 3"},
		{"protocol=", "protocol=: protocol takes 2 (RESP2) or 3"},
		{"protocol=x", "protocol=x: protocol takes 2 (RESP2) or 3"},
	} {
		for _, form := range []Options{
			{URL: "redis://127.0.0.1:1?" + tt.query},
			{URL: "redis://127.0.0.1:1?" + tt.query, Cluster: true},
			{URL: "redis://127.0.0.1:1?" + tt.query, SentinelMaster: "m"},
		} {
			_, err := New(&form, 2)
			switch {
			case err == nil:
				t.Errorf("%+v: no error", form)
			case !strings.Contains(err.Error(), "invalid --redis-url ") || !strings.Contains(err.Error(), tt.want):
				t.Errorf("%+v: %v, want one saying %q", form, err, tt.want)
			case strings.Contains(err.Error(), "strconv") || strings.Contains(err.Error(), "time: ") || strings.Contains(err.Error(), "redis: "):
				t.Errorf("%+v: %v, in Go's or go-redis' words", form, err)
			}
		}
	}
}
