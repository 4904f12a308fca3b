package main

import (
	"context"
	"fmt"

	"github.com/w8y/w8y/internal/control"
)

// runRemove is w8yctl remove.
func runRemove(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	results, err := fleet.Remove(ctx, c.items, c.now)
	if err != nil {
		return err
	}
	return out.results(results, func(r control.Result) string {
		return fmt.Sprintf("removed %s (%s) and its cooldown, backoff, pause and state%s", quote(r.Item),
			plural(r.Changed, "occurrence"), running(r, "its run is left to finish"))
	})
}
