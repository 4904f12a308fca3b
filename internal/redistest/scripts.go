package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/script"
)

// ScriptsLoad fails the test unless every script compiles in a real Redis,
// one it starts, and loads under the hash that EVALSHA finds it by: a Lua
// syntax error would otherwise show only when w8y first runs the script.
// scripts are named as their files, without ".lua".
func ScriptsLoad(tb testing.TB, scripts map[string]*script.Script) {
	tb.Helper()
	rdb := Start(tb).Client
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	for name, s := range scripts {
		sha, err := s.Load(ctx, rdb).Result()
		if err != nil {
			tb.Errorf("%s.lua does not load: %v", name, err)
			continue
		}
		if sha != s.Hash() {
			tb.Errorf("%s.lua loaded as %s, want %s", name, sha, s.Hash())
		}
	}
}

// TokenStep is one call of a script that acts on a lock for its holder
// alone (see OnlyOurs): the token it is called with, and its reply.
type TokenStep struct {
	Token string
	Want  int64
}

// OnlyOurs runs s, in turn, on a lock key that the token "me" holds
// for a minute, once for each step with the step's token and args after
// it, and fails the test where a reply is not the step's: a
// compare-and-delete or a compare-and-expire must leave another holder's
// lock alone. It returns the client of the Redis it started, and its
// context, for what the test checks next.
func OnlyOurs(tb testing.TB, s *script.Script, key string, args []any, steps ...TokenStep) (*redis.Client, context.Context) {
	tb.Helper()
	rdb, ctx := Client(tb)
	if err := rdb.Set(ctx, key, "me", time.Minute).Err(); err != nil {
		tb.Fatal(err)
	}
	for i, st := range steps {
		got, err := s.Run(ctx, rdb, []string{key}, append([]any{st.Token}, args...)...).Result()
		if err != nil || got != st.Want {
			tb.Errorf("step %d, token %q: %v, %v; want %d", i, st.Token, got, err, st.Want)
		}
	}
	return rdb, ctx
}
