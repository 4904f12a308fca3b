package main

import (
	"context"
	"fmt"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/duration"
)

// runPause is w8yctl pause.
func runPause(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	results, err := fleet.PauseItems(ctx, c.items, control.Pause{Reason: c.opts.Reason, For: c.pauseFor}, c.now)
	if err != nil {
		return err
	}
	until := "until resumed"
	if c.pauseFor > 0 {
		until = "for " + duration.Format(c.pauseFor)
	}
	if c.opts.Reason != "" {
		until += fmt.Sprintf(" (%s)", c.opts.Reason)
	}
	return out.results(results, func(r control.Result) string {
		return fmt.Sprintf("paused %s %s%s", quote(r.Item), until, running(r, "it finishes this run"))
	})
}

// runResume is w8yctl resume.
func runResume(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	results, err := fleet.Resume(ctx, c.items)
	if err != nil {
		return err
	}
	return out.results(results, func(r control.Result) string {
		if r.Changed == 0 {
			return fmt.Sprintf("%s was not paused", quote(r.Item))
		}
		return fmt.Sprintf("resumed %s", quote(r.Item))
	})
}
