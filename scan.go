package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	_ "embed"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
)

var (
	//go:embed scan.lua
	scanSource string

	// scanScript runs with EVALSHA, and falls back to EVAL when the server's
	// script cache lacks it (a fresh server, SCRIPT FLUSH, a failover).
	scanScript = redis.NewScript(scanSource)
)

// scanBatch is how many candidates one scan.lua call looks at. Redis runs
// nothing else while a script runs, and a candidate costs it about a
// microsecond, so a call blocks Redis for about a millisecond: like one slow
// command, far below the 10 ms at which Redis' slowlog starts to complain.
// A pass over 10,000 items then takes 10 round trips instead of 20,000.
// It must also stay well below the ~8,000 values that Lua's unpack can
// return, which the script uses to pass a batch to MGET and RPUSH.
const scanBatch = 1000

// takeInBatches is Take with scan.lua: one round trip per scanBatch
// candidates, and none for LLEN, which the first call of a pass reads. stop
// is checked between calls.
func (p *Pass) takeInBatches(ctx context.Context, stop <-chan struct{}) (string, *Lock, error) {
	r := p.r
	list := r.Keys.List()
	batch := r.Batch
	if batch <= 0 {
		batch = scanBatch
	}
	// -1 asks the first call to start the pass from the list's length.
	for p.left != 0 {
		select {
		case <-stop:
			return "", nil, errStopped
		default:
		}
		sent := time.Now()
		// No more arguments: Redis refuses commands of more than 10 parts
		// before AUTH, and a server that wants a password we lack must say
		// NOAUTH, not "Protocol error". New settings go into scanOptions.
		got, err := redisconn.RunConfirmed(ctx, r.Client, scanScript, r.ReplicaAcks, r.TTL, []string{list},
			r.Keys.Prefix, r.Token, r.TTL.Milliseconds(), p.left, r.MaxItemLen, r.scanOptions(batch, sent))
		reply, ok := got.([]any)
		if !ok {
			if err == nil {
				err = fmt.Errorf("unexpected reply from scan.lua: %T", got)
			}
			return "", nil, redisconn.Wrap("scan "+quoteKey(list), err)
		}
		// With a reply, the only error is redisconn.ErrNotReplicated.
		unconfirmed := err
		var item string
		var taken bool
		p.left, item, taken, err = r.readScan(reply)
		if err != nil {
			return "", nil, redisconn.Wrap("scan "+quoteKey(list), err)
		}
		if taken {
			lock := r.newLock(item)
			lock.expires = sent.Add(r.TTL)
			if unconfirmed != nil {
				return "", nil, r.giveBack(ctx, lock, unconfirmed)
			}
			return item, lock, nil
		}
	}
	return "", nil, ErrNoWork
}

// scanOptions is scan.lua's last argument: settings as space-separated
// name=value words, so that new ones need no new argument (see scan.lua).
func (r *Rotator) scanOptions(batch int, now time.Time) string {
	return "batch=" + strconv.Itoa(batch) + r.Record.scanWords(now)
}

// readScan decodes scan.lua's reply and logs the items it skipped. It
// returns the candidates left in the pass and the item taken, if any.
func (r *Rotator) readScan(reply []any) (left int64, item string, taken bool, err error) {
	if len(reply) < 2 || len(reply)%2 != 0 {
		return 0, "", false, fmt.Errorf("unexpected reply from scan.lua: %d values", len(reply))
	}
	left, ok := reply[0].(int64)
	if !ok {
		return 0, "", false, fmt.Errorf("unexpected reply from scan.lua: left is %T", reply[0])
	}
	item, taken = reply[1].(string)
	for i := 2; i < len(reply); i += 2 {
		head, _ := reply[i].(string)
		head = head[:min(len(head), clipLen)]
		switch v := reply[i+1].(type) {
		case int64:
			r.Log.Warn().Str("item", clipHead(head, int(v))).Msg("skipping item: " + whyBad(int(v), true, r.MaxItemLen))
		case string:
			r.warnLockType(head, v)
		}
	}
	return left, item, taken, nil
}
