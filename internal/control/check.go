package control

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/script"
)

// dedupeScript removes an item's extra occurrences from the list, keeping
// one: w8yctl check --fix (dedupe.lua).
//
//go:embed dedupe.lua
var dedupeSource string

var dedupeScript = script.New(dedupeSource)

// Kinds of what Check finds: the JSON names are part of w8yctl's interface
// (see docs/operating.md).
const (
	// FindingWrongType: a lock, cooldown, backoff or pause key of a type
	// that w8y never writes there. A lock of another type blocks its item
	// for good; a cooldown, backoff or pause of another type pauses it
	// until it expires, if ever.
	FindingWrongType = "wrong_type"
	// FindingLockWithoutExpiry: a lock that no worker's death will ever
	// free: w8y always sets one with an expiry.
	FindingLockWithoutExpiry = "lock_without_expiry"
	// FindingDuplicate: an item that the list holds more than once, and so
	// runs more often than the others.
	FindingDuplicate = "duplicate"
	// FindingOrphanKey: a cooldown, backoff, pause or state key of an item
	// that the list does not hold.
	FindingOrphanKey = "orphan_key"
	// FindingOrphanDue: an entry of the due index for an item that the list
	// does not hold.
	FindingOrphanDue = "orphan_due"
	// FindingCannotRun: an item that no worker can hand to a child (empty,
	// a NUL byte, too long), which every worker skips.
	FindingCannotRun = "cannot_run"
	// FindingNotDue: an item of the list that nothing holds and that the
	// due index does not hold either, though the fleet has tried it: no
	// take finds it before the fleet's next sweep does (its keys deleted by
	// hand, its entry lost, an item appended behind an outside LREM).
	FindingNotDue = "not_due"
	// FindingMayEvict: a server that may evict keys when it is full (a
	// maxmemory with a policy other than noeviction): a lock evicted lets
	// a second worker run its item, and the list itself may go.
	FindingMayEvict = "may_evict"
	// FindingReplica: a server that is a replica, which refuses every
	// write: no worker pointed at it can take an item.
	FindingReplica = "replica"
)

// Finding is one thing that Check found wrong.
type Finding struct {
	Kind string `json:"kind"`
	Item string `json:"item"`
	// Key is the key at fault: the list for a duplicate or an item that
	// cannot run, the due index for an orphan entry.
	Key string `json:"key"`
	// Problem says what is wrong, in a sentence.
	Problem string `json:"problem"`
	// Fixed says what Check did about it with fix; nil where it did
	// nothing.
	Fixed *string `json:"fixed"`
	// Remedy is the command an operator would run, where Check leaves it
	// to one; nil where there is none to type.
	Remedy *string `json:"remedy"`
}

// CheckBatch is how many list entries one LRANGE reads, and how many keys
// one SCAN step and one pipeline of TYPE and PTTL look at: Redis serves
// other clients between the round trips, each of which costs it well under
// a millisecond at this size, as --status's batches do.
const CheckBatch = 500

// keyKinds are the per-item keys that Check looks at, each with the type
// that w8y writes there ("" for the state hash, whose type Check leaves to
// the workers, which log a WRONGTYPE each time they write it).
var keyKinds = []struct{ infix, want string }{
	{"lock:", "string"},
	{"cooldown:", "string"},
	{"backoff:", "string"},
	{"pause:", "hash"},
	{"settings:", "hash"},
	{"state:", ""},
}

// Check is the maintenance pass: it reads the list in batches and the keys
// under the prefix with SCAN (never KEYS), and returns what is wrong, in a
// stable order. With fix it repairs what is safe to repair: it removes the
// extra occurrences of duplicated items (never the last one, in one atomic
// step per item), and deletes the cooldown, backoff, pause, settings and state keys
// and due entries of items that the list does not hold, and the cooldown,
// backoff and pause keys of a wrong type. It never touches a lock: a lock
// without expiry, or of another type, is reported with the command that an
// operator would run once sure that no run holds it.
//
// Workers rotate the list while Check reads it, so that a batch may miss
// an item or see one twice: every item that the pass finds duplicated or
// missing is looked up again, one LPOS each, before it is reported.
// maxLen is the longest item that a child can be given (childcmd.MaxItemLenAny).
func (f *Fleet) Check(ctx context.Context, maxLen int, fix bool) ([]Finding, error) {
	if err := f.checkList(ctx, nil); err != nil {
		return nil, err
	}
	counts, err := f.readList(ctx)
	if err != nil {
		return nil, err
	}
	var out []Finding
	var dups []string
	for item, n := range counts {
		if why := childcmd.ItemProblem(item, maxLen); why != "" {
			out = append(out, f.cannotRun(item, why))
		}
		if n > 1 {
			dups = append(dups, item)
		}
	}
	found, err := f.duplicates(ctx, dups, fix)
	if err != nil {
		return nil, err
	}
	out = append(out, found...)
	found, err = f.checkKeys(ctx, counts, fix)
	if err != nil {
		return nil, err
	}
	out = append(out, found...)
	found, err = f.notDue(ctx, counts, maxLen, fix)
	if err != nil {
		return nil, err
	}
	out = append(out, found...)
	found, err = f.checkCounts(ctx, counts, fix)
	if err != nil {
		return nil, err
	}
	out = append(out, found...)
	out = append(out, f.checkServer(ctx)...)
	slices.SortFunc(out, func(a, b Finding) int {
		return strings.Compare(a.Kind+"\x00"+a.Key+"\x00"+a.Item, b.Kind+"\x00"+b.Key+"\x00"+b.Item)
	})
	return out, nil
}

// readList counts each item of the list, CheckBatch entries a round trip.
func (f *Fleet) readList(ctx context.Context) (map[string]int, error) {
	list := f.Keys.List()
	length, err := f.Client.LLen(ctx, list).Result()
	if err != nil {
		return nil, redisconn.Wrap("read "+strconv.Quote(list), err)
	}
	counts := make(map[string]int)
	for at := int64(0); at < length; at += CheckBatch {
		batch, err := f.Client.LRange(ctx, list, at, at+CheckBatch-1).Result()
		if err != nil {
			return nil, redisconn.Wrap("read "+strconv.Quote(list), err)
		}
		for _, item := range batch {
			counts[item]++
		}
	}
	return counts, nil
}

// duplicates reports the items of dups that the list holds more than once
// when looked up again, and with fix removes their extra occurrences.
func (f *Fleet) duplicates(ctx context.Context, dups []string, fix bool) ([]Finding, error) {
	list := f.Keys.List()
	var out []Finding
	for _, item := range dups {
		var n int64
		if fix {
			var err error
			if n, err = dedupeScript.Run(ctx, f.Client, []string{list}, item).Int64(); err != nil {
				return nil, redisconn.Wrap("remove the extra occurrences of "+quote(item), err)
			}
		} else {
			at, err := f.Client.LPosCount(ctx, list, item, 0, redis.LPosArgs{}).Result()
			if err != nil {
				return nil, redisconn.Wrap("read "+strconv.Quote(list), err)
			}
			n = int64(len(at))
		}
		if n < 2 {
			continue // a rotation showed it twice
		}
		d := Finding{Kind: FindingDuplicate, Item: item, Key: list,
			Problem: fmt.Sprintf("%s is in the list %d times, and runs %d times as often as the others", quote(item), n, n)}
		if fix {
			extra := "occurrence"
			if n > 2 {
				extra += "s"
			}
			d.Fixed = ptr(fmt.Sprintf("removed %d extra %s, kept the first", n-1, extra))
		} else {
			d.Remedy = ptr(f.w8yctl() + " check --fix")
		}
		out = append(out, d)
	}
	return out, nil
}

// scanned is one key under the prefix that names an item's key, with its
// type and expiry.
type scanned struct {
	key, infix, item, want string
	kind                   *redis.StatusCmd
	ttl                    *redis.DurationCmd
}

// checkKeys looks at each lock, cooldown, backoff, pause, settings and state key
// under the prefix, and at each entry of the due index.
func (f *Fleet) checkKeys(ctx context.Context, inList map[string]int, fix bool) ([]Finding, error) {
	keys, err := f.scanItemKeys(ctx)
	if err != nil {
		return nil, err
	}
	due, err := f.scanDue(ctx)
	if err != nil {
		return nil, err
	}
	// The items that the pass did not see in the list, looked up again.
	var missing []string
	for _, k := range keys {
		if inList[k.item] == 0 {
			missing = append(missing, k.item)
		}
	}
	for _, item := range due {
		if inList[item] == 0 {
			missing = append(missing, item)
		}
	}
	gone, err := f.absent(ctx, missing)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, k := range keys {
		if d := f.judgeKey(ctx, k, gone[k.item], fix); d != nil {
			out = append(out, *d)
		}
	}
	for _, item := range due {
		if !gone[item] {
			continue
		}
		d, err := f.orphanDue(ctx, item, fix)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// scanItemKeys finds the keys under the prefix that are an item's (see
// keyKinds), each with its type and expiry.
func (f *Fleet) scanItemKeys(ctx context.Context) ([]scanned, error) {
	var keys []scanned
	err := f.scan(ctx, func(batch []string) error {
		pipe := f.Client.Pipeline()
		var some []scanned
		for _, key := range batch {
			rest := strings.TrimPrefix(key, f.Keys.Prefix)
			for _, k := range keyKinds {
				if item, ok := strings.CutPrefix(rest, k.infix); ok {
					some = append(some, scanned{key: key, infix: k.infix, item: item, want: k.want,
						kind: pipe.Type(ctx, key), ttl: pipe.PTTL(ctx, key)})
					break
				}
			}
		}
		if len(some) == 0 {
			return nil
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return redisconn.Wrap("read the keys under "+strconv.Quote(f.Keys.Prefix), err)
		}
		keys = append(keys, some...)
		return nil
	})
	return keys, err
}

// judgeKey is what is wrong with k, an item's key, or nil: a lock of
// another type or without an expiry (which only its holder may delete), a
// key whose item the list does not hold (gone), a key of the wrong type.
// With fix, what check may repair is repaired.
func (f *Fleet) judgeKey(ctx context.Context, k scanned, gone, fix bool) *Finding {
	kind, ttl := k.kind.Val(), k.ttl.Val()
	if kind == "none" {
		return nil // expired or deleted since the scan
	}
	var d *Finding
	switch {
	case k.infix == "lock:" && kind != k.want:
		d = &Finding{Kind: FindingWrongType, Problem: fmt.Sprintf("the lock %s is a %s, not a string: no worker can take %s until it is deleted", quote(k.key), kind, quote(k.item)),
			Remedy: ptr(f.redisCLI() + " DEL " + shellQuote(k.key))}
	case k.infix == "lock:" && ttl == -1:
		holder, _ := f.Client.Get(ctx, k.key).Result()
		d = &Finding{Kind: FindingLockWithoutExpiry, Problem: fmt.Sprintf("the lock %s, held by %q, has no expiry: if its holder is gone, no worker will take %s again", quote(k.key), holder, quote(k.item)),
			Remedy: ptr(f.redisCLI() + " DEL " + shellQuote(k.key) + "  # once no run holds it")}
	case k.infix == "lock:":
		// A lock with an expiry is a run's, even of an item removed
		// while it ran: it ends by itself.
	case gone:
		d = &Finding{Kind: FindingOrphanKey, Problem: fmt.Sprintf("%s belongs to %s, which the list does not hold", quote(k.key), quote(k.item))}
		if fix {
			d.Fixed = f.del(ctx, k.key)
		}
	case k.infix == "settings:" && kind != k.want:
		// It holds nothing up: the workers read no settings from it.
		d = &Finding{Kind: FindingWrongType, Problem: fmt.Sprintf("%s is a %s, not a hash (w8yctl set writes a hash there): the workers apply none of it to %s, and w8yctl set refuses to change it", quote(k.key), kind, quote(k.item))}
		if fix {
			d.Fixed = f.del(ctx, k.key)
		}
	case k.want != "" && kind != k.want:
		d = &Finding{Kind: FindingWrongType, Problem: fmt.Sprintf("%s is a %s, not a %s (w8y writes a %s there), and holds %s up %s", quote(k.key), kind, k.want, k.want, quote(k.item), untilWhen(ttl))}
		if fix {
			d.Fixed = f.del(ctx, k.key)
		}
	}
	if d == nil {
		return nil
	}
	d.Item, d.Key = k.item, k.key
	if d.Fixed == nil && d.Remedy == nil && !fix {
		d.Remedy = ptr(f.w8yctl() + " check --fix")
	}
	return d
}

// orphanDue is the finding of item's entry in the due index, whose item
// the list does not hold; with fix, the entry is removed.
func (f *Fleet) orphanDue(ctx context.Context, item string, fix bool) (Finding, error) {
	d := Finding{Kind: FindingOrphanDue, Item: item, Key: f.Keys.Due(), Problem: fmt.Sprintf("the due index holds %s, which the list does not", quote(item))}
	if !fix {
		d.Remedy = ptr(f.w8yctl() + " check --fix")
		return d, nil
	}
	if err := f.Client.ZRem(ctx, f.Keys.Due(), item).Err(); err != nil {
		return d, redisconn.Wrap("ZREM "+strconv.Quote(f.Keys.Due()), err)
	}
	d.Fixed = ptr("removed the entry")
	return d, nil
}

// del deletes key, and says so for Finding.Fixed; a failure is a line of
// its own instead, so that one refused DEL does not hide the other fixes.
func (f *Fleet) del(ctx context.Context, key string) *string {
	if err := f.Client.Del(ctx, key).Err(); err != nil {
		return ptr("could not delete it: " + redisconn.Wrap("DEL", err).Error())
	}
	return ptr("deleted it")
}

// untilWhen says how long a key with PTTL ttl holds its item up.
func untilWhen(ttl time.Duration) string {
	if ttl >= 0 {
		return "for " + strconv.FormatInt(ttl.Milliseconds(), 10) + "ms more"
	}
	return "for good (it has no expiry)"
}

// cannotRun is the finding of an item that no child can be given.
func (f *Fleet) cannotRun(item, why string) Finding {
	d := Finding{Kind: FindingCannotRun, Item: item, Key: f.Keys.List(),
		Problem: fmt.Sprintf("%s can never run: %s, and every worker skips it", quote(item), why)}
	if !strings.ContainsRune(item, 0) && len(item) <= clip.Len {
		d.Remedy = ptr(f.w8yctl() + " remove -- " + shellQuote(item))
	}
	return d
}

// globEscape escapes what SCAN's MATCH would read as a pattern in s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell, for a remedy to paste.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// quote quotes an item or key for a message, clipped (see clip.Item).
func quote(s string) string { return strconv.Quote(clip.Item(s)) }

func ptr[T any](v T) *T { return &v }

// w8yctl and redisCLI start a remedy: f.Remedies', else the command with
// the prefix alone.
func (f *Fleet) w8yctl() string {
	if f.Remedies.W8yctl != "" {
		return f.Remedies.W8yctl
	}
	return "w8yctl -k " + shellQuote(strings.TrimSuffix(f.Keys.Prefix, ":"))
}

func (f *Fleet) redisCLI() string {
	if f.Remedies.RedisCLI != "" {
		return f.Remedies.RedisCLI
	}
	return "redis-cli"
}

// checkServer finds what the server itself breaks of w8y's promises: an
// eviction policy that may delete locks and the list, or a replica that
// refuses writes. A server that hides INFO is left unchecked: w8yctl
// check cannot tell, and says nothing it does not know.
func (f *Fleet) checkServer(ctx context.Context) []Finding {
	client, ok := f.Client.(redisconn.Infoer)
	if !ok {
		return nil
	}
	s, err := redisconn.ReadServer(ctx, client)
	if err != nil {
		return nil
	}
	var out []Finding
	if s.MayEvict() {
		out = append(out, Finding{Kind: FindingMayEvict, Key: f.Keys.List(),
			Problem: fmt.Sprintf("Redis may evict keys when it is full (maxmemory %s, maxmemory-policy %s): a lock evicted lets a second worker run its item, and the list itself may go; set maxmemory-policy noeviction, or give w8y a Redis of its own", redisconn.Bytes(s.MaxMemory), s.Policy)})
	}
	if s.Replica() {
		out = append(out, Finding{Kind: FindingReplica, Key: f.Keys.List(),
			Problem: redisconn.ReplicaRefusal(s).Error()})
	}
	return out
}
