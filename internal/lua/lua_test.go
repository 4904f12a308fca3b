package lua

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
)

// TestScriptsLoad: every script compiles in a real Redis, and each keeps the
// hash that EVALSHA finds it by.
func TestScriptsLoad(t *testing.T) {
	redistest.ScriptsLoad(t, map[string]*redis.Script{
		"refresh": Refresh, "finish": Finish, "count": Count, "pause": Pause, "control": Control, "cancel": Cancel, "dedupe": Dedupe,
	})
}

// TestRefreshAndFinish: the lock scripts keep to compare-and-expire and
// compare-and-delete. (The take of a lock, trylock.lua, is tested in
// internal/take.)
func TestRefreshAndFinish(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	if err := rdb.Set(ctx, "w:lock:x", "me", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		script *redis.Script
		token  string
		want   any
	}{
		{Refresh, "me", int64(1)},
		{Refresh, "other", int64(0)},
		{Finish, "other", int64(0)},
		{Finish, "me", int64(1)},
		{Refresh, "me", int64(0)},
	}
	for i, st := range steps {
		args := []any{st.token, 60000}
		if st.script == Finish {
			args = []any{st.token, "x", ""}
		}
		got, err := st.script.Run(ctx, rdb, []string{"w:lock:x"}, args...).Result()
		if err != nil || got != st.want {
			t.Errorf("step %d: %v, %v; want %v", i, got, err, st.want)
		}
	}
}

// TestDedupe: the extra occurrences go, the first stays where it was, and an
// item held once or not at all is left as it is.
func TestDedupe(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	rdb.RPush(ctx, "l", "a", "b", "a", "c", "a")
	for _, tt := range []struct {
		item string
		want int64
	}{{"a", 3}, {"a", 1}, {"b", 1}, {"zz", 0}} {
		if got, err := Dedupe.Run(ctx, rdb, []string{"l"}, tt.item).Int64(); err != nil || got != tt.want {
			t.Errorf("Dedupe %q: %d, %v; want %d", tt.item, got, err, tt.want)
		}
	}
	if got := rdb.LRange(ctx, "l", 0, -1).Val(); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("list after Dedupe: %q, want [a b c]", got)
	}
}
