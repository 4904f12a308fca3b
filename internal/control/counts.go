package control

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

// reindexScript compares a batch of items' entries in the counts' indexes
// and the due index with their keys, and with fix writes what the keys say
// (reindex.lua).
//
//go:embed reindex.lua
var reindexSource string

var reindexScript = script.New(clock.Lua, reindexSource)

// Kinds of what checkCounts finds.
const (
	// FindingNotIndexed: a list whose counts' indexes are not whole (one
	// that a fleet before schema version 2 ran), so that every summary
	// reads the whole list.
	FindingNotIndexed = "not_indexed"
	// FindingCountsDrift: an item whose entries in the counts' indexes or
	// the due index say otherwise than its keys (a key set or deleted by
	// hand), or an entry of an item that the list does not hold (removed by
	// an outside LREM while something held it): the summary that does not
	// read the list counts it as the entries say.
	FindingCountsDrift = "counts_drift"
)

// countIndexes are the counts' indexes, which checkCounts reads whole.
var countIndexes = []func(schema.Keys) string{schema.Keys.Locks, schema.Keys.Pauses, schema.Keys.Backoffs, schema.Keys.Failing}

// checkCounts checks the counts' indexes against the keys of every item of
// the list (inList, as readList counted it), CheckBatch items a call of
// reindex.lua, and the indexes' entries against the list. With fix it
// writes what the keys say, drops the entries of items that the list does
// not hold, and records a list that was not indexed as indexed (schema
// version 2), so that the summaries stop reading it whole. Only where the
// indexes are kept (the keys colocated with the list).
func (f *Fleet) checkCounts(ctx context.Context, inList map[string]int, fix bool) ([]Finding, error) {
	if !f.Keys.Colocated {
		return nil, nil
	}
	version, indexed, err := f.indexed(ctx)
	if err != nil {
		return nil, err
	}
	out, err := f.reindex(ctx, inList, indexed, fix)
	if err != nil {
		return nil, err
	}
	stray, err := f.strayEntries(ctx, inList, fix)
	if err != nil {
		return nil, err
	}
	out = append(out, stray...)
	if !indexed {
		d := Finding{Kind: FindingNotIndexed, Key: f.Keys.Schema(),
			Problem: fmt.Sprintf("the list is kept in version %s of the layout, whose counts no index keeps: every summary reads the whole list", version)}
		if fix {
			if err := f.Client.Set(ctx, f.Keys.Schema(), schema.Version, 0).Err(); err != nil {
				return nil, redisconn.Wrap("record the version of "+strconv.Quote(f.Keys.List()), err)
			}
		}
		f.fixedOr(&d, fix, fmt.Sprintf("indexed every item, and recorded version %d: workers of an earlier w8y now refuse the list", schema.Version))
		out = append(out, d)
	}
	return out, nil
}

// indexed reads the list's recorded version of the layout, and says whether
// the counts' indexes are kept for it, as counts.lua judges it: not for a
// version before this one, nor for none on a list that a fleet before the
// version ran (see schema.ClaimVersion).
func (f *Fleet) indexed(ctx context.Context) (version string, indexed bool, err error) {
	version, err = f.Client.Get(ctx, f.Keys.Schema()).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", false, redisconn.Wrap("read "+strconv.Quote(f.Keys.Schema()), err)
	}
	if n, err := strconv.Atoi(version); version != "" && (err != nil || n < schema.Version) {
		return version, false, nil
	} else if version == "" {
		marks, err := f.Client.Exists(ctx, f.Keys.Fence(), f.Keys.Seen(), f.Keys.Untried(), f.Keys.Events()).Result()
		if err != nil {
			return "", false, redisconn.Wrap("read the marks under "+strconv.Quote(f.Keys.Prefix), err)
		}
		return version, marks == 0, nil
	}
	return version, true, nil
}

// reindex compares each item's entries in the counts' indexes with its
// keys, CheckBatch items a call of reindex.lua, which with fix writes them
// as the keys say. Where the list is not indexed yet, nothing is reported:
// the finding is that it is not. An item found drifted is looked at again
// before it is reported, as a missing item is (absent): a live fleet's take
// or finish, or a key expiring in the very millisecond of the look, may
// leave its keys and entries a moment apart, where a drift stays.
func (f *Fleet) reindex(ctx context.Context, inList map[string]int, indexed, fix bool) ([]Finding, error) {
	items := make([]string, 0, len(inList))
	for item := range inList {
		items = append(items, item)
	}
	drifted, err := f.reindexEach(ctx, items, fix)
	if err != nil || !indexed {
		return nil, err
	}
	if !fix && len(drifted) > 0 {
		if drifted, err = f.reindexEach(ctx, drifted, false); err != nil {
			return nil, err
		}
	}
	var out []Finding
	for _, item := range drifted {
		d := Finding{Kind: FindingCountsDrift, Item: item, Key: f.Keys.Prefix + "*",
			Problem: fmt.Sprintf("the summaries count %s otherwise than its keys say (a key set or deleted by hand)", quote(item))}
		f.fixedOr(&d, fix, "wrote its entries as its keys say")
		out = append(out, d)
	}
	return out, nil
}

// reindexEach runs reindex.lua over items, CheckBatch a call, and returns
// those whose entries did not agree with their keys (with fix, now
// rewritten).
func (f *Fleet) reindexEach(ctx context.Context, items []string, fix bool) ([]string, error) {
	flag := "0"
	if fix {
		flag = "1"
	}
	var drifted []string
	k := f.Keys
	for from := 0; from < len(items); from += CheckBatch {
		batch := items[from:min(from+CheckBatch, len(items))]
		keys := make([]string, 0, 6+5*len(batch))
		keys = append(keys, k.List(), k.Locks(), k.Pauses(), k.Backoffs(), k.Failing(), k.Due())
		args := make([]any, 0, 1+len(batch))
		args = append(args, flag)
		for _, item := range batch {
			keys = append(keys, k.Lock(item), k.Pause(item), k.Backoff(item), k.Cooldown(item), k.State(item))
			args = append(args, item)
		}
		some, err := reindexScript.Run(ctx, f.Client, keys, args...).StringSlice()
		if err != nil {
			return nil, redisconn.Wrap("check the counts' indexes", err)
		}
		drifted = append(drifted, some...)
	}
	return drifted, nil
}

// strayEntries finds the entries of the counts' indexes whose items the
// list does not hold (inList, or looked up again); with fix, they go.
func (f *Fleet) strayEntries(ctx context.Context, inList map[string]int, fix bool) ([]Finding, error) {
	var out []Finding
	for _, index := range countIndexes {
		key := index(f.Keys)
		var cursor uint64
		for {
			members, next, err := f.Client.ZScan(ctx, key, cursor, "*", CheckBatch).Result()
			if err != nil && !redisconn.IsReply(err) {
				return nil, redisconn.Wrap("read "+strconv.Quote(key), err)
			}
			for i := 0; i+1 < len(members); i += 2 {
				item := members[i]
				if _, ok := inList[item]; ok {
					continue
				}
				if n, err := f.Client.LPos(ctx, f.Keys.List(), item, redis.LPosArgs{}).Result(); err == nil && n >= 0 {
					continue // added since the list was read
				}
				d := Finding{Kind: FindingCountsDrift, Item: item, Key: key,
					Problem: fmt.Sprintf("%s counts %s, which the list does not hold", strconv.Quote(key), quote(item))}
				if fix {
					if err := f.Client.ZRem(ctx, key, item).Err(); err != nil {
						return nil, redisconn.Wrap("remove "+quote(item)+" from "+strconv.Quote(key), err)
					}
				}
				f.fixedOr(&d, fix, "removed it")
				out = append(out, d)
			}
			cursor = next
			if cursor == 0 || err != nil {
				break
			}
		}
	}
	return out, nil
}

// fixedOr says in d what fix did, or the command that would do it.
func (f *Fleet) fixedOr(d *Finding, fix bool, did string) {
	if fix {
		d.Fixed = ptr(did)
	} else {
		d.Remedy = ptr(f.w8yctl() + " check --fix")
	}
}
