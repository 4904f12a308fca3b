package registry

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
)

// TTL is how long a worker's entry outlives its last beat in a fleet of up
// to 100 workers: a worker that dies without a word (SIGKILL, a lost host)
// is gone from the registry within it. Fifteen seconds keeps a dead worker
// out of w8yctl workers soon enough for an operator. A larger fleet beats
// less often, and its entries last longer (see beatInterval).
const TTL = 15 * time.Second

// Client is the part of the Redis client that the registry needs: every
// read and write is one pipeline, which a Cluster client splits by slot
// where the keys are not colocated.
type Client interface {
	Pipeline() redis.Pipeliner
}

// Entry is one live worker as the registry shows it.
type Entry struct {
	// Holder is the worker's holder token, host:pid:random, which its locks
	// hold.
	Holder  string `json:"holder"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
	// Mode is "continuous" or "one-shot".
	Mode    string    `json:"mode"`
	Started time.Time `json:"started"`
	// State is schema.WorkerIdle or schema.WorkerBusy, since Since.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// Running is what the worker runs now, in the order it started them.
	Running []Run `json:"running"`
	// Expires is when the entry expires unless the worker beats again.
	Expires time.Time `json:"expires"`
}

// Run is an item that a worker runs now, and since when.
type Run struct {
	Item  string    `json:"item"`
	Since time.Time `json:"since"`
}

// fields are the hash's fields that Read reads, in the order of fieldsOf.
var fields = []string{
	schema.WorkerHolder, schema.WorkerHost, schema.WorkerPID, schema.WorkerVersion, schema.WorkerMode,
	schema.WorkerStarted, schema.WorkerState, schema.WorkerSince, schema.WorkerRunning,
}

// values are e's fields and values for HSET, in the order of fields.
func (e Entry) values() []any {
	runs := make([]string, len(e.Running))
	for i, r := range e.Running {
		runs[i] = strconv.FormatInt(r.Since.UnixMilli(), 10) + " " + r.Item
	}
	vals := []string{
		e.Holder, e.Host, strconv.Itoa(e.PID), e.Version, e.Mode,
		strconv.FormatInt(e.Started.UnixMilli(), 10), e.State, strconv.FormatInt(e.Since.UnixMilli(), 10),
		strings.Join(runs, "\x00"),
	}
	out := make([]any, 0, 2*len(fields))
	for i, f := range fields {
		out = append(out, f, vals[i])
	}
	return out
}

// entryOf reads an Entry from HMGET's values in the order of fields; ok
// is false when the hash is gone (it expired between the two reads).
func entryOf(vals []any, expires time.Time) (Entry, bool) {
	text := make([]string, len(fields))
	present := false
	for i := range fields {
		if i < len(vals) {
			if s, isText := vals[i].(string); isText {
				text[i], present = s, true
			}
		}
	}
	if !present {
		return Entry{}, false
	}
	ms := func(s string) time.Time {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return time.Time{}
		}
		return time.UnixMilli(n)
	}
	pid, _ := strconv.Atoi(text[2])
	e := Entry{
		Holder: text[0], Host: text[1], PID: pid, Version: text[3], Mode: text[4],
		Started: ms(text[5]), State: text[6], Since: ms(text[7]), Expires: expires, Running: []Run{},
	}
	if text[8] != "" {
		for _, r := range strings.Split(text[8], "\x00") {
			at, item, _ := strings.Cut(r, " ")
			e.Running = append(e.Running, Run{Item: item, Since: ms(at)})
		}
	}
	return e, true
}

// after is a ZRANGEBYSCORE/ZCOUNT bound: strictly after now.
func after(now time.Time) string { return "(" + strconv.FormatInt(now.UnixMilli(), 10) }

// Read returns the live workers under keys, the oldest first: the members
// of the registry whose entry has not expired on Redis' clock (the fleet's
// one clock, see internal/clock), which the first round trip reads with
// them. It reads in two round trips, whatever the number of workers.
func Read(ctx context.Context, client Client, keys schema.Keys) ([]Entry, error) {
	pipe := client.Pipeline()
	now := pipe.Time(ctx)
	members := pipe.ZRangeByScoreWithScores(ctx, keys.Workers(), &redis.ZRangeBy{Min: "-inf", Max: "+inf"})
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, redisconn.Wrap("read the workers "+strconv.Quote(keys.Workers()), err)
	}
	var live []redis.Z
	for _, m := range members.Val() {
		// Entries that expired but that no beat has pruned yet are dead.
		if int64(m.Score) > now.Val().UnixMilli() {
			live = append(live, m)
		}
	}
	if len(live) == 0 {
		return []Entry{}, nil
	}
	pipe = client.Pipeline()
	reads := make([]*redis.SliceCmd, len(live))
	for i, m := range live {
		holder, _ := m.Member.(string)
		reads[i] = pipe.HMGet(ctx, keys.Worker(holder), fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisconn.Wrap("read the workers' entries under "+strconv.Quote(keys.Prefix), err)
	}
	entries := make([]Entry, 0, len(live))
	for i, m := range live {
		if e, ok := entryOf(reads[i].Val(), time.UnixMilli(int64(m.Score))); ok {
			entries = append(entries, e)
		}
	}
	slices.SortFunc(entries, func(a, b Entry) int {
		return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.Holder, b.Holder))
	})
	return entries, nil
}

// Live counts the live workers under keys, whose entries have not expired
// on Redis' clock, in one round trip.
func Live(ctx context.Context, client Client, keys schema.Keys) (int64, error) {
	pipe := client.Pipeline()
	now := pipe.Time(ctx)
	members := pipe.ZRangeByScoreWithScores(ctx, keys.Workers(), &redis.ZRangeBy{Min: "-inf", Max: "+inf"})
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, redisconn.Wrap("count the workers "+strconv.Quote(keys.Workers()), err)
	}
	var n int64
	for _, m := range members.Val() {
		if int64(m.Score) > now.Val().UnixMilli() {
			n++
		}
	}
	return n, nil
}

// redisZ is the sorted-set member holder scored score.
func redisZ(score float64, holder string) redis.Z { return redis.Z{Score: score, Member: holder} }
