package redistest

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestDump: every type shows its value, a sorted set its scores, and a key
// that expires says so; keys outside the pattern are left out.
func TestDump(t *testing.T) {
	rdb, ctx := Client(t)
	rdb.Set(ctx, "p:s", "v", time.Minute)
	rdb.RPush(ctx, "p:l", "b", "a")
	rdb.SAdd(ctx, "p:set", "y", "x")
	rdb.HSet(ctx, "p:h", "f", "1", "e", "2")
	rdb.ZAdd(ctx, "p:due", redisZ("a", 5), redisZ("b", 2))
	rdb.XAdd(ctx, xadd("p:x", "type", "finish"))
	rdb.Set(ctx, "other", "v", 0)
	got := Lines(Dump(t, rdb, "p:*"))
	want := []string{
		`p:due zset ["b:2" "a:5"] (no expiry)`,
		`p:h hash ["e=2" "f=1"] (no expiry)`,
		`p:l list ["b" "a"] (no expiry)`,
		`p:s string "v" (expires)`,
		`p:set set ["x" "y"] (no expiry)`,
		`p:x stream ["map[type:finish]"] (no expiry)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Dump:\n%q\nwant\n%q", got, want)
	}
	if keys := Dump(t, rdb, "p:s"); len(keys) != 1 || keys[0].TTL <= 0 || keys[0].TTL > time.Minute {
		t.Errorf("Dump of p:s: %+v, want its TTL", keys)
	}
}

func redisZ(member string, score float64) redis.Z { return redis.Z{Member: member, Score: score} }

func xadd(stream string, values ...any) *redis.XAddArgs {
	return &redis.XAddArgs{Stream: stream, Values: values}
}
