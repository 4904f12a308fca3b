package redistest

import (
	"github.com/w8y/w8y/internal/poll"

	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ScriptsLoad fails the test unless every script compiles in a real Redis,
// one it starts, and loads under the hash that EVALSHA finds it by: a Lua
// syntax error would otherwise show only when w8y first runs the script.
// scripts are named as their files, without ".lua".
func ScriptsLoad(tb testing.TB, scripts map[string]*redis.Script) {
	tb.Helper()
	rdb := Start(tb).Client
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	for name, script := range scripts {
		sha, err := script.Load(ctx, rdb).Result()
		if err != nil {
			tb.Errorf("%s.lua does not load: %v", name, err)
			continue
		}
		if sha != script.Hash() {
			tb.Errorf("%s.lua loaded as %s, want %s", name, sha, script.Hash())
		}
	}
}
