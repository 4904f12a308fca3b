package take

import (
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/script"
)

// TestScriptsLoad: every take script compiles in a real Redis, and each
// keeps the hash that EVALSHA finds it by.
func TestScriptsLoad(t *testing.T) {
	redistest.ScriptsLoad(t, map[string]*script.Script{
		"batch": batchScript, "each": eachScript, "look": lookScript,
	})
}

// TestTryLock: each.lua keeps to SET NX PX, and names a lock key of
// another type.
func TestTryLock(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	before := rdb.Time(ctx).Val().UnixMilli()
	got, err := eachScript.Run(ctx, rdb, []string{"w:lock:x"}, "me", 60000).Result()
	if reply, _ := got.([]any); err != nil || !tookLock(got) || reply[1].(int64) < before || reply[1].(int64) > rdb.Time(ctx).Val().UnixMilli() {
		t.Errorf("the first take: %v, %v; want 1 and Redis' clock at the take", got, err)
	}
	if got, err := eachScript.Run(ctx, rdb, []string{"w:lock:x"}, "other", 60000).Result(); err != nil || got != int64(0) {
		t.Errorf("the second take: %v, %v; want 0", got, err)
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
