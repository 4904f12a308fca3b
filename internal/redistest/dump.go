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
	// Value is the key's value as text: a string quoted, or its Parts
	// quoted.
	Value string
	// Parts are the value's parts: a string's one value, a list's items in
	// order, a set's members sorted, a hash's fields as field=value sorted,
	// a sorted set's members as member:score in order of their scores, a
	// stream's entries' fields without their IDs. A test that shows a key
	// its own way (leaving out what changes from run to run) starts from
	// these.
	Parts []string
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
		k.Parts = parts(ctx, rdb, name, k.Type)
		if k.Type == "string" {
			k.Value = fmt.Sprintf("%q", k.Parts[0])
		} else {
			k.Value = fmt.Sprintf("%q", k.Parts)
		}
		if ttl := rdb.PTTL(ctx, name).Val(); ttl > 0 {
			k.TTL = ttl
		}
		out = append(out, k)
	}
	return out
}

// parts reads the parts of key, of type kind (see Key.Parts).
func parts(ctx context.Context, rdb redis.Cmdable, key, kind string) []string {
	var out []string
	switch kind {
	case "string":
		out = []string{rdb.Get(ctx, key).Val()}
	case "list":
		out = rdb.LRange(ctx, key, 0, -1).Val()
	case "set":
		out = rdb.SMembers(ctx, key).Val()
		slices.Sort(out)
	case "hash":
		for f, v := range rdb.HGetAll(ctx, key).Val() {
			out = append(out, f+"="+v)
		}
		slices.Sort(out)
	case "zset":
		for _, z := range rdb.ZRangeWithScores(ctx, key, 0, -1).Val() {
			out = append(out, fmt.Sprintf("%v:%v", z.Member, z.Score))
		}
	case "stream":
		for _, m := range rdb.XRange(ctx, key, "-", "+").Val() {
			out = append(out, fmt.Sprint(m.Values))
		}
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
