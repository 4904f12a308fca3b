package finish

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

//go:embed park.lua
var parkSource string

// parkScript gives back the lock of an item that waits for its first
// slot (park.lua).
var parkScript = script.New(clock.Lua, parkSource)

// Park gives back the lock lockKey, which holds token, of a take whose
// item waits for its first slot rather than run now (a new item under a
// schedule): no run is recorded, the item's cooldown lasts until slot (in
// wait, as the host counts), and its state hash keeps the slot as
// next_slot, which makes its next take run it. In one round trip where
// the item's keys are colocated; elsewhere the cooldown and the state go
// first, in a pipeline, and the lock after them, so that a take that
// follows finds the cooldown.
func (rec *Recorder) Park(ctx context.Context, client Client, lockKey, token, item string, slot time.Time, wait time.Duration) error {
	k := rec.Keys
	ms := max(wait.Milliseconds(), 1)
	if k.Colocated {
		keys := []string{lockKey, k.Cooldown(item), k.State(item), k.Due(), k.Running(), k.Locks()}
		err := parkScript.Run(ctx, client, keys, token, item, ms, millis(slot), rec.StateTTL.Milliseconds()).Err()
		return redisconn.Wrap("give back the lock of "+strconv.Quote(lockKey)+" until its first slot", err)
	}
	pipe := client.Pipeline()
	cooldown := pauseScript.Eval(ctx, pipe, []string{k.Cooldown(item)}, token, ms, millis(slot))
	pipe.HSet(ctx, k.State(item), schema.FieldNextSlot, millis(slot))
	pipe.PExpire(ctx, k.State(item), rec.StateTTL)
	_, _ = pipe.Exec(ctx)
	if err := cooldown.Err(); err != nil {
		return redisconn.Wrap("set the cooldown of "+quoteItem(item), err)
	}
	_, err := Release(ctx, client, lockKey, token, item)
	return err
}
