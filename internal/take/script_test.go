package take

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
)

// TestScriptsLoad: every take script compiles in a real Redis, and each
// keeps the hash that EVALSHA finds it by.
func TestScriptsLoad(t *testing.T) {
	redistest.ScriptsLoad(t, map[string]*redis.Script{
		"batch": batchScript, "each": eachScript, "look": lookScript,
	})
}

// TestTryLock: each.lua keeps to SET NX PX, and names a lock key of
// another type.
func TestTryLock(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	for i, st := range []struct {
		token string
		want  any
	}{{"me", int64(1)}, {"other", int64(0)}} {
		got, err := eachScript.Run(ctx, rdb, []string{"w:lock:x"}, st.token, 60000).Result()
		if err != nil || got != st.want {
			t.Errorf("step %d: %v, %v; want %v", i, got, err, st.want)
		}
	}
	if v := rdb.Get(ctx, "w:lock:x").Val(); v != "me" {
		t.Errorf("the lock holds %q, want the first taker's token", v)
	}
	if ttl := rdb.PTTL(ctx, "w:lock:x").Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Errorf("the lock's TTL is %s, want about a minute", ttl)
	}
	rdb.HSet(ctx, "w:lock:y", "f", "v")
	if got, err := eachScript.Run(ctx, rdb, []string{"w:lock:y"}, "me", 60000).Result(); err != nil || got != "hash" {
		t.Errorf("each.lua on a hash: %v, %v; want the type's name", got, err)
	}
}
