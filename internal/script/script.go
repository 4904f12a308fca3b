// Package script holds w8y's Lua scripts as go-redis runs them, each put
// together from its parts and hashed at its first use, not at w8y's start.
//
// w8y's scripts are large (a take's is several sources joined), and
// hashing all of them at start cost every process about 0.3 ms and 470 KB
// of allocation before main ran: a one-shot run uses two of them, and its
// guard (the same binary, started again) none, yet both paid for all of
// them (docs/benchmarks.md).
package script

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script made of parts, joined and hashed once, when it is
// first used. It runs as go-redis' Script does: by its hash, and by its
// source where the server does not have it (NOSCRIPT). Its methods are
// safe for concurrent use.
type Script struct {
	parts []string
	built func() *redis.Script
}

// New returns the script whose source is parts joined as they are. Each
// part is read at the first use, not now: a part must not change after.
func New(parts ...string) *Script {
	s := &Script{parts: parts}
	s.built = sync.OnceValue(func() *redis.Script { return redis.NewScript(strings.Join(s.parts, "")) })
	return s
}

// Script is the script as go-redis' own, built at the first call.
func (s *Script) Script() *redis.Script { return s.built() }

// Hash is the script's SHA1, as EVALSHA names it.
func (s *Script) Hash() string { return s.built().Hash() }

// Run runs the script by its hash, and by its source where the server
// answers NOSCRIPT.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.built().Run(ctx, c, keys, args...)
}

// Eval sends the script's source.
func (s *Script) Eval(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.built().Eval(ctx, c, keys, args...)
}

// EvalSha sends the script's hash alone.
func (s *Script) EvalSha(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.built().EvalSha(ctx, c, keys, args...)
}

// Load loads the script into the server's script cache.
func (s *Script) Load(ctx context.Context, c redis.Scripter) *redis.StringCmd {
	return s.built().Load(ctx, c)
}
