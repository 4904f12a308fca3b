package main

import (
	"context"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/status"
)

// runStatus is w8yctl status: w8y --status, once or every --watch interval
// until SIGINT or SIGTERM (ctx).
func runStatus(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	reader := &status.Reader{Client: fleet.Client, Keys: fleet.Keys}
	return status.Show(ctx, reader, out.json, c.watch, out.w, out.log)
}
