package main

import (
	"context"
	"fmt"
	"time"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/settings"
)

// runSet is w8yctl set.
func runSet(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	results, err := fleet.Set(ctx, c.items, c.settings)
	if err != nil {
		return err
	}
	return out.settingsResults(results, func(r control.SettingsResult) string {
		return fmt.Sprintf("set %s %s%s", quote(r.Item), c.settings, waiting(r, c.settings))
	})
}

// settingsResults prints what set or unset did: with --json as an array,
// else each as line says.
func (p *printer) settingsResults(results []control.SettingsResult, line func(control.SettingsResult) string) error {
	if p.json {
		if results == nil {
			results = []control.SettingsResult{}
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

// waiting is what a line of set or unset adds for an item that a cooldown
// or backoff holds, where given (the settings changed; none: all of them)
// would change one: the change does not shorten it.
func waiting(r control.SettingsResult, given settings.Stored) string {
	if _, timeout := given[settings.Timeout]; timeout && len(given) == 1 {
		return ""
	}
	switch {
	case r.WaitMs < 0:
		return "; it waits until its cooldown or backoff key is deleted (w8yctl run-now ends the wait)"
	case r.WaitMs > 0:
		return fmt.Sprintf("; it waits out its current cooldown or backoff first (%s left; w8yctl run-now ends it)", duration.Format(time.Duration(r.WaitMs)*time.Millisecond))
	}
	return ""
}

// unsetNames shows the settings that unset was given, or "every setting".
func unsetNames(given settings.Stored) string {
	if len(given) == 0 {
		return "every setting"
	}
	var names string
	for _, f := range settings.Fields {
		if _, ok := given[f]; ok {
			if names != "" {
				names += " "
			}
			names += settings.Option(f)
		}
	}
	return names
}
