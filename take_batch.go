package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/w8y/w8y/internal/items"
	"github.com/w8y/w8y/internal/lua"
	"github.com/w8y/w8y/internal/redisconn"
)

// takeBatch is how many candidates one call of lua.Take looks at. Redis
// runs nothing else while a script runs, and a candidate costs it about a
// microsecond, so a call blocks Redis for about a millisecond: like one slow
// command, far below the 10 ms at which Redis' slowlog starts to complain.
// A pass over 10,000 items then takes 10 round trips instead of 20,000.
// It must also stay well below the ~8,000 values that Lua's unpack can
// return, which the script uses to pass a batch to MGET and RPUSH.
const takeBatch = 1000

// firstBatch is how many candidates the first call of a pass looks at; each
// call that takes nothing doubles it, up to takeBatch. A busy list's first
// candidate is usually free, and a call costs Redis in proportion to its
// batch (the LRANGE, the EXISTS and MGET of every lock, and the rotation),
// so a take that finds its item early reads a handful of keys, not a
// thousand; a pass over a list where everything is taken needs only about
// seven more round trips than with whole batches from the start.
const firstBatch = 8

// batchTake is one call of lua.Take: the batched take, which rotates the
// list and tries a batch of candidates' locks in one round trip.
type batchTake struct {
	Prefix, Token string
	TTL           time.Duration
	// Left is how many candidates the pass has yet to look at, or -1 to
	// start a pass from the list's length, which the script reads.
	Left       int64
	MaxItemLen int
	Batch      int
	// Now is when the call is sent.
	Now time.Time
	// Sweep, if set, is how long the fleet's next sweep may wait when this
	// call ends the pass without a take (see due.go).
	Sweep time.Duration
	// Record holds the words that ask the script to record a take (see
	// recorder.takeWords).
	Record string
}

// batchTaken is what one call of lua.Take did.
type batchTaken struct {
	// Left is how many candidates the pass has yet to look at.
	Left int64
	// Length is the list's length when the call started a pass, or -1.
	Length int64
	// Item is the item whose lock is now ours, if Taken, and Fence the
	// take's fencing token (0 if the fence key could not be incremented).
	Item  string
	Taken bool
	Fence int64
	// Skipped are the items passed over that an operator should hear of.
	Skipped []skippedItem
}

// skippedItem is an item that a take passed over for good: the child cannot
// be given it (Size is its size) or its lock key holds a value of another
// type (LockType names it). Head is its first items.ClipLen bytes.
type skippedItem struct {
	Head     string
	Size     int
	LockType string
}

// run sends the call with client, WAIT acks replicas after it (see
// redisconn.RunConfirmed), and decodes the reply. A take that too few
// replicas confirmed returns what it took along with
// redisconn.ErrNotReplicated.
func (b batchTake) run(ctx context.Context, client redisconn.ScriptClient, acks int, list string) (batchTaken, error) {
	// No more arguments: Redis refuses commands of more than 10 parts
	// before AUTH, and a server that wants a password we lack must say
	// NOAUTH, not "Protocol error". New settings go into the options word.
	options := "batch=" + strconv.Itoa(b.Batch) + " now=" + strconv.FormatInt(b.Now.UnixMilli(), 10) + b.Record
	if b.Sweep > 0 {
		options += " sweep=" + strconv.FormatInt(b.Sweep.Milliseconds(), 10)
	}
	got, err := redisconn.RunConfirmed(ctx, client, lua.Take, acks, b.TTL, []string{list},
		b.Prefix, b.Token, b.TTL.Milliseconds(), b.Left, b.MaxItemLen, options)
	reply, ok := got.([]any)
	if !ok {
		if err == nil {
			err = fmt.Errorf("unexpected reply from lua.Take: %T", got)
		}
		return batchTaken{}, err
	}
	taken, decodeErr := decodeBatchTaken(reply)
	if decodeErr != nil {
		return batchTaken{}, decodeErr
	}
	// With a reply, the only error is redisconn.ErrNotReplicated.
	return taken, err
}

// decodeBatchTaken reads lua.Take's reply.
func decodeBatchTaken(reply []any) (batchTaken, error) {
	// Three values from a call that ended early, else the fence and pairs.
	if len(reply) != 3 && (len(reply) < 4 || len(reply)%2 != 0) {
		return batchTaken{}, fmt.Errorf("unexpected reply from lua.Take: %d values", len(reply))
	}
	left, ok := reply[0].(int64)
	length, ok2 := reply[2].(int64)
	if !ok || !ok2 {
		return batchTaken{}, fmt.Errorf("unexpected reply from lua.Take: left is %T, length %T", reply[0], reply[2])
	}
	out := batchTaken{Left: left, Length: length}
	out.Item, out.Taken = reply[1].(string)
	if len(reply) > 3 {
		out.Fence, _ = reply[3].(int64)
		out.Skipped = decodeSkipped(reply[4:])
	}
	return out, nil
}

// decodeSkipped reads the pairs that end lua.Take's and lua.Due's replies:
// the items passed over that an operator should hear of.
func decodeSkipped(pairs []any) []skippedItem {
	var out []skippedItem
	for i := 0; i+1 < len(pairs); i += 2 {
		head, _ := pairs[i].(string)
		skipped := skippedItem{Head: head[:min(len(head), items.ClipLen)]}
		switch v := pairs[i+1].(type) {
		case int64:
			skipped.Size = int(v)
		case string:
			skipped.LockType = v
		}
		out = append(out, skipped)
	}
	return out
}
