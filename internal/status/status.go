// Package status reads what w8y keeps about every item of a list (lock,
// cooldown, backoff, state hash) and shows it as a table or as JSON, once or
// over and over: w8y --status. It reads a batch at a time, following the
// list's circular order while workers rotate it, and never holds Redis up
// for long.
package status

import (
	"context"
	_ "embed"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

var (
	//go:embed status.lua
	readSource string
	// readScript reads the list a batch at a time, following its circular
	// order while workers rotate it.
	readScript = script.New(readSource)
)

// Batch is how many items --status reads per round trip: one call of
// status.lua, then one pipeline of three reads per item, and one of five
// more for the items that a lock, a backoff or a pause holds (see Items). Redis serves other
// clients between the round trips, and between every few hundred commands
// of a pipeline; a call costs it about 0.3ms on a list of 100,000 items, so
// reading them all never holds it up for long at a time (see docs/benchmarks.md).
const Batch = 500

// Item is one item as --status shows it. The JSON names are part of
// w8y's interface (see docs/operating.md); null means "none" or "never".
type Item struct {
	Item string `json:"item"`
	// State is locked, paused, backoff, cooldown or idle; or, for an item that can
	// never run as things are, blocked (its lock key holds something other
	// than a lock) or invalid (it is empty or holds a NUL byte).
	State string `json:"state"`
	// Problem says, for a blocked or an invalid item, why it cannot run and
	// what an operator can do.
	Problem *string `json:"problem"`
	// Holder is the lock's value, the holder's token, while locked.
	Holder *string `json:"holder"`
	// LockTTL, Cooldown and Backoff are what is left of the lock, cooldown
	// and backoff in milliseconds, -1 for a key without expiry.
	LockTTL  *int64 `json:"lock_ttl_ms"`
	Cooldown *int64 `json:"cooldown_ms"`
	Backoff  *int64 `json:"backoff_ms"`
	// Pause is what is left of an operator's pause (w8yctl pause), -1 for
	// one without expiry; PauseReason and PausedBy are its reason and who
	// paused it, from its hash.
	Pause       *int64  `json:"pause_ms"`
	PauseReason *string `json:"pause_reason"`
	PausedBy    *string `json:"paused_by"`
	// LastStart and LastEnd are Unix milliseconds.
	LastStart           *int64  `json:"last_start"`
	LastEnd             *int64  `json:"last_end"`
	LastExitCode        *int64  `json:"last_exit_code"`
	LastDuration        *int64  `json:"last_duration_ms"`
	LastHolder          *string `json:"last_holder"`
	LastResult          *string `json:"last_result"`
	Runs                int64   `json:"runs"`
	Failures            int64   `json:"failures"`
	ConsecutiveFailures int64   `json:"consecutive_failures"`
	// NextSlot is, under --schedule, the slot that the item's cooldown
	// lasts until (Unix milliseconds), as the success that set it recorded:
	// set while that cooldown lasts, which the table shows as this slot.
	NextSlot *int64 `json:"next_slot"`
	// Settings are the item's own settings (w8yctl set), which workers
	// apply in place of their options: field to value, as
	// internal/settings names them; null where it has none.
	Settings map[string]string `json:"settings"`
	// settingsRead says that Settings is already as Redis holds them: the
	// read of the row's state found no settings key (see readFirst), so
	// that AddSettings need not read it.
	settingsRead bool
}

// stateFields are the fields of the state hash that --status shows, in the
// order that setState reads them.
var stateFields = []string{
	schema.FieldLastStart, schema.FieldLastEnd, schema.FieldLastExitCode, schema.FieldLastDuration, schema.FieldLastHolder,
	schema.FieldLastResult, schema.FieldRuns, schema.FieldFailures, schema.FieldConsecutiveFailures, schema.FieldNextSlot,
}

// Client is the part of the Redis client that --status needs.
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
	TxPipeline() redis.Pipeliner
}

// Reader reads the status of every item under one prefix.
type Reader struct {
	Client Client
	Keys   schema.Keys
	// Batch is how many items a round trip reads; 0 means Batch.
	Batch int
}

// Read calls each with the status of every item, a batch at a time, in list
// order. An item that the list holds more than once shows once.
func (s *Reader) Read(ctx context.Context, each func([]Item) error) error {
	_, err := s.ReadCounting(ctx, each)
	return err
}

// ReadCounting is Read, which also says how many entries of the list it
// read, duplicates and all: the list's length, as LLEN counts it, where
// each counts the distinct items.
func (s *Reader) ReadCounting(ctx context.Context, each func([]Item) error) (entries int64, err error) {
	list := s.Keys.List()
	batchSize := s.Batch
	if batchSize <= 0 {
		batchSize = Batch
	}
	seen := make(map[string]struct{})
	var anchor string
	var at int64
	started := false
	read, length := 0, 1
	for read < length {
		args := []any{"0", "", 0, batchSize}
		if started {
			args = []any{"1", anchor, at, min(batchSize, length-read)}
		}
		count := batchSize
		if started {
			count = min(batchSize, length-read)
		}
		reply, ok, err := s.window(ctx, started, anchor, at, count, length)
		if err == nil && !ok {
			reply, err = readScript.Run(ctx, s.Client, []string{list}, args...).Slice()
		}
		if err != nil {
			return int64(read), s.readError(ctx, err)
		}
		n, _ := reply[0].(int64)
		if n == 0 || len(reply) < 3 {
			return int64(read), nil
		}
		from, _ := reply[1].(int64)
		length = int(n)
		batch := make([]string, 0, len(reply)-2)
		for _, v := range reply[2:] {
			item, _ := v.(string)
			read++
			if _, dup := seen[item]; dup {
				continue
			}
			seen[item] = struct{}{}
			batch = append(batch, item)
		}
		anchor, _ = reply[len(reply)-1].(string)
		at = (from + int64(len(reply)-3)) % n
		started = true
		statuses, err := s.states(ctx, batch)
		if err != nil {
			return int64(read), err
		}
		if err := each(statuses); err != nil {
			return int64(read), err
		}
	}
	return int64(read), nil
}

// window reads what status.lua would reply (the list's length, the index
// of the first item read and the items) with plain commands in one
// transaction, where it can do without the script's search: from the
// head, or after anchor, the last item read, found at index at of a list
// that still has length items. It reports !ok where the list moved under
// it (rotated, or edited by others) and the script must find the anchor.
// Lua's handling of a batch's values cost Redis about half of a whole
// read's time, the commands themselves a twentieth (see
// docs/benchmarks.md).
func (s *Reader) window(ctx context.Context, started bool, anchor string, at int64, count, length int) ([]any, bool, error) {
	list := s.Keys.List()
	from := int64(0)
	if started {
		from = at + 1
		if from >= int64(length) {
			from = 0
		}
	}
	to := from + int64(count) - 1
	pipe := s.Client.TxPipeline()
	n := pipe.LLen(ctx, list)
	var found *redis.StringCmd
	if started {
		found = pipe.LIndex(ctx, list, at)
	}
	head := pipe.LRange(ctx, list, from, to)
	var wrap *redis.StringSliceCmd
	if started && to >= int64(length) {
		wrap = pipe.LRange(ctx, list, 0, to-int64(length))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, err
	}
	if started && (n.Val() != int64(length) || found.Val() != anchor) {
		return nil, false, nil
	}
	if n.Val() == 0 {
		return []any{int64(0)}, true, nil
	}
	items := head.Val()
	if wrap != nil {
		items = append(items, wrap.Val()...)
	}
	if !started {
		items = items[:min(len(items), int(n.Val()))]
	}
	reply := make([]any, 0, 2+len(items))
	reply = append(reply, n.Val(), from)
	for _, item := range items {
		reply = append(reply, item)
	}
	return reply, true, nil
}

// Items reads what a row shows of each of items, whether the list holds
// them or not: their lock, cooldown, backoff, pause and state (see
// states), and their own settings (see AddSettings), for w8yctl status
// ITEM and a page of the dashboard.
func (s *Reader) Items(ctx context.Context, items []string) ([]Item, error) {
	out, err := s.states(ctx, items)
	if err != nil {
		return nil, err
	}
	return out, s.AddSettings(ctx, out)
}

// AddSettings reads the own settings (w8yctl set) of the rows, a Batch a
// round trip. Read's batches leave them out: the summary of the whole list
// needs none, and a read of every item's settings hash would cost Redis an
// eighth more on a list of a million items; only the rows shown read them,
// and of those only the ones whose state's read found a settings key or
// could not tell (see readFirst).
func (s *Reader) AddSettings(ctx context.Context, rows []Item) error {
	for start := 0; start < len(rows); start += Batch {
		batch := rows[start:min(start+Batch, len(rows))]
		pipe := s.Client.Pipeline()
		own := make([]*redis.MapStringStringCmd, len(batch))
		for i, st := range batch {
			if !st.settingsRead {
				own[i] = pipe.HGetAll(ctx, s.Keys.Settings(st.Item))
			}
		}
		if pipe.Len() == 0 {
			continue
		}
		// A settings key of another type spoils only its own row.
		if _, err := pipe.Exec(ctx); err != nil && !redisconn.IsReply(err) {
			return redisconn.Wrap("read the settings of "+strconv.Itoa(len(batch))+" items", err)
		}
		for i := range batch {
			if own[i] == nil {
				continue
			}
			if got, err := own[i].Result(); err == nil && len(got) > 0 {
				batch[i].Settings = got
			}
		}
	}
	return nil
}

// ttl reads a PTTL reply: nil for a missing key (-2), -1 for a key without
// expiry, else the milliseconds left.
func ttl(cmd *redis.Cmd) *int64 {
	ms, err := cmd.Int64()
	if err != nil || ms == -2 {
		return nil
	}
	return &ms
}

// setState fills in the fields read from the state hash, in stateFields'
// order, once st's Cooldown is read. A field that is missing or not a
// number stays unset.
func (st *Item) setState(values []any, now int64) {
	count := func(v any) int64 {
		if n := Number(v); n != nil {
			return *n
		}
		return 0
	}
	st.LastStart, st.LastEnd = Number(values[0]), Number(values[1])
	st.LastExitCode, st.LastDuration = Number(values[2]), Number(values[3])
	st.LastHolder, st.LastResult = Text(values[4]), Text(values[5])
	st.Runs, st.Failures, st.ConsecutiveFailures = count(values[6]), count(values[7]), count(values[8])
	// The slot says when the cooldown ends only while the cooldown that
	// the success set is there: run-now deletes it and leaves the field,
	// and a cooldown without expiry, or one that outlasts the slot (by more
	// than the clocks of two hosts may differ), is an operator's.
	if st.Cooldown != nil && *st.Cooldown >= 0 {
		if slot := Number(values[9]); slot != nil && now+*st.Cooldown <= *slot+slotSkew.Milliseconds() {
			st.NextSlot = slot
		}
	}
}

// slotSkew is how much later than the slot that a success recorded the
// cooldown may end and still be that slot's: the worker that wrote both
// and the host that reads them may disagree on the time.
const slotSkew = time.Minute

// Number is a hash field's value, as HMGET replies it, read as a whole
// number: nil where the field is missing or not a number. w8yctl status
// ITEM reads the fields that --status does not show with it too.
func Number(v any) *int64 {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

// Text is a hash field's value, as HMGET replies it, or nil where the
// field is missing.
func Text(v any) *string {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	return &s
}

// States of an item, as --status shows them.
const (
	StateLocked   = "locked"
	StatePaused   = "paused"
	StateBackoff  = "backoff"
	StateCooldown = "cooldown"
	StateIdle     = "idle"
	StateBlocked  = "blocked"
	StateInvalid  = "invalid"
)

// classify sets st's State, and its Problem where it can never run as
// things are, from what was read: holderErr is the error of reading its
// lock key's value, when the key exists.
func (st *Item) classify(holderErr error) {
	problem := ""
	switch {
	case st.Item == "":
		st.State, problem = StateInvalid, "it is empty, and w8y skips it: remove it from the list"
	case strings.IndexByte(st.Item, 0) >= 0:
		st.State, problem = StateInvalid, "it holds a NUL byte, which cannot pass through argv or the environment, and w8y skips it: remove it from the list"
	case holderErr != nil && redisconn.IsReply(holderErr):
		// A key of another type where the lock should be (WRONGTYPE): no
		// worker can take it or wait it out, and none deletes what it does
		// not own.
		st.State, problem = StateBlocked, "its lock key holds something other than a lock: an operator must delete it before the item can run"
	case st.LockTTL != nil:
		st.State = StateLocked
	case st.Pause != nil:
		st.State = StatePaused
	case st.Backoff != nil:
		st.State = StateBackoff
	case st.Cooldown != nil:
		st.State = StateCooldown
	default:
		st.State = StateIdle
	}
	if problem != "" {
		st.Problem = &problem
	}
}

// Page is the status of the items at indexes offset to offset+limit-1 of
// the list, as it stands at one moment, and the list's length: what one
// refresh of a dashboard reads, however long the list. Workers rotate the
// list, so the window moves between two calls; an item that the list holds
// more than once shows as often as it is held.
func (s *Reader) Page(ctx context.Context, offset, limit int64) (int64, []Item, error) {
	list := s.Keys.List()
	pipe := s.Client.Pipeline()
	length := pipe.LLen(ctx, list)
	window := pipe.LRange(ctx, list, offset, offset+limit-1)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, nil, s.readError(ctx, err)
	}
	items, err := s.Items(ctx, window.Val())
	if err != nil {
		return 0, nil, err
	}
	return length.Val(), items, nil
}

// readError is the error of reading the list: a list key of another type
// gets the words every command gives it (schema.Keys.NotAList), not Redis'
// WRONGTYPE, as a refusal that no retry mends and --watch gives up on.
func (s *Reader) readError(ctx context.Context, err error) error {
	list := s.Keys.List()
	if redisconn.Code(err) == "WRONGTYPE" {
		pipe := s.Client.Pipeline()
		kind := pipe.Type(ctx, list)
		if _, terr := pipe.Exec(ctx); terr == nil {
			return redisconn.Refusal(s.Keys.NotAList(kind.Val()))
		}
	}
	return redisconn.Wrap("read "+strconv.Quote(list), err)
}
