package take

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/redisconn"
)

// The busy pass in batches, server-side: where the list and every item's
// keys live on one server, one call of batch.lua rotates the list and tries
// a batch of candidates' locks, leaving Redis as the per-candidate pass
// (each.go) does.

// maxBatch is how many candidates one call of batch.lua looks at, at most.
// Redis runs nothing else while a script runs, and a candidate costs it
// about a microsecond, so a call blocks Redis for about a millisecond: like
// one slow command, far below the 10 ms at which Redis' slowlog starts to
// complain. A pass over 10,000 items then takes 10 round trips instead of
// 20,000. It must also stay well below the ~8,000 values that Lua's unpack
// can return, which the script uses to pass a batch to MGET and RPUSH.
const maxBatch = 1000

// firstBatch is how many candidates the first call of a pass looks at, at
// least (a take starts with about as many as the Taker's last take looked
// at: see Memory.batch); each call that takes nothing doubles it, up to
// maxBatch. A busy list's first candidate is usually free, and a call costs
// Redis in proportion to its batch (the LRANGE, the MGET of every
// cooldown, the EXISTS and MGET of the other locks, and the rotation), so a
// take that finds its item early reads a handful of keys, not a thousand;
// a pass over a list where everything is taken needs only about seven more
// round trips than with whole batches from the start.
const firstBatch = 8

//go:embed batch.lua
var batchSource string

// batchScript rotates the list and tries a batch of candidates' locks in
// one call (batch.lua says how, at its top).
//
//	KEYS[1] -> the list
//	ARGV[1] -> the key prefix, under which each candidate's lock, cooldown,
//	           backoff, pause and state keys are (same server as the list)
//	ARGV[2] -> our token
//	ARGV[3] -> the lock's TTL in milliseconds
//	ARGV[4] -> candidates left in this pass, or -1 to start a pass
//	ARGV[5] -> the longest item the child can be given
//	ARGV[6] -> options: "batch=N [state_ttl=MS events=N] [start=N] [cap=N]
//	           [rate=N/MS]"
//
// Returns {left, item or false, length or -1, fence, settings, now, head1,
// size-or-type1, ...}, which decodeBatchReply reads.
var batchScript = indexed(batchSource)

// batchCall is one call of batchScript.
type batchCall struct {
	Prefix, Token string
	TTL           time.Duration
	// Left is how many candidates the pass has yet to look at, or -1 to
	// start a pass from the list's length, which the script reads.
	Left       int64
	MaxItemLen int
	Batch      int
	// Start is the list's length when the pass started, once known (-1
	// before): a pass that ends without a take marks that many items tried.
	Start int64
	// Words are the settings every take sends (see Taker.takeWords).
	Words string
}

// batchReply is what one call of batchScript did.
type batchReply struct {
	// Left is how many candidates the pass has yet to look at.
	Left int64
	// Length is the list's length when the call started a pass, or -1.
	Length int64
	// Item is the item whose lock is now ours, if Taken, and Fence the
	// take's fencing token (0 if the fence key could not be incremented),
	// or, where the call looked at nothing, fullFence (every place of
	// --fleet-max-running in use) or rateFence (--fleet-rate allowed no
	// start).
	Item  string
	Taken bool
	Fence int64
	// Settings is takenSettings' reply for the item taken (see
	// Taker.ownReply).
	Settings any
	// Now is Redis' clock at the call, Unix milliseconds.
	Now int64
	// Skipped are the items passed over that an operator should hear of.
	Skipped []skippedItem
	// Full is set when every place of --fleet-max-running was in use: the
	// call looked at nothing.
	Full bool
}

// takeInBatches is Pass.Take with batchScript: one round trip per batch of
// candidates (firstBatch, doubling up to maxBatch), and none for LLEN,
// which the first call of a pass reads. stop is checked between calls.
func (p *Pass) takeInBatches(ctx context.Context, stop <-chan struct{}) (Taken, error) {
	t := p.t
	list := t.Keys.List()
	most := t.Batch
	if most <= 0 {
		most = maxBatch
	}
	call := batchCall{Prefix: t.Keys.Prefix, Token: t.Token, TTL: t.TTL, MaxItemLen: t.MaxItemLen, Batch: min(max(firstBatch, t.Memory.batch), most), Start: p.length, Words: t.takeWords()}
	// looked is how many candidates this take has looked at, which the
	// next take's first batch starts from: on a list where one item in a
	// hundred is free, a take then costs one call or two, not the five
	// that doubling from firstBatch needs; on one whose first candidate is
	// free, the next take is back to firstBatch.
	var looked int64
	defer func() { t.Memory.batch = nextBatch(looked) }()
	// -1 asks the first call to start the pass from the list's length.
	for p.left != 0 {
		if stopped(stop) {
			return Taken{}, jobctl.ErrStopped
		}
		sent := time.Now()
		call.Left = p.left
		reply, err := call.run(ctx, t.Client, t.ReplicaAcks, list)
		if err != nil && !errors.Is(err, redisconn.ErrNotReplicated) {
			return Taken{}, redisconn.Wrap("take a batch from "+quote(list), err)
		}
		if before := p.left; before >= 0 {
			looked += before - reply.Left
		} else {
			looked += reply.Length - reply.Left
		}
		if p.left < 0 {
			p.length = reply.Length
			call.Start = reply.Length
		}
		p.left = reply.Left
		switch reply.Fence {
		case fullFence:
			return Taken{}, ErrFull
		case rateFence:
			return Taken{}, ErrRateFull
		}
		call.Batch = min(2*call.Batch, most)
		for _, s := range reply.Skipped {
			t.warnSkipped(s)
		}
		if reply.Taken {
			taken := t.taken(reply.Item, sent)
			taken.Fence, taken.Start = reply.Fence, redisTime(reply.Now)
			t.ownReply(&taken, reply.Settings)
			t.warnNoFence(taken)
			if err != nil {
				return Taken{}, unconfirmed(taken, err)
			}
			return taken, nil
		}
	}
	return Taken{}, ErrNoWork
}

// nextBatch is the first batch of the take after one that looked at
// looked candidates: the power of two at or above it, from firstBatch to
// maxBatch.
func nextBatch(looked int64) int {
	b := firstBatch
	for int64(b) < looked && b < maxBatch {
		b *= 2
	}
	return min(b, maxBatch)
}

// run sends the call with client, WAIT acks replicas after it (see
// redisconn.RunConfirmed), and decodes the reply. A take that too few
// replicas confirmed returns what it took along with
// redisconn.ErrNotReplicated.
func (b batchCall) run(ctx context.Context, client redisconn.ScriptClient, acks int, list string) (batchReply, error) {
	// No more arguments: Redis refuses commands of more than 10 parts
	// before AUTH, and a server that wants a password we lack must say
	// NOAUTH, not "Protocol error". New settings go into the options word.
	options := "batch=" + strconv.Itoa(b.Batch) + b.Words
	if b.Start >= 0 {
		options += " start=" + strconv.FormatInt(b.Start, 10)
	}
	got, err := redisconn.RunConfirmed(ctx, client, batchScript, acks, b.TTL, []string{list},
		b.Prefix, b.Token, b.TTL.Milliseconds(), b.Left, b.MaxItemLen, options)
	reply, ok := got.([]any)
	if !ok {
		if err == nil {
			err = fmt.Errorf("unexpected reply from batch.lua: %T", got)
		}
		return batchReply{}, err
	}
	decoded, decodeErr := decodeBatchReply(reply)
	if decodeErr != nil {
		return batchReply{}, decodeErr
	}
	// With a reply, the only error is redisconn.ErrNotReplicated.
	return decoded, err
}

// decodeBatchReply reads batchScript's reply.
func decodeBatchReply(reply []any) (batchReply, error) {
	// Three values from a call that ended early, else the fence, the
	// settings, Redis' clock and pairs.
	if len(reply) != 3 && (len(reply) < 6 || len(reply)%2 != 0) {
		return batchReply{}, fmt.Errorf("unexpected reply from batch.lua: %d values", len(reply))
	}
	left, ok := reply[0].(int64)
	length, ok2 := reply[2].(int64)
	if !ok || !ok2 {
		return batchReply{}, fmt.Errorf("unexpected reply from batch.lua: left is %T, length %T", reply[0], reply[2])
	}
	out := batchReply{Left: left, Length: length}
	out.Item, out.Taken = reply[1].(string)
	if len(reply) > 3 {
		out.Fence, _ = reply[3].(int64)
		out.Settings = reply[4]
		out.Now, _ = reply[5].(int64)
		out.Skipped = decodeSkipped(reply[6:])
	}
	return out, nil
}
