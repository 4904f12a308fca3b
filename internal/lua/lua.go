// Package lua holds the Lua scripts that w8y runs inside Redis, so that each
// step that must see and change several keys at once (take an item, refresh
// or release its lock, finish its run) is one atomic round trip. Each script
// says at its top what it takes and returns.
//
// redis.Script runs a script with EVALSHA and falls back to EVAL when the
// server's script cache lacks it (a fresh server, SCRIPT FLUSH, a failover).
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed take.lua
	takeSource string
	//go:embed trylock.lua
	tryLockSource string
	//go:embed refresh.lua
	refreshSource string
	//go:embed finish.lua
	finishSource string
	//go:embed count.lua
	countSource string
	//go:embed pause.lua
	pauseSource string
	//go:embed due.lua
	dueSource string
	//go:embed control.lua
	controlSource string
	//go:embed cancel.lua
	cancelSource string
	//go:embed dedupe.lua
	dedupeSource string
)

var (
	// Take rotates the list and tries a batch of candidates' locks in one
	// call: the batched take, for where the list and every item's keys live
	// on one server.
	Take = redis.NewScript(takeSource)
	// TryLock takes one lock as SET NX PX does, and names a lock key of
	// another type: the take of one candidate, for where they do not.
	TryLock = redis.NewScript(tryLockSource)
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
	// Due is an idle worker's look at the list: it tries the items that
	// were appended since its last look and those whose due entry has
	// passed, and says when to pass over the whole list for the fleet.
	Due = redis.NewScript(dueSource)
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
