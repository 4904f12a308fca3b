package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/proc"
)

// runAdd is w8yctl add: it appends the items that the list does not hold,
// after refusing, all at once, those that no worker could run.
func runAdd(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	if err := checkItems(c.items, childcmd.MaxItemLenAny(fleet.Keys.Lock(""), proc.ArgMax())); err != nil {
		return err
	}
	results, err := fleet.Add(ctx, c.items, c.opts.Create)
	if err != nil {
		return err
	}
	if out.json {
		return out.document(results)
	}
	var added int64
	for _, r := range results {
		added += r.Changed
	}
	fmt.Fprintf(out.w, "added %s to %q\n", plural(added, "item"), out.list)
	return out.results(results, func(r control.Result) string {
		if r.Changed == 0 {
			return fmt.Sprintf("%s is in the list already", quote(r.Item))
		}
		return fmt.Sprintf("added %s", quote(r.Item))
	})
}

// badItems are the items that a worker would skip, each with its reason:
// w8yctl says each on a line of its own.
type badItems []string

func (b badItems) Error() string { return strings.Join(b, "\n") }

// Lines gives each item its line in the message that explains the failure
// (see cli.PrintLine).
func (b badItems) Lines() []string { return b }

// checkItems refuses items that no child can be given (empty, holding a
// NUL byte, longer than maxLen), naming each.
func checkItems(list []string, maxLen int) error {
	var bad badItems
	for i, item := range list {
		if why := childcmd.ItemProblem(item, maxLen); why != "" {
			bad = append(bad, fmt.Sprintf("item %d, %s, cannot be added: %s", i+1, quote(item), why))
		}
	}
	if bad != nil {
		return bad
	}
	return nil
}
