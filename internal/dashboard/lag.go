package dashboard

import (
	"context"
	"time"

	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// Lag is how far behind the fleet is, as the page shows it: status.Lag,
// read by status.Reader.Lag as --status reads it, and whether the due index
// it comes from is kept at all.
type Lag struct {
	// Known is false where the index is not kept: an item's keys are not
	// colocated (Redis Cluster without a hash tag), and workers pass over
	// the list instead.
	Known bool `json:"known"`
	// Due is how many items are due and not taken, NeverTried among them.
	Due int64 `json:"due"`
	// NeverTried is how many items no worker has tried yet (see
	// status.Lag).
	NeverTried int64 `json:"never_tried"`
	// OldestMs is how long the item due longest has waited, in
	// milliseconds; null when none is due, or when each due one was made
	// due "now" (run-now, resume), which the index keeps without a time.
	OldestMs *int64 `json:"oldest_ms"`
}

// readLag reads the lag with status's reader (see status.Reader.Lag), or
// none where the index is not kept.
func readLag(ctx context.Context, client status.Client, keys schema.Keys, now time.Time) (Lag, error) {
	if !keys.Colocated {
		return Lag{}, nil
	}
	lag, err := (&status.Reader{Client: client, Keys: keys}).Lag(ctx, now)
	if err != nil {
		return Lag{}, err
	}
	l := Lag{Known: true, Due: lag.Overdue, NeverTried: lag.NeverTried}
	if lag.MostOverdue != nil {
		l.OldestMs = &lag.MostOverdueMs
	}
	return l, nil
}
