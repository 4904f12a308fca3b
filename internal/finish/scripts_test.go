package finish

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
)

// TestScriptsLoad: every script that ends a run compiles in a real Redis,
// and each keeps the hash that EVALSHA finds it by.
func TestScriptsLoad(t *testing.T) {
	redistest.ScriptsLoad(t, map[string]*redis.Script{
		"finish": finishScript, "count": countScript, "pause": pauseScript,
	})
}

// TestReleaseOnlyOurs: finish.lua given the lock alone keeps to
// compare-and-delete. (The refresh of a lock is tested at the root, its
// take in internal/take.)
func TestReleaseOnlyOurs(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	if err := rdb.Set(ctx, "w:lock:x", "me", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for i, st := range []struct {
		token string
		want  any
	}{{"other", int64(0)}, {"me", int64(1)}, {"me", int64(0)}} {
		got, err := finishScript.Run(ctx, rdb, []string{"w:lock:x"}, st.token, "x", "").Result()
		if err != nil || got != st.want {
			t.Errorf("step %d: %v, %v; want %v", i, got, err, st.want)
		}
	}
}
