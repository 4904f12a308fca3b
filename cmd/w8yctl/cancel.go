package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/w8y/w8y/internal/control"
)

// cancelled is what w8yctl cancel did to one item.
type cancelled struct {
	Item string `json:"item"`
	// Holder is the token of the run asked to stop; nil when no run held
	// the item's lock and nothing was changed.
	Holder *string `json:"holder"`
}

// runCancel is w8yctl cancel.
func runCancel(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	var done []cancelled
	for _, item := range c.items {
		req, err := control.Cancel(ctx, fleet.Client, fleet.Keys, item, c.opts.Reason, c.opts.AsFailure)
		switch {
		case errors.Is(err, control.ErrNotRunning):
			done = append(done, cancelled{Item: item})
		case err != nil:
			return err
		default:
			done = append(done, cancelled{Item: item, Holder: &req.Holder})
		}
	}
	if out.json {
		if done == nil {
			done = []cancelled{}
		}
		return out.document(done)
	}
	for _, d := range done {
		line := fmt.Sprintf("%s is not running: nothing to cancel", quote(d.Item))
		if d.Holder != nil {
			line = fmt.Sprintf("asked %s to stop %s: its child stops at the holder's next lock refresh", *d.Holder, quote(d.Item))
		}
		if _, err := fmt.Fprintln(out.w, line); err != nil {
			return err
		}
	}
	return nil
}
