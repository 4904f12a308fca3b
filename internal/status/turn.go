package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// turn is what one turn of --status read: what --json prints.
type turn struct {
	List string `json:"list"`
	// Summary counts the whole list; under --watch it may be one read
	// SummaryAgeMs earlier (see summaryEvery).
	Summary      *Summary `json:"summary"`
	SummaryAgeMs int64    `json:"summary_age_ms"`
	LiveWorkers  int64    `json:"live_workers"`
	// FleetMax is the places of --fleet-max-running, or null without a
	// cap.
	FleetMax *Places `json:"fleet_max_running"`
	// FleetRate is the rate of --fleet-rate and the starts in its window,
	// or null without a rate.
	FleetRate *Rate `json:"fleet_rate"`
	Lag       Lag   `json:"lag"`
	// Matching is how many items pass the filter's states and glob, when
	// the whole list was read; null when the rows were read only up to
	// --limit.
	Matching *int64 `json:"matching"`
	Items    []Item `json:"-"`
}

// turn reads one turn at now: the rows that f chooses, the lag and the live
// workers, and the summary of the whole list: counted from the indexes
// without reading the list where they are kept (see Count), else, when
// whole or when the rows need the whole list anyway, counted in the pass
// over it. The pass stops once f's limit of rows is read unless it must
// count the summary; a pass that reads the whole list counts the summary
// itself, and records what only it counts (see RecordWhole).
func (s *Reader) turn(ctx context.Context, f Filter, whole bool, now time.Time) (turn, error) {
	t := turn{List: s.Keys.List(), Items: []Item{}}
	counted, err := s.Count(ctx, false)
	if err != nil {
		return turn{}, err
	}
	if counted != nil {
		t.Summary, whole = &counted.Summary, false
	}
	if counted == nil || f.Limit != 0 {
		var sum Summary
		var matching int64
		entries, err := s.ReadCounting(ctx, func(batch []Item) error {
			for _, st := range batch {
				sum.add(st)
				if !f.matches(st) {
					continue
				}
				matching++
				if f.Limit < 0 || len(t.Items) < f.Limit {
					t.Items = append(t.Items, st)
				}
			}
			if !whole && f.Limit >= 0 && len(t.Items) >= f.Limit {
				return errStop
			}
			return nil
		})
		switch {
		case errors.Is(err, errStop):
		case err != nil:
			return turn{}, err
		default:
			sum.Items, sum.Duplicates = entries, entries-sum.Items
			t.Summary, t.Matching = &sum, &matching
			s.RecordWhole(ctx, &sum, now.UnixMilli())
		}
	}
	if t.Lag, err = s.Lag(ctx, now); err != nil {
		return turn{}, err
	}
	if t.LiveWorkers, err = s.LiveWorkers(ctx); err != nil {
		return turn{}, err
	}
	if t.FleetMax, err = s.Places(ctx); err != nil {
		return turn{}, err
	}
	if t.FleetRate, err = s.Rate(ctx); err != nil {
		return turn{}, err
	}
	return t, nil
}

// write writes t as --status shows it on a terminal or in a file: the
// summary's two lines, a blank line, the table of rows (width as
// writeTable's), and a line that says how many rows the filter left out.
func (t turn) write(w io.Writer, f Filter, now time.Time, width int) {
	writeSummary(w, t, width)
	fmt.Fprintln(w)
	if len(t.Items) > 0 {
		writeTable(w, t.Items, now, width)
	}
	if !f.filtered() || f.Limit == 0 {
		// --limit 0 asks for the summary alone.
		return
	}
	switch {
	case t.Matching == nil:
		fmt.Fprintf(w, "%d rows shown (--limit %d)\n", len(t.Items), f.Limit)
	case int64(len(t.Items)) < *t.Matching:
		fmt.Fprintf(w, "%d of %d matching rows shown (--limit %d)\n", len(t.Items), *t.Matching, f.Limit)
	default:
		fmt.Fprintf(w, "%d matching rows\n", *t.Matching)
	}
}

// writeSummary writes the summary's three lines, such as
//
//	work:list: 100000 items, 2 of them duplicates (w8yctl check)
//	running 3  paused 1  cooling 120  backoff 2  idle 99874  failing 5
//	live workers 4  overdue 12 (2 never tried), the most by 3m2s (report-42)
//
// with "2 of 3 in use (--fleet-max-running)" after the live workers under
// a cap, and a fourth line under a rate,
//
//	rate: 5 of 5 in the last 2s, next start in 400ms (--fleet-rate 5/2s)
//
// each clipped to width terminal columns when width > 0.
func writeSummary(w io.Writer, t turn, width int) {
	s := t.Summary
	head := fmt.Sprintf("%s: %d items", t.List, s.Items)
	switch {
	case s.Duplicates == 1:
		head += ", 1 of them a duplicate (w8yctl check)"
	case s.Duplicates > 1:
		head += fmt.Sprintf(", %d of them duplicates (w8yctl check)", s.Duplicates)
	}
	if t.SummaryAgeMs > 0 {
		head += fmt.Sprintf(" (counted %s ago)", short(time.Duration(t.SummaryAgeMs)*time.Millisecond))
	}
	counts := fmt.Sprintf("running %d  paused %d  cooling %d  backoff %d  idle %d  failing %d",
		s.Running, s.Paused, s.Cooling, s.BackingOff, s.Idle, s.Failing)
	if s.Blocked > 0 {
		counts += fmt.Sprintf("  blocked %d", s.Blocked)
	}
	if s.Invalid > 0 {
		counts += fmt.Sprintf("  invalid %d", s.Invalid)
	}
	behind := fmt.Sprintf("live workers %d  overdue %d", t.LiveWorkers, t.Lag.Overdue)
	if p := t.FleetMax; p != nil {
		behind = fmt.Sprintf("live workers %d  %d of %d in use (--fleet-max-running)  overdue %d", t.LiveWorkers, p.InUse, p.Limit, t.Lag.Overdue)
	}
	if t.Lag.NeverTried > 0 {
		behind += fmt.Sprintf(" (%d never tried)", t.Lag.NeverTried)
	}
	if t.Lag.MostOverdue != nil {
		behind += fmt.Sprintf(", the most by %s (%s)", short(time.Duration(t.Lag.MostOverdueMs)*time.Millisecond), cell(*t.Lag.MostOverdue))
	}
	lines := []string{head, counts, behind}
	if t.FleetRate != nil {
		lines = append(lines, t.FleetRate.Line())
	}
	for _, line := range lines {
		if width > 0 {
			line = clipCell(line, width)
		}
		fmt.Fprintln(w, line)
	}
}
