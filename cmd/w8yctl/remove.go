package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/w8y/w8y/internal/control"
)

// runRemove is w8yctl remove.
func runRemove(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	results, err := fleet.Remove(ctx, c.items)
	if err != nil {
		return err
	}
	then := "its run is left to finish"
	if c.opts.Cancel {
		then = "its run is cancelled"
		for _, r := range results {
			if r.Holder == nil {
				continue
			}
			// The run may have ended in between: then there is nothing
			// left to cancel.
			if _, err := control.CancelBy(ctx, fleet.Client, fleet.Keys, r.Item, "removed", c.by, false); err != nil && !errors.Is(err, control.ErrNotRunning) {
				return err
			}
		}
	}
	return out.results(results, func(r control.Result) string {
		return fmt.Sprintf("removed %s (%s) and its cooldown, backoff, pause, state and settings%s", quote(r.Item),
			plural(r.Changed, "occurrence"), running(r, then))
	})
}
