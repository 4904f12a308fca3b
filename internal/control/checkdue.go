package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/redisconn"
)

// w8yctl check's look at the due index: the items of the list it lacks,
// which only the fleet's sweep would find, and reading its entries (those of
// items the list does not hold are judged with the other keys, checkKeys).

// notDueBatch is how many items of the list one pipeline of notDue looks
// up: a ZSCORE and an EXISTS an item, well under a millisecond of Redis'
// time, as --status's batches are.
const notDueBatch = CheckBatch

// notDue finds the items of the list (inList) that the due index lacks
// and nothing holds, among those that the fleet has tried, where workers
// keep the index (colocated keys): only the fleet's next sweep would find
// them. Each is looked up again, with its place in the list against the
// fleet's marks, so that an item that a look is about to try as appended
// or untried is left out. With fix it is made due now (ZADD NX, score 0,
// as w8yctl run-now writes).
func (f *Fleet) notDue(ctx context.Context, inList map[string]int, maxLen int, fix bool) ([]Finding, error) {
	if !f.Keys.Colocated {
		return nil, nil
	}
	var candidates []string
	for item := range inList {
		if childcmd.ItemProblem(item, maxLen) == "" {
			candidates = append(candidates, item)
		}
	}
	slices.Sort(candidates)
	var lost []string
	for batch := range slices.Chunk(candidates, notDueBatch) {
		pipe := f.Client.Pipeline()
		scores := make([]*redis.FloatCmd, len(batch))
		held := make([]*redis.IntCmd, len(batch))
		for i, item := range batch {
			scores[i] = pipe.ZScore(ctx, f.Keys.Due(), item)
			held[i] = pipe.Exists(ctx, f.Keys.Lock(item), f.Keys.Cooldown(item), f.Keys.Backoff(item), f.Keys.Pause(item))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, redisconn.Wrap("read the due index "+strconv.Quote(f.Keys.Due()), err)
		}
		for i, item := range batch {
			if held[i].Val() == 0 && errors.Is(scores[i].Err(), redis.Nil) {
				lost = append(lost, item)
			}
		}
	}
	lost, err := f.triedAlready(ctx, lost)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, item := range lost {
		d := Finding{Kind: FindingNotDue, Item: item, Key: f.Keys.Due(),
			Problem: fmt.Sprintf("%s is in the list and nothing holds it, but the due index has no entry for it: no take finds it before the fleet's next sweep", quote(item))}
		if fix {
			pipe := f.Client.Pipeline()
			pipe.ZAddNX(ctx, f.Keys.Due(), redis.Z{Score: 0, Member: item})
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, redisconn.Wrap("ZADD "+strconv.Quote(f.Keys.Due()), err)
			}
			d.Fixed = ptr("made it due now")
		} else {
			d.Remedy = ptr(f.w8yctl() + " check --fix")
		}
		out = append(out, d)
	}
	return out, nil
}

// triedAlready keeps the items of lost that the fleet has tried: those
// that the list holds between the untried items at its head and the
// appended ones after the seen mark (see internal/take's look.lua), looked
// up with LPOS, absentBatch to a round trip. None where no worker has
// looked at the list yet: it is all to be tried.
func (f *Fleet) triedAlready(ctx context.Context, lost []string) ([]string, error) {
	var out []string
	for batch := range slices.Chunk(lost, absentBatch) {
		pipe := f.Client.Pipeline()
		marks := pipe.MGet(ctx, f.Keys.Seen(), f.Keys.Untried())
		at := make([]*redis.IntCmd, len(batch))
		for i, item := range batch {
			at[i] = pipe.LPos(ctx, f.Keys.List(), item, redis.LPosArgs{})
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, redisconn.Wrap("read "+strconv.Quote(f.Keys.List()), err)
		}
		seen, untried, known := readMarks(marks.Val())
		if !known {
			return nil, nil
		}
		for i, item := range batch {
			if n, err := at[i].Result(); err == nil && n >= untried && n < seen {
				out = append(out, item)
			}
		}
	}
	return out, nil
}

// readMarks reads the fleet's marks (seen and untried, MGET in that order,
// as internal/take's look.lua keeps them); known is false where no worker
// has looked at the list yet.
func readMarks(values []any) (seen, untried int64, known bool) {
	read := func(v any) (int64, bool) {
		text, _ := v.(string)
		n, err := strconv.ParseInt(text, 10, 64)
		return n, err == nil
	}
	if len(values) != 2 {
		return 0, 0, false
	}
	seen, ok := read(values[0])
	untried, ok2 := read(values[1])
	return seen, untried, ok && ok2
}

// scanDue returns the members of the due index, CheckBatch a step.
func (f *Fleet) scanDue(ctx context.Context) ([]string, error) {
	var members []string
	var cursor uint64
	for {
		pairs, next, err := f.Client.ZScan(ctx, f.Keys.Due(), cursor, "", CheckBatch).Result()
		if err != nil {
			return nil, redisconn.Wrap("ZSCAN "+strconv.Quote(f.Keys.Due()), err)
		}
		for i := 0; i < len(pairs); i += 2 {
			members = append(members, pairs[i])
		}
		if cursor = next; cursor == 0 {
			return members, nil
		}
	}
}
