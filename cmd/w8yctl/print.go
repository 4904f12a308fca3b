package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/control"
)

// printer prints what a verb did: lines for a person, or with --json one
// JSON document (for events, one object a line).
type printer struct {
	w    io.Writer
	json bool
	// list is the list's key, which the lines name.
	list string
	// log tells of what goes wrong while status --watch goes on.
	log zerolog.Logger
}

// results prints the verb's results: with --json as an array, else each
// as line says.
func (p *printer) results(results []control.Result, line func(control.Result) string) error {
	if p.json {
		if results == nil {
			results = []control.Result{}
		}
		return p.document(results)
	}
	for _, r := range results {
		if _, err := fmt.Fprintln(p.w, line(r)); err != nil {
			return err
		}
	}
	return nil
}

// document prints v as one JSON document.
func (p *printer) document(v any) error {
	return json.NewEncoder(p.w).Encode(v)
}

// running is what a line adds for an item whose lock a run holds.
func running(r control.Result, then string) string {
	if r.Holder == nil {
		return ""
	}
	return fmt.Sprintf("; it is running now (holder %s): %s", *r.Holder, then)
}

// plural is n and noun, with an s unless n is 1.
func plural(n int64, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// quote quotes an item for a line of output, so that odd bytes stay
// visible, and clips a long one (see clip.Item).
func quote(item string) string { return strconv.Quote(clip.Item(item)) }
