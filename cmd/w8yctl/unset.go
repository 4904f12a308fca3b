package main

import (
	"context"
	"fmt"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/settings"
)

// runUnset is w8yctl unset.
func runUnset(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	var fields []string
	for _, f := range settings.Fields {
		if _, ok := c.settings[f]; ok {
			fields = append(fields, f)
		}
	}
	results, err := fleet.Unset(ctx, c.items, fields)
	if err != nil {
		return err
	}
	return out.settingsResults(results, func(r control.SettingsResult) string {
		if r.Changed == 0 {
			return fmt.Sprintf("%s had no %s of its own", quote(r.Item), unsetNames(c.settings))
		}
		return fmt.Sprintf("unset %s %s: the workers' own options stand%s", quote(r.Item), unsetNames(c.settings), waiting(r, c.settings))
	})
}
