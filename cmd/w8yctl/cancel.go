package main

import (
	"context"
	"fmt"

	"github.com/w8y/w8y/internal/control"
)

// runCancel is w8yctl cancel.
func runCancel(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	results, err := fleet.CancelRuns(ctx, c.items, c.opts.Reason, c.opts.AsFailure)
	if err != nil {
		return err
	}
	return out.results(results, func(r control.Result) string {
		if r.Holder == nil {
			return fmt.Sprintf("%s is not running: nothing to cancel", quote(r.Item))
		}
		return fmt.Sprintf("asked %s to stop %s: its child stops at the holder's next lock refresh", *r.Holder, quote(r.Item))
	})
}
