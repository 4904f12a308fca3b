package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/w8y/w8y/internal/control"
)

// runEvents is w8yctl events: the latest events, then with --follow each
// new one until SIGINT or SIGTERM (ctx), which ends it with 0.
func runEvents(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	latest, newest, err := fleet.Events(ctx, control.EventFilter{Item: c.opts.Item, Last: c.count, Since: c.since})
	if err != nil {
		return err
	}
	if c.opts.Item != "" && len(latest) == 0 {
		// An item that nothing is known of is a mistake; --follow says so
		// once and waits, since the item may yet be added.
		if err := fleet.NoEventsOf(ctx, c.opts.Item); err != nil {
			if !c.opts.Follow {
				return err
			}
			out.log.Warn().Msg(err.Error())
		}
	}
	for _, e := range latest {
		if err := out.event(e); err != nil {
			return err
		}
	}
	if !c.opts.Follow {
		return nil
	}
	return fleet.Follow(ctx, newest, c.opts.Item, out.event)
}

// event prints one event: a line of its time, type, item and other fields,
// or with --json one object of its ID, time and fields.
func (p *printer) event(e control.Event) error {
	if p.json {
		return p.document(e)
	}
	_, err := fmt.Fprintln(p.w, eventLine(e))
	return err
}

// eventLine is an event as a line: its time, type, item and other fields.
func eventLine(e control.Event) string {
	line := []string{e.Time().UTC().Format(timeLayout), e.Get("type"), quote(e.Get("item"))}
	for _, f := range e.Fields {
		if f.Name != "type" && f.Name != "item" {
			line = append(line, f.Name+"="+shown(f.Value))
		}
	}
	return strings.Join(line, " ")
}

// timeLayout is how w8yctl's lines show a time: UTC, to the millisecond.
const timeLayout = "2006-01-02T15:04:05.000Z"

// shown is a field's value as a line shows it: quoted only when it would
// not read as one word.
func shown(value string) string {
	if value == "" || strings.ContainsAny(value, " \t\"\\") || strconv.Quote(value) != `"`+value+`"` {
		return strconv.Quote(value)
	}
	return value
}
