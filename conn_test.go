package main

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://localhost:6379", "redis://localhost:6379"},
		{"redis://:secret@localhost:6379/0", "redis://:xxxxx@localhost:6379/0"},
		{"rediss://user:p%40ss@host:6380", "rediss://user:xxxxx@host:6380"},
		{"redis://user:secret@host:bad", "redis://user:xxxxx@host:bad"},
		{"redis://user@host", "redis://user@host"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNewRedisClientHidesPassword(t *testing.T) {
	for _, raw := range []string{
		"redis://u:topsecret@host:port",
		"redis://u:topsecret@[::1",
		"redis://u:topsecret@host/notadb",
		"redis://u:top%20secret@host:x",
	} {
		_, err := newRedisClient(&Options{RedisURL: raw})
		if err == nil {
			t.Errorf("%q: no error", raw)
			continue
		}
		if strings.Contains(err.Error(), "topsecret") || strings.Contains(err.Error(), "top secret") || strings.Contains(err.Error(), "top%20secret") {
			t.Errorf("%q: error shows the password: %v", raw, err)
		}
	}
}
