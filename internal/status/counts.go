package status

import (
	"context"
	_ "embed"
	"strconv"

	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

var (
	//go:embed counts.lua
	countsSource string
	// countsScript counts the list by state from the indexes that every
	// writer keeps, without reading the list.
	countsScript = script.New(clock.Lua, countsSource)
)

// Counted is the summary that Count reads from the indexes, with what the
// dashboard counts besides.
type Counted struct {
	Summary
	// PausedRunning is how many of the paused items run now.
	PausedRunning int64
	// BackoffNotFailing is how many items back off with no failure on
	// record (see Count's dashboard).
	BackoffNotFailing int64
	// At is Redis' clock when it was counted, in Unix milliseconds.
	At int64
}

// Count counts the list by state without reading it: one call of
// counts.lua, whose cost grows with the logarithm of the list's length and
// with the items that run or are paused now, not with the list (see
// docs/benchmarks.md). It returns nil where the indexes that it reads are
// not kept (an item's keys not colocated with the list) or not whole (a
// list that an earlier fleet has run, until w8yctl check --fix indexes
// it): the caller then reads the list whole. With dashboard, it also
// counts the items that back off with no failure on record, which the
// dashboard's "failing" counts.
//
// The counts are those that a whole read would find, for every write of
// w8y and w8yctl, and for items that outside writers add to the list or
// remove from it while nothing holds them; docs/operating.md says what
// else drifts, and w8yctl check finds it and --fix mends it. What only a
// whole read can count (duplicates, blocked and invalid items) is the last
// whole read's, in Summary.WholeReadAt.
func (s *Reader) Count(ctx context.Context, dashboard bool) (*Counted, error) {
	if !s.Keys.Colocated {
		return nil, nil
	}
	flag := "0"
	if dashboard {
		flag = "1"
	}
	k := s.Keys
	keys := []string{k.List(), k.Schema(), k.Fence(), k.Seen(), k.Untried(), k.Events(), k.Locks(), k.Pauses(), k.Backoffs(), k.Failing(), k.Due(), k.Counted()}
	reply, err := countsScript.Run(ctx, s.Client, keys, flag).Slice()
	if err != nil {
		return nil, s.readError(ctx, err)
	}
	if len(reply) < 13 {
		return nil, nil
	}
	n := func(i int) int64 {
		switch v := reply[i].(type) {
		case int64:
			return v
		case string:
			got, _ := strconv.ParseInt(v, 10, 64)
			return got
		}
		return 0
	}
	c := &Counted{PausedRunning: n(3), BackoffNotFailing: n(7), At: n(12)}
	sum := &c.Summary
	sum.Items, sum.Running, sum.Paused = n(0), n(1), n(2)
	sum.BackingOff, sum.Cooling, sum.Failing = max(n(4), 0), max(n(5), 0), n(6)
	sum.Duplicates, sum.Blocked, sum.Invalid = n(8), n(9), n(10)
	if at, ok := reply[11].(string); ok && at != "" {
		ms := n(11)
		sum.WholeReadAt = &ms
	}
	pausedOnly := sum.Paused - c.PausedRunning
	sum.Idle = max(sum.Items-sum.Duplicates-sum.Running-pausedOnly-sum.BackingOff-sum.Cooling-sum.Blocked-sum.Invalid, 0)
	return c, nil
}

// RecordWhole records what only a whole read counts, which sum holds from
// one (see schema.Keys.Counted), at Unix millisecond at, for the summaries
// that do not read the list. It is best effort: a client that may only
// read (an operator's ACL rule) leaves the last record as it was.
func (s *Reader) RecordWhole(ctx context.Context, sum *Summary, at int64) {
	// A list that does not exist (a mistyped prefix) gets nothing.
	if !s.Keys.Colocated || sum.Items == 0 {
		return
	}
	pipe := s.Client.Pipeline()
	pipe.HSet(ctx, s.Keys.Counted(), schema.CountedDuplicates, sum.Duplicates, schema.CountedBlocked, sum.Blocked,
		schema.CountedInvalid, sum.Invalid, schema.CountedAt, at)
	_, _ = pipe.Exec(ctx)
}
