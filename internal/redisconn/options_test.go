package redisconn

import (
	"slices"
	"strings"
	"testing"
)

func TestWithoutSecrets(t *testing.T) {
	got := WithoutSecrets([]string{"PATH=/bin", "W8Y_REDIS_PASSWORD=s", "W8Y_SENTINEL_PASSWORD=t", "W8Y_REDIS_PASSWORD_FILE=/f", "X=W8Y_REDIS_PASSWORD=u",
		"W8Y_REDIS_URL=redis://worker:s3cret@host:6379/2", "W8Y_REDIS_URLS=redis://a:b@c"})
	if want := []string{"PATH=/bin", "W8Y_REDIS_PASSWORD_FILE=/f", "X=W8Y_REDIS_PASSWORD=u",
		"W8Y_REDIS_URL=redis://worker:xxxxx@host:6379/2", "W8Y_REDIS_URLS=redis://a:b@c"}; !slices.Equal(got, want) {
		t.Errorf("withoutSecrets = %q, want %q", got, want)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"defaults", Options{URL: "redis://localhost:6379"}, ""},
		{"cluster and sentinel", Options{Cluster: true, SentinelMaster: "m"}, "exclude each other"},
		{"a certificate without its key", Options{TLSCert: "c.pem"}, "go together"},
		{"a key without its certificate", Options{TLSKey: "k.pem"}, "go together"},
		{"a password twice", Options{PasswordFile: "pw", Password: "p"}, "given twice"},
		{"a URL without a scheme", Options{URL: "localhost:6379"}, "it has no scheme"},
	}
	for _, tt := range tests {
		err := tt.opts.Validate()
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestReadSecrets(t *testing.T) {
	env := map[string]string{PasswordVar: "p1", SentinelPasswordVar: "p2"}
	var o Options
	o.ReadSecrets(func(name string) string { return env[name] })
	if o.Password != "p1" || o.SentinelPassword != "p2" {
		t.Errorf("passwords %q and %q", o.Password, o.SentinelPassword)
	}
}
