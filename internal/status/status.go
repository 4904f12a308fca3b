// Package status reads what w8y keeps about every item of a list (lock,
// cooldown, backoff, state hash) and shows it as a table or as JSON, once or
// over and over: w8y --status. It reads a batch at a time, following the
// list's circular order while workers rotate it, and never holds Redis up
// for long.
package status

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/mattn/go-isatty"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
)

var (
	//go:embed status.lua
	readSource string
	// readScript reads the list a batch at a time, following its circular
	// order while workers rotate it.
	readScript = redis.NewScript(readSource)
)

// Batch is how many items --status reads per round trip: one call of
// status.lua, then one pipeline of five reads per item. Redis serves other
// clients between the round trips, and between every few hundred commands
// of a pipeline; a call costs it about 0.3ms on a list of 100,000 items, so
// reading them all never holds it up for long at a time (see README).
const Batch = 500

// Item is one item as --status shows it. The JSON names are part of
// w8y's interface (see README); null means "none" or "never".
type Item struct {
	Item string `json:"item"`
	// State is locked, backoff, cooldown or idle.
	State string `json:"state"`
	// Holder is the lock's value, the holder's token, while locked.
	Holder *string `json:"holder"`
	// LockTTL, Cooldown and Backoff are what is left of the lock, cooldown
	// and backoff in milliseconds, -1 for a key without expiry.
	LockTTL  *int64 `json:"lock_ttl_ms"`
	Cooldown *int64 `json:"cooldown_ms"`
	Backoff  *int64 `json:"backoff_ms"`
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
}

// stateFields are the fields of the state hash that --status reads, in the
// order of the HMGET.
var stateFields = []string{
	schema.FieldLastStart, schema.FieldLastEnd, schema.FieldLastExitCode, schema.FieldLastDuration, schema.FieldLastHolder,
	schema.FieldLastResult, schema.FieldRuns, schema.FieldFailures, schema.FieldConsecutiveFailures,
}

// Client is the part of the Redis client that --status needs.
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
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
	list := s.Keys.List()
	batchSize := s.Batch
	if batchSize <= 0 {
		batchSize = Batch
	}
	seen := make(map[string]struct{})
	var anchor string
	var at int64
	started := false
	for read, length := 0, 1; read < length; {
		args := []any{"0", "", 0, batchSize}
		if started {
			args = []any{"1", anchor, at, min(batchSize, length-read)}
		}
		reply, err := readScript.Run(ctx, s.Client, []string{list}, args...).Slice()
		if err != nil {
			return redisconn.Wrap("read "+strconv.Quote(list), err)
		}
		n, _ := reply[0].(int64)
		if n == 0 || len(reply) < 3 {
			return nil
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
		statuses, err := s.details(ctx, batch)
		if err != nil {
			return err
		}
		if err := each(statuses); err != nil {
			return err
		}
	}
	return nil
}

// details reads the lock, cooldown, backoff and state of items in one
// pipeline.
func (s *Reader) details(ctx context.Context, items []string) ([]Item, error) {
	if len(items) == 0 {
		return nil, nil
	}
	type reads struct {
		holder                     *redis.Cmd
		lockTTL, cooldown, backoff *redis.Cmd
		state                      *redis.SliceCmd
	}
	pipe := s.Client.Pipeline()
	all := make([]reads, len(items))
	for i, item := range items {
		lock := s.Keys.Lock(item)
		all[i] = reads{
			holder:   pipe.Do(ctx, "GET", lock),
			lockTTL:  pipe.Do(ctx, "PTTL", lock),
			cooldown: pipe.Do(ctx, "PTTL", s.Keys.Cooldown(item)),
			backoff:  pipe.Do(ctx, "PTTL", s.Keys.Backoff(item)),
			state:    pipe.HMGet(ctx, s.Keys.State(item), stateFields...),
		}
	}
	// Errors are read per command below: a key of another type spoils only
	// its own column.
	_, err := pipe.Exec(ctx)
	if err != nil && !redisconn.IsReply(err) {
		return nil, redisconn.Wrap("read the status of "+strconv.Itoa(len(items))+" items", err)
	}
	out := make([]Item, len(items))
	for i, item := range items {
		r := all[i]
		st := Item{Item: item}
		st.LockTTL = ttl(r.lockTTL)
		st.Cooldown = ttl(r.cooldown)
		st.Backoff = ttl(r.backoff)
		if st.LockTTL != nil {
			if holder, err := r.holder.Text(); err == nil {
				st.Holder = &holder
			}
		}
		if values, err := r.state.Result(); err == nil {
			st.setState(values)
		}
		switch {
		case st.LockTTL != nil:
			st.State = "locked"
		case st.Backoff != nil:
			st.State = "backoff"
		case st.Cooldown != nil:
			st.State = "cooldown"
		default:
			st.State = "idle"
		}
		out[i] = st
	}
	return out, nil
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
// order. A field that is missing or not a number stays unset.
func (st *Item) setState(values []any) {
	number := func(i int) *int64 {
		s, ok := values[i].(string)
		if !ok {
			return nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil
		}
		return &n
	}
	text := func(i int) *string {
		s, ok := values[i].(string)
		if !ok {
			return nil
		}
		return &s
	}
	count := func(i int) int64 {
		if n := number(i); n != nil {
			return *n
		}
		return 0
	}
	st.LastStart, st.LastEnd = number(0), number(1)
	st.LastExitCode, st.LastDuration = number(2), number(3)
	st.LastHolder, st.LastResult = text(4), text(5)
	st.Runs, st.Failures, st.ConsecutiveFailures = count(6), count(7), count(8)
}

// Show is w8y --status: every item of the list that reader reads, in list
// order, as a table or as JSON, written to stdout once, or every watch
// interval (when not 0) until ctx is done. A watch that fails to read goes
// on to the next turn unless Redis refuses (ErrRefused), logging the error.
// On a terminal, each turn clears the screen first.
func Show(ctx context.Context, reader *Reader, asJSON bool, watch time.Duration, stdout io.Writer, log zerolog.Logger) error {
	terminal := isTerminal(stdout)
	show := func() error {
		var buf bytes.Buffer
		if terminal && watch > 0 {
			// Home and clear, written with the new screen at once so that
			// it does not flicker.
			buf.WriteString("\x1b[H\x1b[2J")
		}
		var err error
		if asJSON {
			err = writeJSON(ctx, reader, &buf)
		} else {
			err = writeTable(ctx, reader, &buf, time.Now())
		}
		if err != nil {
			return err
		}
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return errWrite{err}
		}
		return nil
	}
	if watch == 0 {
		return wrote(show())
	}
	ticker := time.NewTicker(watch)
	defer ticker.Stop()
	for {
		err := show()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, redisconn.ErrRefused), errors.As(err, new(errWrite)):
			return wrote(err)
		case err != nil:
			// Redis may come back: say so, and try again next time.
			log.Error().Err(err).Msg("could not read the status; retrying")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// errWrite is a failure to write the status to stdout, which no retry
// mends.
type errWrite struct{ err error }

func (e errWrite) Error() string { return "write the status: " + e.err.Error() }
func (e errWrite) Unwrap() error { return e.err }

// wrote is how Show ends after err: a reader that has gone (w8y --status |
// head -1) wants no more, which is no failure.
func wrote(err error) error {
	if errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// writeJSON writes one JSON document, an array with an item per line.
func writeJSON(ctx context.Context, reader *Reader, w io.Writer) error {
	io.WriteString(w, "[")
	first := true
	err := reader.Read(ctx, func(batch []Item) error {
		for _, st := range batch {
			line, err := json.Marshal(st)
			if err != nil {
				return err
			}
			if !first {
				io.WriteString(w, ",")
			}
			first = false
			io.WriteString(w, "\n")
			w.Write(line)
		}
		return nil
	})
	if err != nil {
		return err
	}
	io.WriteString(w, "\n]\n")
	return nil
}

// statusColumns head the table.
var statusColumns = []string{"ITEM", "STATE", "HOLDER", "TTL", "WAIT", "LAST RESULT", "EXIT", "STARTED", "ENDED", "TOOK", "RUNS", "FAILS", "STREAK"}

// writeTable writes a table, a line per item, its columns apart by at
// least two spaces; now is the time that ages are measured from.
func writeTable(ctx context.Context, reader *Reader, w io.Writer, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(statusColumns, "\t"))
	err := reader.Read(ctx, func(batch []Item) error {
		for _, st := range batch {
			fmt.Fprintln(tw, strings.Join(st.row(now), "\t"))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Flush()
}

// row is st's line in the table.
func (st Item) row(now time.Time) []string {
	wait := st.Backoff
	if wait == nil {
		wait = st.Cooldown
	}
	return []string{
		cell(st.Item), st.State, text(st.Holder), millisLeft(st.LockTTL), millisLeft(wait),
		text(st.LastResult), number(st.LastExitCode), ago(st.LastStart, now), ago(st.LastEnd, now),
		took(st.LastDuration), strconv.FormatInt(st.Runs, 10), strconv.FormatInt(st.Failures, 10),
		strconv.FormatInt(st.ConsecutiveFailures, 10),
	}
}

// none fills a cell that has nothing to show.
const none = "-"

// cell shows an item as it is, or quoted when it holds spaces, control
// characters or invalid UTF-8, which would break the table's columns.
func cell(item string) string {
	if item == "" || strings.IndexFunc(item, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(item)
	}
	return item
}

func text(s *string) string {
	if s == nil {
		return none
	}
	return cell(*s)
}

func number(n *int64) string {
	if n == nil {
		return none
	}
	return strconv.FormatInt(*n, 10)
}

// millisLeft shows a PTTL: "-" for no key, "forever" for no expiry.
func millisLeft(ms *int64) string {
	switch {
	case ms == nil:
		return none
	case *ms < 0:
		return "forever"
	}
	return short(time.Duration(*ms) * time.Millisecond)
}

// ago shows a Unix-milliseconds time as its age at now.
func ago(ms *int64, now time.Time) string {
	if ms == nil {
		return none
	}
	return short(now.Sub(time.UnixMilli(*ms))) + " ago"
}

func took(ms *int64) string {
	if ms == nil {
		return none
	}
	return short(time.Duration(*ms) * time.Millisecond)
}

// short rounds d for a person: tenths of a second below a minute, seconds
// above. Clocks of different hosts may disagree a little, so a time just in
// the future shows as 0s.
func short(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
