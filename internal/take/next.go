package take

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/redisconn"
)

// The finish of a run and the take of the next, in one call: a busy
// worker, whose every take finds its item by a look, costs Redis one
// round trip an item instead of two (see next.lua).

//go:embed next.lua
var nextSource string

// nextScript is next.lua after finish.lua and look.lua, each made a
// function of its own keys and arguments.
var nextScript = indexed(
	"local function finishRun(KEYS, ARGV)\n", finish.Source(), "\nend\n",
	"local function lookDue(KEYS, ARGV)\n", lookSource, "\nend\n",
	nextSource)

// FinishThenLook finishes the run that end says, which held lockKey with
// token, as f.Finish does, and in the same call looks for the next item
// as a worker's take does first (see LookFirst), with the step of the
// fleet's sweep that is due, but passes over no untried items: a look that
// takes nothing leaves those to the worker's next take, which looks again. It reports the item taken, if
// any (ok).
//
// Where one call cannot do both (the keys are not colocated, the server
// lacks LPOS, or --replica-acks must confirm each take apart), it only
// finishes, as f.Finish does. An error is the whole call's, and nothing
// was taken: a finish that it did not apply (finish.Resend) can be sent
// again by itself.
func (t *Taker) FinishThenLook(ctx context.Context, f *finish.Finisher, lockKey, token string, end finish.End) (done finish.Reply, next Taken, ok bool, err error) {
	finishKeys, finishArgs, colocated := f.Call(lockKey, token, end)
	if !colocated || !t.Looks() || t.ReplicaAcks > 0 {
		done, err = f.Finish(ctx, lockKey, token, end)
		return done, Taken{}, false, err
	}
	sent := time.Now()
	lookArgs := t.lookArgs("")
	keys := append(finishKeys, t.Keys.List())
	args := append([]any{len(finishKeys), len(finishArgs)}, finishArgs...)
	args = append(args, lookArgs...)
	got, err := nextScript.Run(ctx, t.Client, keys, args...).Result()
	if err != nil {
		return finish.Reply{}, Taken{}, false, redisconn.Wrap(fmt.Sprintf("finish the run of %s", quote(lockKey)), err)
	}
	reply, _ := got.([]any)
	if len(reply) != 2 {
		return finish.Reply{}, Taken{}, false, redisconn.Wrap(fmt.Sprintf("finish the run of %s", quote(lockKey)), fmt.Errorf("unexpected reply from next.lua: %v", got))
	}
	if done, err = finish.ReadReply(lockKey, reply[0]); err != nil {
		return finish.Reply{}, Taken{}, false, err
	}
	look, _ := reply[1].([]any)
	if len(look) < 8 {
		return done, Taken{}, false, nil
	}
	t.logSwept(look[2])
	if refusal(look[3]) != nil && t.Memory != nil {
		// Every place in use, or the rate full: the worker's next take
		// probes first, as after a look of its own that met the same.
		t.Memory.look.quiet = true
	}
	next, ok = t.readTaken(look, sent)
	if ok && next.fresh {
		// The item waits for its first slot: its lock goes back now, and
		// the worker's next take looks again.
		run, err := t.park(ctx, next)
		if err != nil {
			t.Log.Warn().Err(err).Str("item", clip.Item(next.Item)).Msg("could not give back the lock of a new item that waits for its first slot: it runs once the lock expires")
		}
		if err != nil || !run {
			return done, Taken{}, false, nil
		}
	}
	return done, next, ok, nil
}
