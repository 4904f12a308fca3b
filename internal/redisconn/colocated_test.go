package redisconn

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestHasHashTag(t *testing.T) {
	tests := []struct {
		prefix string
		want   bool
	}{
		{"", false},
		{"work:", false},
		{"{work}:", true},
		{"jobs:{eu}:", true},
		{"{}:", false},            // an empty tag hashes the whole key
		{"a{}{b}:", false},        // only the first '{' counts, and its tag is empty
		{"a{b:", false},           // no '}': the item could close the tag
		{"a}b{c}:", true},         // a '}' before the first '{' does not matter
		{"{a}{b}:", true},         // the first tag wins
		{"x{y}z{:", true},         // the tag is closed before the stray '{'
		{"{work:}lock:", true},    // the tag may hold ':'
		{"work:{", false},         // an open tag at the end
		{"work:}{", false},        // and after a stray '}'
		{"{\x00}:", true},         // any byte makes a tag
		{"a{bc}d{e}f}", true},     // trailing braces after a closed tag
		{"{{}:", true},            // the tag is "{"
		{"}{}:", false},           // an empty tag after a stray '}'
		{"\u00e9{\u00e8}:", true}, // multi-byte runes around a tag
	}
	for _, tt := range tests {
		if got := HasHashTag(tt.prefix); got != tt.want {
			t.Errorf("HasHashTag(%q) = %v, want %v", tt.prefix, got, tt.want)
		}
	}
}

func TestColocated(t *testing.T) {
	// Clients connect lazily: none of these dials anything.
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer single.Close()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cluster.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}})
	defer ring.Close()

	tests := []struct {
		name   string
		client any
		prefix string
		want   bool
	}{
		{"single server, no prefix", single, "", true},
		{"single server, plain prefix", single, "work:", true},
		{"single server, hash tag", single, "{work}:", true},
		{"cluster, no prefix", cluster, "", false},
		{"cluster, plain prefix", cluster, "work:", false},
		{"cluster, empty tag", cluster, "{}work:", false},
		{"cluster, hash tag", cluster, "{work}:", true},
		{"ring, plain prefix", ring, "work:", false},
		{"ring, hash tag", ring, "jobs:{eu}:", true},
	}
	for _, tt := range tests {
		if got := Colocated(tt.client, tt.prefix); got != tt.want {
			t.Errorf("%s: Colocated(%q) = %v, want %v", tt.name, tt.prefix, got, tt.want)
		}
	}
}
