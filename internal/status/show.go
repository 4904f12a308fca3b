package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
	"github.com/mattn/go-runewidth"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/redisconn"
	"golang.org/x/sys/unix"
)

// View is how --status shows the list: as JSON or a table, once or every
// Watch interval, and which rows (the summary counts every item).
type View struct {
	JSON   bool
	Watch  time.Duration
	Filter Filter
}

// summaryEvery is how often --watch reads the whole list again for the
// summary when the rows it shows need less (--limit): a pass over 100,000
// items costs Redis about a second of small commands, which a refresh every
// 2 seconds should not pay each time. The lag and the live workers, which
// cost a round trip whatever the list's length, are read every turn.
const summaryEvery = 15 * time.Second

// Show is w8y --status and w8yctl status: a summary of the whole list that
// reader reads (see Summary, Lag, LiveWorkers), then the rows that
// view.Filter chooses, in list order, as a table or as JSON, written to
// stdout once, or every view.Watch interval (when not 0) until ctx is done.
// A watch that fails to read goes on to the next turn unless Redis refuses
// (ErrRefused), logging the error. A list that does not exist ends a
// single turn with schema.ErrNoList; a watch shows that it does not, and
// goes on until it does. On a terminal, each turn clears the
// screen first and the table is clipped to the terminal's width; elsewhere
// (a pipe, a file) every byte is shown, and each turn of the table starts
// with a line that says when it was read, after a blank line, so that the
// turns stay apart.
func Show(ctx context.Context, reader *Reader, view View, stdout io.Writer, log zerolog.Logger) error {
	sc := &screen{reader: reader, view: view, terminal: isTerminal(stdout)}
	if sc.terminal {
		sc.width = terminalWidth(stdout)
	}
	if view.Watch == 0 {
		return wrote(sc.show(ctx, stdout, log))
	}
	ticker := time.NewTicker(view.Watch)
	defer ticker.Stop()
	for {
		err := sc.show(ctx, stdout, log)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, redisconn.ErrRefused), errors.As(err, new(errWrite)):
			return wrote(err)
		case err != nil:
			// Redis may come back: say so, and try again next time.
			log.Error().Err(err).Msg("could not read the status; retrying")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// screen is what Show writes, turn after turn under --watch: the summary of
// the whole list is read again only every summaryEvery, and shown with its
// age in between.
type screen struct {
	reader   *Reader
	view     View
	terminal bool
	width    int
	turns    int
	// summary is the last summary read, at summaryAt.
	summary   *Summary
	summaryAt time.Time
}

// show reads one turn and writes it to stdout.
func (sc *screen) show(ctx context.Context, stdout io.Writer, log zerolog.Logger) error {
	watch, view, reader := sc.view.Watch, sc.view, sc.reader
	var buf bytes.Buffer
	if sc.terminal && watch > 0 {
		// Home and clear, written with the new screen at once so that
		// it does not flicker.
		buf.WriteString("\x1b[H\x1b[2J")
	}
	now := time.Now()
	if watch > 0 && !view.JSON {
		if !sc.terminal && sc.turns > 0 {
			buf.WriteString("\n")
		}
		fmt.Fprintf(&buf, "%s at %s (every %s)\n", reader.Keys.List(), now.Format("2006-01-02 15:04:05 MST"), watch)
	}
	sc.turns++
	whole := sc.summary == nil || watch == 0 || now.Sub(sc.summaryAt) >= summaryEvery
	t, err := reader.turn(ctx, view.Filter, whole, now)
	if err != nil {
		return err
	}
	if t.Summary != nil {
		sc.summary, sc.summaryAt = t.Summary, now
	} else {
		t.Summary, t.SummaryAgeMs = sc.summary, now.Sub(sc.summaryAt).Milliseconds()
	}
	missing := reader.Keys.NoList()
	empty := t.Summary != nil && t.Summary.Items == 0
	switch {
	case empty && watch == 0:
		// A mistake (a mistyped prefix) ends non-zero, with nothing on
		// stdout to be taken for an empty list.
		return missing
	case view.JSON:
		if empty {
			log.Warn().Msg(missing.Error())
		}
		err = writeJSON(&buf, t)
	case empty:
		fmt.Fprintln(&buf, missing)
	default:
		t.write(&buf, view.Filter, now, sc.width)
	}
	if err != nil {
		return err
	}
	if _, err := stdout.Write(buf.Bytes()); err != nil {
		return errWrite{err}
	}
	return nil
}

// errWrite is a failure to write the status to stdout, which no retry
// mends.
type errWrite struct{ err error }

func (e errWrite) Error() string { return "write the status: " + e.err.Error() }
func (e errWrite) Unwrap() error { return e.err }

// wrote is how Show ends after err: a reader that has gone (w8y --status |
// head -1) wants no more, which is no failure.
func wrote(err error) error {
	if errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// terminalWidth is the width of the terminal w, or 80 columns when it
// cannot be read.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if size, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && size.Col > 0 {
			return int(size.Col)
		}
	}
	return 80
}

// writeJSON writes one JSON document: an object with the summary, the
// lag and the live workers, and "items", an array with an item per line.
func writeJSON(w io.Writer, t turn) error {
	head, err := json.Marshal(t)
	if err != nil {
		return err
	}
	w.Write(head[:len(head)-1])
	io.WriteString(w, `,"items":[`)
	for i, st := range t.Items {
		line, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if i > 0 {
			io.WriteString(w, ",")
		}
		io.WriteString(w, "\n")
		w.Write(line)
	}
	io.WriteString(w, "\n]}\n")
	return nil
}

// columns head the table. Each row fits an 80-column terminal for items
// and hosts of about ten characters; --json has every field, among them
// the last run's start and exit code and the counts of runs and failures,
// which the table leaves out for room.
var columns = []string{"ITEM", "STATE", "HOLDER", "LAST", "ENDED", "TOOK", "STREAK"}

// Columns that give up room, in this order, when a row is wider than the
// terminal, and the least each keeps.
const (
	itemColumn   = 0
	holderColumn = 2
	minClipped   = 8
)

// writeTable writes a table, a line per item, its columns apart by two
// spaces and sized by display width; now is the time that ages are
// measured from. With width > 0, the ITEM and HOLDER cells are clipped so
// that each line fits width columns; with 0 (a pipe), every cell is whole.
// Items that can never run as things are (blocked, invalid) are explained
// below the table, and paused items' pauses told of: who paused them, and
// why.
func writeTable(w io.Writer, items []Item, now time.Time, width int) {
	rows := [][]string{columns}
	var notes []string
	for _, st := range items {
		rows = append(rows, st.row(now))
		if st.Problem != nil {
			notes = append(notes, fmt.Sprintf("%s is %s: %s", clipCell(cell(st.Item), maxCell), st.State, *st.Problem))
		}
		if st.State == StatePaused {
			notes = append(notes, st.pauseNote())
		}
	}
	widths := make([]int, len(columns))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], runewidth.StringWidth(c))
		}
	}
	if width > 0 {
		fit(widths, width)
	} else {
		// Every byte, but no padding of every line to the longest item:
		// a longer cell pushes only its own row's next columns over.
		widths[itemColumn] = min(widths[itemColumn], maxPadded)
		widths[holderColumn] = min(widths[holderColumn], maxPadded)
	}
	for _, row := range rows {
		var line strings.Builder
		for i, c := range row {
			switch {
			case width > 0:
				c = clipCell(c, widths[i])
			case i == itemColumn || i == holderColumn:
				c = clipCell(c, maxCell)
			}
			line.WriteString(c)
			if i < len(row)-1 {
				line.WriteString(strings.Repeat(" ", max(0, widths[i]-runewidth.StringWidth(c))+2))
			}
		}
		fmt.Fprintln(w, line.String())
	}
	for _, note := range notes {
		fmt.Fprintln(w, note)
	}
}

// fit narrows the ITEM and HOLDER columns of widths, the widest first, so
// that a line fits width columns, keeping at least minClipped of each.
func fit(widths []int, width int) {
	total := 2 * (len(widths) - 1)
	for _, w := range widths {
		total += w
	}
	for total > width {
		col := itemColumn
		if widths[holderColumn] > widths[itemColumn] {
			col = holderColumn
		}
		if widths[col] <= minClipped {
			return
		}
		widths[col]--
		total--
	}
}

// maxPadded is the widest that the ITEM and HOLDER columns are padded to
// in a pipe or a file: wide enough for the items of most lists, and a long
// item does not pad every line.
const maxPadded = 40

// maxCell is the widest that an ITEM or HOLDER cell, and an item in the
// notes under the table, is shown in a pipe or a file, cut with "…" past
// it: a row of a table is a line to read, and a 5 KB item made one 5 KB
// long. --json, and w8yctl status ITEM, give items whole.
const maxCell = 100

// clipCell shortens c to width terminal columns, marking the cut with "…".
// Widths are display widths: a CJK character or an emoji takes two
// columns, a combining mark none (go-runewidth's tables, kept up with
// Unicode, are what terminals follow).
func clipCell(c string, width int) string {
	if runewidth.StringWidth(c) <= width {
		return c
	}
	return runewidth.Truncate(c, width, "…")
}

// row is st's line in the table.
func (st Item) row(now time.Time) []string {
	state := st.State
	switch st.State {
	case StateLocked:
		state += " " + millisLeft(st.LockTTL)
	case StatePaused:
		state += " " + millisLeft(st.Pause)
	case StateBackoff:
		state += " " + millisLeft(st.Backoff)
	case StateCooldown:
		if st.NextSlot != nil {
			state = "slot " + slotTime(*st.NextSlot, now)
		} else {
			state += " " + millisLeft(st.Cooldown)
		}
	}
	holder := none
	if st.State == StateLocked {
		holder = holderName(text(st.Holder))
	}
	return []string{
		cell(st.Item), state, holder, last(st.LastResult, st.LastExitCode), ago(st.LastEnd, now),
		took(st.LastDuration), strconv.FormatInt(st.ConsecutiveFailures, 10),
	}
}

// pauseNote is the line under the table that tells of st's pause.
func (st Item) pauseNote() string {
	note := clipCell(cell(st.Item), maxCell) + " is paused"
	if st.PausedBy != nil {
		note += " by " + *st.PausedBy
	}
	if st.PauseReason != nil && *st.PauseReason != "" {
		note += ": " + *st.PauseReason
	}
	return note
}

// holderName shows a lock token, host:pid:random, as host:pid: the
// process that holds the lock. The random part only tells runs of one
// process apart; --json shows it.
func holderName(token string) string {
	i := strings.LastIndexByte(token, ':')
	if i < 0 || strings.Count(token, ":") < 2 {
		return token
	}
	return token[:i]
}

// last shows the last run's result, with the child's exit code where it
// tells more than the result does: after a failure, and after a success
// with another code than 0 (--exit-codes).
func last(result *string, code *int64) string {
	switch {
	case result == nil:
		return none
	case code != nil && (*result == "failure" || *result == "success" && *code != 0):
		return cell(*result) + " " + strconv.FormatInt(*code, 10)
	}
	return cell(*result)
}

// none fills a cell that has nothing to show.
const none = "-"

// cell shows an item as it is, or quoted when it holds spaces, control
// characters or invalid UTF-8, which would break the table's columns.
func cell(item string) string {
	if item == "" || strings.IndexFunc(item, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 || !utf8.ValidString(item) {
		return strconv.Quote(item)
	}
	return item
}

func text(s *string) string {
	if s == nil {
		return none
	}
	return cell(*s)
}

// millisLeft shows a PTTL: "-" for no key, "forever" for no expiry.
func millisLeft(ms *int64) string {
	switch {
	case ms == nil:
		return none
	case *ms < 0:
		return "forever"
	}
	return short(time.Duration(*ms) * time.Millisecond)
}

// ago shows a Unix-milliseconds time as its age at now, to the second
// below a minute and to the minute above: an age need not be exact.
func ago(ms *int64, now time.Time) string {
	if ms == nil {
		return none
	}
	d := now.Sub(time.UnixMilli(*ms))
	switch {
	case d < 0:
		d = 0
	case d < time.Minute:
		d = d.Truncate(time.Second)
	default:
		// "41m0s" and "3h2m": Go writes no zero seconds from an hour on.
		return strings.TrimSuffix(short(d.Truncate(time.Minute)), "0s") + " ago"
	}
	return d.String() + " ago"
}

// slotTime shows an item's next slot, Unix milliseconds, in UTC, in the
// room of a cooldown's cell ("cooldown 20h43m"): as ls -l shows times,
// the clock time alone while it comes within a day of now, when it can
// only be the next one, to the second, since a --jitter offset falls on
// any ("02:13:27Z"); further off (a weekly schedule), its date alone
// ("2026-11-29"). w8yctl status ITEM and --json give it whole.
func slotTime(ms int64, now time.Time) string {
	slot := time.UnixMilli(ms).UTC()
	if slot.Sub(now) < 24*time.Hour {
		return slot.Format("15:04:05Z")
	}
	return slot.Format(time.DateOnly)
}

func took(ms *int64) string {
	if ms == nil {
		return none
	}
	return short(time.Duration(*ms) * time.Millisecond)
}

// short rounds d for a person, to two units at most: tenths of a second
// below a minute, then seconds, then minutes from an hour on, which Go's
// duration syntax reads back ("52.5s", "41m2s", "3h2m"). Clocks of
// different hosts may disagree a little, so a time just in the future
// shows as 0s.
func short(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}
