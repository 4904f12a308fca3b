package status

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
)

// states reads the lock, cooldown, backoff, pause and state of items,
// whether the list holds them or not: Read's batches, and Items'. It reads
// in two pipelines: for every item, whether a lock, a backoff, a pause or
// its own settings exist (one EXISTS, see heldWeight), what is left of its
// cooldown and its state hash (HGETALL); then, only for the items that one
// of those holds (a fleet's few runs, pauses and backoffs), the rest. A
// list's usual item, never run or cooling down, costs three commands, not
// eight, and no read of its settings (see docs/benchmarks.md).
func (s *Reader) states(ctx context.Context, items []string) ([]Item, error) {
	if len(items) == 0 {
		return nil, nil
	}
	now, first, err := s.readFirst(ctx, items)
	if err != nil {
		return nil, err
	}
	second, err := s.readHeld(ctx, items, first)
	if err != nil {
		return nil, err
	}
	out := make([]Item, len(items))
	for i, item := range items {
		st := Item{Item: item}
		st.Cooldown = ttl(first[i].cooldown)
		var holderErr error
		if r := second[i]; r != nil {
			holderErr = r.apply(&st)
		}
		if fields, err := first[i].state.Result(); err == nil {
			st.setState(stateValues(fields), now)
		}
		st.settingsRead = first[i].noSettings
		st.classify(holderErr)
		out[i] = st
	}
	return out, nil
}

// firstReads are what states reads of every item, and what its EXISTS
// told: how many of the keys that hold an item exist (-1 where no EXISTS
// could name them all: a Cluster without a hash tag), and that it has no
// settings of its own.
type firstReads struct {
	held, cooldown *redis.Cmd
	state          *redis.MapStringStringCmd
	holds          int64
	noSettings     bool
}

// heldWeight is how many times the EXISTS of readFirst names an item's
// settings key, after its lock, backoff and pause keys. EXISTS counts a key
// once for each time it is named, so that its reply tells both apart: its
// remainder by heldWeight is how many of the three keys that hold an item
// exist (at most three), its quotient whether the settings do.
const heldWeight = 4

// tell reads what r's EXISTS replied, where it could be sent and did not
// fail (a key of another type counts as any other).
func (r *firstReads) tell() {
	r.holds = -1
	if r.held == nil {
		return
	}
	n, err := r.held.Int64()
	if err != nil {
		return
	}
	r.holds = n % heldWeight
	r.noSettings = n < heldWeight
}

// readFirst sends the first pipeline of states: Redis' clock, the one that
// the slots were found on (see internal/clock), read with the keys and
// returned as now in Unix milliseconds, and each item's firstReads.
func (s *Reader) readFirst(ctx context.Context, items []string) (int64, []firstReads, error) {
	pipe := s.Client.Pipeline()
	redisNow := pipe.Time(ctx)
	first := make([]firstReads, len(items))
	for i, item := range items {
		first[i] = firstReads{
			cooldown: pipe.Do(ctx, "PTTL", s.Keys.Cooldown(item)),
			// HGETALL, not an HMGET of the fields shown: Redis parses each
			// field named as an argument, which made an HMGET of ten cost
			// it 2.7 times an HGETALL of a missing hash, and no less of an
			// existing one (see docs/benchmarks.md).
			state: pipe.HGetAll(ctx, s.Keys.State(item)),
		}
		if s.Keys.Colocated {
			args := []any{"EXISTS", s.Keys.Lock(item), s.Keys.Backoff(item), s.Keys.Pause(item)}
			for range heldWeight {
				args = append(args, s.Keys.Settings(item))
			}
			first[i].held = pipe.Do(ctx, args...)
		}
	}
	// Errors are read per command: a key of another type spoils only its
	// own column.
	if _, err := pipe.Exec(ctx); err != nil && !redisconn.IsReply(err) {
		return 0, nil, redisconn.Wrap("read the status of "+strconv.Itoa(len(items))+" items", err)
	}
	for i := range first {
		first[i].tell()
	}
	now := time.Now().UnixMilli()
	if at, err := redisNow.Result(); err == nil {
		now = at.UnixMilli()
	}
	return now, first, nil
}

// heldReads are what states reads of an item that a lock, a backoff or a
// pause holds.
type heldReads struct {
	holder, lockTTL, backoff, pause *redis.Cmd
	paused                          *redis.SliceCmd
}

// readHeld sends the second pipeline of states, for the items that the
// first found held (every item where one EXISTS cannot name an item's keys:
// a Cluster without a hash tag; an item with settings alone is not held),
// and returns their heldReads (nil for the others).
func (s *Reader) readHeld(ctx context.Context, items []string, first []firstReads) ([]*heldReads, error) {
	second := make([]*heldReads, len(items))
	pipe := s.Client.Pipeline()
	for i, item := range items {
		if first[i].holds == 0 {
			continue
		}
		lock := s.Keys.Lock(item)
		second[i] = &heldReads{
			holder:  pipe.Do(ctx, "GET", lock),
			lockTTL: pipe.Do(ctx, "PTTL", lock),
			backoff: pipe.Do(ctx, "PTTL", s.Keys.Backoff(item)),
			pause:   pipe.Do(ctx, "PTTL", s.Keys.Pause(item)),
			paused:  pipe.HMGet(ctx, s.Keys.Pause(item), schema.PauseFieldReason, schema.PauseFieldBy),
		}
	}
	if pipe.Len() > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !redisconn.IsReply(err) {
			return nil, redisconn.Wrap("read the status of "+strconv.Itoa(len(items))+" items", err)
		}
	}
	return second, nil
}

// apply puts what r read into st, and returns the error of the holder's
// read, if it failed (a lock of another type).
func (r *heldReads) apply(st *Item) error {
	st.LockTTL = ttl(r.lockTTL)
	st.Backoff = ttl(r.backoff)
	st.Pause = ttl(r.pause)
	// A pause key of another type (set by hand) pauses too, without a
	// reason.
	if values, err := r.paused.Result(); err == nil && st.Pause != nil {
		if reason, ok := values[0].(string); ok {
			st.PauseReason = &reason
		}
		if by, ok := values[1].(string); ok {
			st.PausedBy = &by
		}
	}
	if st.LockTTL == nil {
		return nil
	}
	holder, err := r.holder.Text()
	if err == nil {
		st.Holder = &holder
	}
	return err
}

// stateValues puts the fields of a state hash, as HGETALL replies them, in
// stateFields' order, as HMGET would: nil for a missing field.
func stateValues(fields map[string]string) []any {
	values := make([]any, len(stateFields))
	for i, f := range stateFields {
		if v, ok := fields[f]; ok {
			values[i] = v
		}
	}
	return values
}
