package status

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/registry"
	"github.com/w8y/w8y/internal/schema"
)

// Summary counts the whole list's items by what they are doing: the lines
// that open --status, before the rows. An item may count more than once: a
// paused item that still runs is both running and paused, and a failing
// one is also cooling, backing off or idle.
type Summary struct {
	// Items is how many entries the list holds, as LLEN counts them, and
	// Duplicates how many of them repeat an item that an earlier one holds
	// (each runs as often again: w8yctl check finds them). The other
	// counts count each item once.
	Items      int64 `json:"items"`
	Duplicates int64 `json:"duplicates"`
	Running    int64 `json:"running"`
	Paused     int64 `json:"paused"`
	Cooling    int64 `json:"cooling"`
	BackingOff int64 `json:"backing_off"`
	Idle       int64 `json:"idle"`
	// Failing items' last run failed (consecutive_failures > 0).
	Failing int64 `json:"failing"`
	// Blocked and Invalid items can never run as things are.
	Blocked int64 `json:"blocked"`
	Invalid int64 `json:"invalid"`
	// WholeReadAt is null where this summary read the whole list, and
	// otherwise when the last whole read (of --status, the dashboard's
	// search or w8yctl check) counted Duplicates, Blocked and Invalid, which
	// only such a read can count, in Unix milliseconds; null with those at
	// 0 where there was none. The other counts are this summary's own.
	WholeReadAt *int64 `json:"whole_read_at"`
}

// add counts st, an item, once: Items counts items until the read that
// counted them says how many entries the list holds (see Reader.turn).
func (s *Summary) add(st Item) {
	s.Items++
	if st.Pause != nil {
		s.Paused++
	}
	if st.ConsecutiveFailures > 0 {
		s.Failing++
	}
	switch st.State {
	case StateLocked:
		s.Running++
	case StateBackoff:
		s.BackingOff++
	case StateCooldown:
		s.Cooling++
	case StateIdle:
		s.Idle++
	case StateBlocked:
		s.Blocked++
	case StateInvalid:
		s.Invalid++
	}
}

// Lag is how far behind the fleet is on a list: the items whose cooldown,
// backoff or schedule says they may run, that no worker has taken yet, and
// the items that no worker has tried yet (a list loaded at once, items
// appended since the fleet last looked). While no worker is live, an entry
// of the due index counts only if its item came due by a schedule of its
// own (a cooldown, a backoff or a slot that ran out): one that is due since
// its last run ended has nothing to be late against until a worker starts.
// It is read from the due index and the fleet's marks, never from the
// list, so it costs the same on a list of 100,000 items as on one of ten.
// An item that only the fleet's sweep can find (its keys deleted by hand,
// its entry lost) counts from the sweep that finds it, which is at most
// take.SweepEvery away.
type Lag struct {
	// Overdue is how many items are due and not taken, NeverTried among
	// them.
	Overdue int64 `json:"overdue"`
	// NeverTried is how many items no worker has tried yet: those at the
	// list's head that w8y has not yet passed over since it first saw the
	// list (all of them, before any worker has), and those appended since
	// the fleet's last look. Only where the workers look (one server, or a
	// hash-tagged prefix), which is where the marks are kept.
	NeverTried int64 `json:"never_tried"`
	// MostOverdueMs is how long ago the most overdue item came due, in
	// milliseconds; 0 when none is.
	MostOverdueMs int64 `json:"most_overdue_ms"`
	// MostOverdue is that item, or null.
	MostOverdue *string `json:"most_overdue_item"`
}

// lagSample is how many of the oldest due entries Lag checks for a lock, a
// pause, a cooldown or a backoff: an entry whose run outlasts its lock's
// first expiry stays in the index with a past score until an idle worker
// moves it, and an item that one of these holds (a running or paused one, or
// one whose cooldown was set by hand) is not behind. A hundred EXISTS cost Redis some 20µs; past
// them, entries are counted without the check.
const lagSample = 100

// Lag reads how far behind the fleet is at now (see Lag): one pipeline of
// ZCOUNT and ZRANGEBYSCORE over the due index up to now, then one of
// EXISTS for the oldest lagSample entries' locks, pauses, cooldowns and
// backoffs (one EXISTS an item: where the index is kept, an item's keys
// share a slot).
//
// An entry with score 0 (w8yctl run-now and resume write "now" so, whatever
// the workers' clocks say) counts as overdue, but its age is not known, so
// it does not set MostOverdueMs.
func (s *Reader) Lag(ctx context.Context, now time.Time) (Lag, error) {
	due := s.Keys.Due()
	upTo := strconv.FormatInt(now.UnixMilli(), 10)
	pipe := s.Client.Pipeline()
	count := pipe.ZCount(ctx, due, "-inf", upTo)
	oldest := pipe.ZRangeByScoreWithScores(ctx, due, &redis.ZRangeBy{Min: "-inf", Max: upTo, Count: lagSample})
	var length *redis.IntCmd
	var seen, untried *redis.StringCmd
	if s.Keys.Colocated {
		// GETs, not one MGET: the operators' ACL rule (docs/recipes.md)
		// has GET.
		length = pipe.LLen(ctx, s.Keys.List())
		seen, untried = pipe.Get(ctx, s.Keys.Seen()), pipe.Get(ctx, s.Keys.Untried())
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Lag{}, redisconn.Wrap("read "+strconv.Quote(due), err)
	}
	entries := oldest.Val()
	lag := Lag{Overdue: count.Val()}
	if length != nil {
		lag.NeverTried = neverTried(length.Val(), seen.Val(), untried.Val())
		lag.Overdue += lag.NeverTried
	}
	if len(entries) == 0 {
		return lag, nil
	}
	live, err := s.LiveWorkers(ctx)
	if err != nil {
		return Lag{}, err
	}
	pipe = s.Client.Pipeline()
	held := make([]*redis.IntCmd, len(entries))
	runs := make([]*redis.SliceCmd, len(entries))
	for i, e := range entries {
		item, _ := e.Member.(string)
		held[i] = pipe.Exists(ctx, s.Keys.Lock(item), s.Keys.Pause(item), s.Keys.Cooldown(item), s.Keys.Backoff(item))
		if live == 0 {
			runs[i] = pipe.HMGet(ctx, s.Keys.State(item), schema.FieldLastStart, schema.FieldLastEnd)
		}
	}
	// A state hash of another type spoils only its own entry's check.
	if _, err := pipe.Exec(ctx); err != nil && !redisconn.IsReply(err) {
		return Lag{}, redisconn.Wrap("read the keys of "+strconv.Quote(due)+"'s oldest entries", err)
	}
	for i, e := range entries {
		if held[i].Val() > 0 || live == 0 && !scheduled(runs[i], e.Score) {
			lag.Overdue--
			continue
		}
		if lag.MostOverdue != nil || e.Score <= 0 {
			continue
		}
		item, _ := e.Member.(string)
		lag.MostOverdue = &item
		lag.MostOverdueMs = max(0, now.UnixMilli()-int64(e.Score))
	}
	return lag, nil
}

// scheduled reports whether an item whose due entry has score came due by
// a schedule of its own: its last run ended (state, the HMGET of its
// last_start and last_end), and set a cooldown, a backoff or a slot that
// ran out after that end. An item due since its run ended, one never run,
// and one whose run never ended (its worker died, and its lock ran out)
// are due only to a worker: with none live, none of them is overdue.
func scheduled(state *redis.SliceCmd, score float64) bool {
	values, err := state.Result()
	if err != nil || len(values) != 2 {
		return false
	}
	start, end := Number(values[0]), Number(values[1])
	return end != nil && (start == nil || *start <= *end) && score > float64(*end)
}

// neverTried is how many of a list of length items no worker has tried,
// from the fleet's marks (seen and untried, as internal/take's look.lua
// keeps them): the untried items at the head, and those after seen; the
// whole list when no worker has tried it yet (neither mark: a whole pass,
// such as --until-idle's, sets seen alone).
func neverTried(length int64, seenMark, untriedMark string) int64 {
	seen, seenErr := strconv.ParseInt(seenMark, 10, 64)
	untried, err := strconv.ParseInt(untriedMark, 10, 64)
	switch {
	case err != nil && seenErr != nil:
		return length
	case err != nil:
		untried = 0
	case seenErr != nil:
		seen = length
	}
	return min(max(untried, 0)+max(length-seen, 0), length)
}

// LiveWorkers is how many workers are alive on the list's prefix, as the
// registry of live workers counts them (see registry.Live).
func (s *Reader) LiveWorkers(ctx context.Context) (int64, error) {
	return registry.Live(ctx, s.Client, s.Keys)
}

// Filter chooses the rows that --status shows; the summary counts every
// item whatever the filter.
type Filter struct {
	// States are the states a row must have one of (see ParseStates); none
	// means any.
	States []string
	// Match is a glob (see ParseMatch) that the item must match; nil means
	// any.
	Match *regexp.Regexp
	// Limit is how many rows to show at most; negative means all.
	Limit int
}

// All is the filter that shows every row.
var All = Filter{Limit: -1}

// Filter states that are not an item's State: failing is a streak of
// failures, whatever the item does now; running is what a person calls
// locked.
const (
	filterFailing = "failing"
	filterRunning = "running"
)

// filterStates are what --state accepts, and the State each stands for.
var filterStates = map[string]string{
	filterRunning: StateLocked, StateLocked: StateLocked,
	StatePaused: StatePaused, filterFailing: filterFailing,
	"cooling": StateCooldown, StateCooldown: StateCooldown,
	StateBackoff: StateBackoff, "backing-off": StateBackoff,
	StateIdle: StateIdle, StateBlocked: StateBlocked, StateInvalid: StateInvalid,
}

// StateNames are --state's values, as its help and its errors list them.
const StateNames = "running, paused, failing, cooling, backoff, idle, blocked, invalid"

// ParseStates reads --state: states apart by commas.
func ParseStates(value string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(value, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		state, ok := filterStates[part]
		if !ok {
			return nil, fmt.Errorf("--state %q: %q is not a state: give one or more of %s, apart by commas", value, part, StateNames)
		}
		if !slices.Contains(out, state) {
			out = append(out, state)
		}
	}
	return out, nil
}

// ParseMatch reads --match: a glob in which * stands for any run of
// characters (slashes too, unlike a path's glob) and ? for one; every other
// character stands for itself.
func ParseMatch(glob string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`)$`)
	return regexp.MustCompile(b.String())
}

// ParseLimit reads --limit: a whole number, 0 for the summary alone.
func ParseLimit(value string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(value))
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("--limit %q: give a whole number of rows, 0 or more (0 shows the summary alone)", value)
	}
	return n, nil
}

// filtered reports whether f chooses the row of st.
func (f Filter) filtered() bool { return len(f.States) > 0 || f.Match != nil || f.Limit >= 0 }

// matches reports whether st's row passes f's states and glob.
func (f Filter) matches(st Item) bool {
	if f.Match != nil && !f.Match.MatchString(st.Item) {
		return false
	}
	if len(f.States) == 0 {
		return true
	}
	for _, want := range f.States {
		switch {
		case want == filterFailing && st.ConsecutiveFailures > 0,
			want == StatePaused && st.Pause != nil,
			want == st.State:
			return true
		}
	}
	return false
}

// errStop ends a pass over the list that has read all it needs.
var errStop = errors.New("enough rows")

// ParseFilter reads --state, --match and --limit as given ("" for one not
// given) into a Filter, with the one line a bad value gets.
func ParseFilter(states, match, limit string) (Filter, error) {
	f := All
	var err error
	if states != "" {
		if f.States, err = ParseStates(states); err != nil {
			return Filter{}, err
		}
	}
	if match != "" {
		f.Match = ParseMatch(match)
	}
	if limit != "" {
		if f.Limit, err = ParseLimit(limit); err != nil {
			return Filter{}, err
		}
	}
	return f, nil
}
