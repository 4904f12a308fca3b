package redisconn

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// Colocated reports whether every key under prefix lives on the same server
// as every other, so that one Lua script may touch all of an item's keys
// (its lock, cooldown, backoff and state) and the list together, although
// it cannot declare them all in advance. That holds on a single Redis
// server, and on a sharded client (Redis Cluster, Ring) only when prefix
// holds a hash tag, which puts every key under it in one slot. Elsewhere
// w8y sends a command per key.
func Colocated(client any, prefix string) bool {
	switch client.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return HasHashTag(prefix)
	}
	return true
}

// HasHashTag reports whether every key that starts with prefix hashes to the
// same Redis Cluster slot: Redis hashes only what lies between the first '{'
// and the first '}' after it, when that is not empty.
func HasHashTag(prefix string) bool {
	open := strings.IndexByte(prefix, '{')
	if open < 0 {
		return false
	}
	return strings.IndexByte(prefix[open+1:], '}') > 0
}
