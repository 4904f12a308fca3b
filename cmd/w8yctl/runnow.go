package main

import (
	"context"
	"fmt"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/registry"
)

// runRunNow is w8yctl run-now. Its lines say what happens next, which
// depends on whether a worker lives to take the items: the registry of live
// workers says.
func runRunNow(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	results, err := fleet.RunNow(ctx, c.items)
	if err != nil {
		return err
	}
	live, err := registry.Live(ctx, fleet.Client, fleet.Keys)
	if err != nil {
		return err
	}
	return out.results(results, func(r control.Result) string {
		switch {
		case r.Holder != nil:
			return fmt.Sprintf("%s is running now (holder %s): it is not started twice", quote(r.Item), *r.Holder)
		case live == 0:
			return fmt.Sprintf("%s is due now, but no worker is live under %q: the next worker to start takes it (the next run of a cron job, say)", quote(r.Item), fleet.Keys.Prefix)
		}
		return fmt.Sprintf("%s is due now: an idle worker takes it within a second (%s live)", quote(r.Item), plural(live, "worker"))
	})
}
