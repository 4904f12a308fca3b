// Package lua holds the Lua scripts that w8y runs inside Redis, so that each
// step that must see and change several keys at once (refresh or release a
// lock, finish a run, an operator's change) is one atomic round trip. Each
// script says at its top what it takes and returns. The scripts that take an
// item live beside the Go that calls them, in internal/take.
//
// redis.Script runs a script with EVALSHA and falls back to EVAL when the
// server's script cache lacks it (a fresh server, SCRIPT FLUSH, a failover).
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed refresh.lua
	refreshSource string
	//go:embed finish.lua
	finishSource string
	//go:embed count.lua
	countSource string
	//go:embed pause.lua
	pauseSource string
	//go:embed control.lua
	controlSource string
	//go:embed cancel.lua
	cancelSource string
	//go:embed dedupe.lua
	dedupeSource string
)

var (
	// Refresh extends a lock while it holds our token, and reports a
	// cancel request aimed at that token.
	Refresh = redis.NewScript(refreshSource)
	// Finish releases a lock while it holds our token and writes what the
	// run's end changes; given the lock's key alone, it only releases.
	Finish = redis.NewScript(finishSource)
	// Count counts a run's end in the state hash alone, and Pause sets a
	// cooldown or backoff key alone: Finish's halves for where an item's
	// keys live on different servers.
	Count = redis.NewScript(countSource)
	Pause = redis.NewScript(pauseSource)
	// Control is what an operator changes with w8yctl (add, remove, pause,
	// resume, run now), one atomic call per command.
	Control = redis.NewScript(controlSource)
	// Cancel asks the holder of an item's lock, whoever it is now, to stop
	// the item's child.
	Cancel = redis.NewScript(cancelSource)
	// Dedupe removes an item's extra occurrences from the list, keeping
	// one: w8yctl check --fix.
	Dedupe = redis.NewScript(dedupeSource)
)

// FinishSource is Finish's text, for a script that finishes a run and goes
// on in the same call (internal/take's FinishThenLook).
func FinishSource() string { return finishSource }
