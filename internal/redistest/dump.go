package redistest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Key is one key as Dump shows it.
type Key struct {
	Name, Type string
	// Value is the key's value as text: a string quoted, a list's items
	// in order, a set's members and a hash's fields sorted, a sorted set's
	// members with their scores in order of them, a stream's entries'
	// fields without their IDs.
	Value string
	// TTL is how long the key has left, or 0 for no expiry.
	TTL time.Duration
}

// String is the key on one line: name, type, value, and whether it
// expires (not how soon, so that two dumps a moment apart compare equal).
func (k Key) String() string {
	expires := "no expiry"
	if k.TTL > 0 {
		expires = "expires"
	}
	return fmt.Sprintf("%s %s %s (%s)", k.Name, k.Type, k.Value, expires)
}

// Dump shows every key that matches pattern (a KEYS glob: a prefix
// followed by *), sorted by name, with its value and TTL, so that a test
// can say what Redis holds, or check that something changed nothing.
func Dump(tb testing.TB, rdb redis.Cmdable, pattern string) []Key {
	tb.Helper()
	ctx := context.Background()
	names, err := rdb.Keys(ctx, pattern).Result()
	if err != nil {
		tb.Fatal(err)
	}
	slices.Sort(names)
	out := make([]Key, 0, len(names))
	for _, name := range names {
		k := Key{Name: name, Type: rdb.Type(ctx, name).Val()}
		switch k.Type {
		case "string":
			k.Value = fmt.Sprintf("%q", rdb.Get(ctx, name).Val())
		case "list":
			k.Value = fmt.Sprintf("%q", rdb.LRange(ctx, name, 0, -1).Val())
		case "set":
			members := rdb.SMembers(ctx, name).Val()
			slices.Sort(members)
			k.Value = fmt.Sprintf("%q", members)
		case "hash":
			var fields []string
			for f, v := range rdb.HGetAll(ctx, name).Val() {
				fields = append(fields, f+"="+v)
			}
			slices.Sort(fields)
			k.Value = fmt.Sprintf("%q", fields)
		case "zset":
			var members []string
			for _, z := range rdb.ZRangeWithScores(ctx, name, 0, -1).Val() {
				members = append(members, fmt.Sprintf("%v:%v", z.Member, z.Score))
			}
			k.Value = fmt.Sprintf("%q", members)
		case "stream":
			var entries []string
			for _, m := range rdb.XRange(ctx, name, "-", "+").Val() {
				entries = append(entries, fmt.Sprint(m.Values))
			}
			k.Value = fmt.Sprintf("%q", entries)
		}
		if ttl := rdb.PTTL(ctx, name).Val(); ttl > 0 {
			k.TTL = ttl
		}
		out = append(out, k)
	}
	return out
}

// Lines is Dump's keys, each as its String, for comparing two dumps.
func Lines(keys []Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = strings.TrimSpace(k.String())
	}
	return out
}
