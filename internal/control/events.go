package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// Event is one entry of the events stream <prefix>events: a run's start
// or end, or an operator's change of an item (see docs/operating.md, "The
// events stream").
type Event struct {
	// ID is the entry's ID, whose first part is the Redis server's time of
	// the entry in Unix milliseconds.
	ID string
	// Fields are the entry's fields, with type, item and holder first.
	Fields []Field
}

// Field is one field of an Event.
type Field struct{ Name, Value string }

// Time is when the entry was added, from its ID.
func (e Event) Time() time.Time {
	ms, _ := strconv.ParseInt(strings.SplitN(e.ID, "-", 2)[0], 10, 64)
	return time.UnixMilli(ms)
}

// numberFields are the fields of an event that hold whole numbers, which
// JSON shows as numbers, as --status --json does: a stream holds only
// strings.
var numberFields = map[string]bool{"exit_code": true, "duration_ms": true, "fence": true, schema.EventFieldForMs: true}

// MarshalJSON is the event as w8yctl's --json prints it: one object of its
// ID, its time and its fields, numbers as numbers.
func (e Event) MarshalJSON() ([]byte, error) {
	doc := map[string]any{"id": e.ID, "time": e.Time().UTC().Format(time.RFC3339Nano)}
	for _, f := range e.Fields {
		doc[f.Name] = f.Value
		if n := status.Number(f.Value); n != nil && numberFields[f.Name] {
			doc[f.Name] = *n
		}
	}
	return json.Marshal(doc)
}

// Get is the value of the field name, or "".
func (e Event) Get(name string) string {
	for _, f := range e.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// Number is the field name's whole number, decoded as the state hash's
// are (status.Number), or nil where it is missing or not a number.
func (e Event) Number(name string) *int64 {
	for _, f := range e.Fields {
		if f.Name == name {
			return status.Number(f.Value)
		}
	}
	return nil
}

// fieldOrder is the order in which an event's fields are shown; others
// follow, sorted.
var fieldOrder = []string{"type", "item", "holder", "result", "exit_code", "duration_ms"}

// newEvent is the Event of a stream entry; go-redis gives its fields as a
// map, so the order is w8y's own.
func newEvent(m redis.XMessage) Event {
	e := Event{ID: m.ID}
	names := make([]string, 0, len(m.Values))
	for name := range m.Values {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		ia, ib := slices.Index(fieldOrder, a), slices.Index(fieldOrder, b)
		switch {
		case ia >= 0 && ib >= 0:
			return ia - ib
		case ia >= 0:
			return -1
		case ib >= 0:
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, name := range names {
		e.Fields = append(e.Fields, Field{Name: name, Value: fmt.Sprint(m.Values[name])})
	}
	return e
}

// EventFilter says which events to read.
type EventFilter struct {
	// Item, if not "", keeps only the events of this item.
	Item string
	// Last is how many of the latest matching events Events returns; 0
	// for all of them since Since.
	Last int64
	// Since, if not "", is the stream ID of the oldest entry to return: a
	// Unix millisecond time alone stands for that time's first entry.
	Since string
	// Within, if not 0, is how many of the latest entries Events looks
	// at, without Since: what bounds the look for the events of an item
	// that has not run for long.
	Within int64
	// Runs keeps only the events of runs, their starts and ends, and
	// leaves out the operators' changes.
	Runs bool
}

// keeps reports whether filter keeps e (Since, Last and Within aside).
func (filter EventFilter) keeps(e Event) bool {
	if filter.Item != "" && e.Get("item") != filter.Item {
		return false
	}
	return !filter.Runs || schema.RunEvent(e.Get("type"))
}

// NoEventsOf refuses an item that the list does not hold and of which
// events found none (its latest events, as events --item read them): a
// mistyped name, most likely, which would otherwise show nothing. A
// removed item with events kept is no mistake: they show.
func (f *Fleet) NoEventsOf(ctx context.Context, item string) error {
	err := f.Client.LPos(ctx, f.Keys.List(), item, redis.LPosArgs{}).Err()
	switch {
	case errors.Is(err, redis.Nil):
		return refusal{msg: fmt.Sprintf("%s is not in the list %q, and the events stream holds none of its events", quote(item), f.Keys.List())}
	case err != nil:
		return redisconn.Wrap("read "+strconv.Quote(f.Keys.List()), err)
	}
	return nil
}

// eventsPage is how many entries one XREVRANGE reads while Events looks
// back for events of one item.
const eventsPage = 500

// Events returns the last filter.Last events that match filter, oldest
// first, and the ID of the newest entry in the stream (matching or not, "0"
// when there is none), from which Follow goes on without missing one. It
// refuses a prefix under which neither the list nor the stream exists: a
// mistyped prefix would otherwise show nothing, forever.
func (f *Fleet) Events(ctx context.Context, filter EventFilter) ([]Event, string, error) {
	stream := f.Keys.Events()
	n, err := f.Client.Exists(ctx, stream).Result()
	if err != nil {
		return nil, "", redisconn.Wrap("read "+strconv.Quote(stream), err)
	}
	if n == 0 {
		if kind, err := f.Client.Type(ctx, f.Keys.List()).Result(); err != nil || kind == "none" {
			if err != nil {
				return nil, "", redisconn.Wrap("read "+strconv.Quote(f.Keys.List()), err)
			}
			return nil, "", refusal{msg: fmt.Sprintf("neither the list %q nor the events stream %q exists: is --key-prefix (W8Y_KEY_PREFIX) right?", f.Keys.List(), stream), also: schema.ErrNoList}
		}
	}
	if filter.Since != "" {
		return f.eventsSince(ctx, filter)
	}
	var out []Event
	newest := "0"
	end := "+"
	var looked int64
	for int64(len(out)) < filter.Last && (filter.Within == 0 || looked < filter.Within) {
		page, err := f.Client.XRevRangeN(ctx, stream, end, "-", eventsPage).Result()
		if err != nil {
			return nil, "", redisconn.Wrap("read "+strconv.Quote(stream), err)
		}
		if len(page) == 0 {
			break
		}
		if end == "+" {
			newest = page[0].ID
		}
		for _, m := range page {
			if int64(len(out)) == filter.Last || (filter.Within > 0 && looked == filter.Within) {
				break
			}
			looked++
			if e := newEvent(m); filter.keeps(e) {
				out = append(out, e)
			}
		}
		if len(page) < eventsPage {
			break
		}
		end = "(" + page[len(page)-1].ID
	}
	slices.Reverse(out)
	return out, newest, nil
}

// eventsSince is Events from filter.Since on, read forward a page at a
// time.
func (f *Fleet) eventsSince(ctx context.Context, filter EventFilter) ([]Event, string, error) {
	stream := f.Keys.Events()
	var out []Event
	newest := "0"
	start := filter.Since
	for {
		page, err := f.Client.XRangeN(ctx, stream, start, "+", eventsPage).Result()
		if err != nil {
			return nil, "", redisconn.Wrap("read "+strconv.Quote(stream), err)
		}
		for _, m := range page {
			newest = m.ID
			if e := newEvent(m); filter.keeps(e) {
				out = append(out, e)
			}
		}
		if len(page) < eventsPage {
			break
		}
		start = "(" + newest
	}
	if filter.Last > 0 && int64(len(out)) > filter.Last {
		out = out[int64(len(out))-filter.Last:]
	}
	// Follow goes on after the newest entry in the stream, which is the
	// last read unless the stream was empty since Since.
	if newest == "0" {
		last, err := f.Client.XRevRangeN(ctx, stream, "+", "-", 1).Result()
		if err != nil {
			return nil, "", redisconn.Wrap("read "+strconv.Quote(stream), err)
		}
		if len(last) > 0 {
			newest = last[0].ID
		}
	}
	return out, newest, nil
}

// followBlock is how long one XREAD of Follow blocks: the longest that Follow
// takes to notice that ctx is done.
const followBlock = 500 * time.Millisecond

// Follow calls each with every event added to the stream after the entry
// after, that matches filter's Item, as it is added, until ctx is done
// (which returns nil) or each or Redis fails.
func (f *Fleet) Follow(ctx context.Context, after string, item string, each func(Event) error) error {
	stream := f.Keys.Events()
	for ctx.Err() == nil {
		got, err := f.Client.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, after}, Count: 100, Block: followBlock}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return redisconn.Wrap("follow "+strconv.Quote(stream), err)
		}
		for _, s := range got {
			for _, m := range s.Messages {
				after = m.ID
				e := newEvent(m)
				if item != "" && e.Get("item") != item {
					continue
				}
				if err := each(e); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
