package main

import (
	"context"
	"fmt"

	"github.com/w8y/w8y/internal/control"
)

// runRunNow is w8yctl run-now.
func runRunNow(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	results, err := fleet.RunNow(ctx, c.items, c.now)
	if err != nil {
		return err
	}
	return out.results(results, func(r control.Result) string {
		if r.Holder != nil {
			return fmt.Sprintf("%s is running now (holder %s): it is not started twice", quote(r.Item), *r.Holder)
		}
		return fmt.Sprintf("%s is due now: an idle worker takes it within a second", quote(r.Item))
	})
}
