package control

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// Detail is everything w8yctl status ITEM shows of one item: what w8y
// --status shows (status.Item), and what its table has no room for. The
// JSON names are part of w8yctl's interface (see docs/operating.md).
type Detail struct {
	status.Item
	// Occurrences is how many times the list holds the item: 0 for one
	// that it does not hold.
	Occurrences int64 `json:"occurrences"`
	// PausedAt is when the pause was set, in Unix milliseconds.
	PausedAt *int64 `json:"paused_at"`
	// LastFence is the fencing token of the item's last run.
	LastFence *int64 `json:"last_fence"`
	// LastReason is the reason that the cancel of the last run gave, if an
	// operator cancelled it.
	LastReason *string `json:"last_reason"`
	// LastStdout and LastStderr are the kept tails of the last run's
	// output, where w8y ran it with --keep-output.
	LastStdout *string `json:"last_stdout"`
	LastStderr *string `json:"last_stderr"`
	// Recent are the item's latest events, oldest first.
	Recent []Event `json:"recent_events"`
}

// DetailRuns is how many of an item's latest events Detail returns: the
// starts and ends of its last three runs, fewer where operators changed it
// since (their changes are events too).
const DetailRuns = 6

// DetailLookBack bounds how many of the stream's latest entries Detail
// looks through for an item's events (a few pages of XREVRANGE): an item
// that has not run for long shows none rather than costing a read of the
// whole stream.
const DetailLookBack = 10 * eventsPage

// Detail reads what there is to know of each item, in two pipelines and a
// bounded look at the events. An item that the list does not hold is
// shown too (its keys may outlive it); a list that is missing or of
// another type is refused.
func (f *Fleet) Detail(ctx context.Context, list []string) ([]Detail, error) {
	if err := f.checkList(ctx, nil); err != nil {
		return nil, err
	}
	reader := &status.Reader{Client: f.Client, Keys: f.Keys}
	known, err := reader.Items(ctx, list)
	if err != nil {
		return nil, err
	}
	pipe := f.Client.Pipeline()
	at := make([]*redis.IntSliceCmd, len(list))
	pausedAt := make([]*redis.SliceCmd, len(list))
	state := make([]*redis.SliceCmd, len(list))
	for i, item := range list {
		at[i] = pipe.LPosCount(ctx, f.Keys.List(), item, 0, redis.LPosArgs{})
		pausedAt[i] = pipe.HMGet(ctx, f.Keys.Pause(item), schema.PauseFieldAt)
		state[i] = pipe.HMGet(ctx, f.Keys.State(item), schema.FieldLastFence, schema.FieldLastStdout, schema.FieldLastStderr, schema.FieldLastReason)
	}
	// A pause or state key of another type spoils only its own fields.
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !redisconn.IsReply(err) {
		return nil, redisconn.Wrap("read the items' keys", err)
	}
	out := make([]Detail, len(list))
	for i, item := range list {
		d := Detail{Item: known[i]}
		if positions, err := at[i].Result(); err == nil {
			d.Occurrences = int64(len(positions))
		}
		if values, err := pausedAt[i].Result(); err == nil && d.Pause != nil {
			d.PausedAt = status.Number(values[0])
		}
		if values, err := state[i].Result(); err == nil {
			d.LastFence = status.Number(values[0])
			d.LastStdout, d.LastStderr, d.LastReason = status.Text(values[1]), status.Text(values[2]), status.Text(values[3])
		}
		recent, _, err := f.Events(ctx, EventFilter{Item: item, Last: DetailRuns, Within: DetailLookBack})
		if err != nil && !errors.Is(err, ErrRefused) {
			return nil, err
		}
		d.Recent = recent
		out[i] = d
	}
	return out, nil
}

// unknown reports whether nothing is known of d's item: the list does not
// hold it, no key of it (lock, cooldown, backoff, pause, state) is kept, and
// none of its latest events is. A removed item whose keys or events are
// kept is known: its detail shows what is left of it.
func (d Detail) unknown() bool {
	return d.Occurrences == 0 && d.State == status.StateIdle && d.LastStart == nil && d.LastEnd == nil &&
		d.Runs == 0 && len(d.Recent) == 0
}

// Unknown refuses the items of details that nothing is known of (see
// Detail.unknown), most likely mistyped names, with one line that names
// them; nil when every item is known.
func (f *Fleet) Unknown(details []Detail) error {
	var names []string
	for _, d := range details {
		if d.unknown() {
			names = append(names, quote(d.Item.Item))
		}
	}
	switch len(names) {
	case 0:
		return nil
	case 1:
		return refusal{msg: fmt.Sprintf("%s is not in the list %q, and nothing of it is kept (no key, no event)", names[0], f.Keys.List())}
	}
	return refusal{msg: fmt.Sprintf("%s are not in the list %q, and nothing of them is kept (no key, no event)", strings.Join(names, ", "), f.Keys.List())}
}
