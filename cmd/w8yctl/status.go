package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/settings"
	"github.com/w8y/w8y/internal/status"
)

// runStatus is w8yctl status: w8y --status, once or every --watch interval
// until SIGINT or SIGTERM (ctx); with ITEMs, each one's detail.
func runStatus(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	if len(c.items) > 0 {
		return showDetails(ctx, c, fleet, out)
	}
	reader := &status.Reader{Client: fleet.Client, Keys: fleet.Keys}
	return status.Show(ctx, reader, status.View{JSON: out.json, Watch: c.watch, Filter: c.filter}, out.w, out.log)
}

// showDetails is w8yctl status ITEM...: a block of lines for each item, or
// with --json one array of objects. An item that nothing is known of (see
// control.Fleet.Unknown) is refused, with nothing shown.
func showDetails(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	details, err := fleet.Detail(ctx, c.items)
	if err != nil {
		return err
	}
	if err := fleet.Unknown(details); err != nil {
		return err
	}
	if out.json {
		return out.document(details)
	}
	var b strings.Builder
	for _, d := range details {
		writeDetail(&b, d, out.list)
	}
	_, err = fmt.Fprint(out.w, b.String())
	return err
}

// writeDetail writes one item's detail: a line naming it, and indented
// lines of what is known of it.
func writeDetail(b *strings.Builder, d control.Detail, list string) {
	switch d.Occurrences {
	case 0:
		fmt.Fprintf(b, "%s: not in the list %q, %s\n", quote(d.Item.Item), list, d.State)
	case 1:
		fmt.Fprintf(b, "%s: in the list %q once, %s\n", quote(d.Item.Item), list, d.State)
	default:
		fmt.Fprintf(b, "%s: in the list %q %d times, %s\n", quote(d.Item.Item), list, d.Occurrences, d.State)
	}
	if d.Problem != nil {
		fmt.Fprintf(b, "  problem: %s\n", *d.Problem)
	}
	lock := "free"
	if d.Holder != nil {
		lock = "holder=" + shown(*d.Holder) + ", " + left(d.LockTTL)
	}
	fmt.Fprintf(b, "  lock: %s\n", lock)
	cooldown := left(d.Cooldown)
	if d.NextSlot != nil {
		cooldown += ", until its next slot " + time.UnixMilli(*d.NextSlot).UTC().Format(timeLayout)
	}
	fmt.Fprintf(b, "  cooldown: %s\n", cooldown)
	fmt.Fprintf(b, "  backoff: %s\n", left(d.Backoff))
	pause := left(d.Pause)
	if d.PausedBy != nil {
		pause += ", by " + *d.PausedBy
	}
	if d.PausedAt != nil {
		pause += " at " + time.UnixMilli(*d.PausedAt).UTC().Format(timeLayout)
	}
	if d.PauseReason != nil && *d.PauseReason != "" {
		pause += ": " + terminalSafe(*d.PauseReason)
	}
	fmt.Fprintf(b, "  pause: %s\n", pause)
	own := "none (the workers' own options stand)"
	if len(d.Settings) > 0 {
		own = terminalSafe(settings.Stored(d.Settings).String())
	}
	fmt.Fprintf(b, "  settings: %s\n", own)
	if d.LastStart == nil {
		fmt.Fprintf(b, "  last run: never\n")
	} else {
		var run []string
		add := func(name string, value string) { run = append(run, name+"="+value) }
		if d.LastResult != nil {
			add("result", shown(*d.LastResult))
		}
		if d.LastExitCode != nil {
			add("exit_code", strconv.FormatInt(*d.LastExitCode, 10))
		}
		add("start", time.UnixMilli(*d.LastStart).UTC().Format(timeLayout))
		if d.LastEnd != nil && *d.LastEnd >= *d.LastStart {
			add("end", time.UnixMilli(*d.LastEnd).UTC().Format(timeLayout))
		}
		if d.LastDuration != nil {
			add("duration_ms", strconv.FormatInt(*d.LastDuration, 10))
		}
		if d.LastHolder != nil {
			add("holder", shown(*d.LastHolder))
		}
		if d.LastFence != nil {
			add("fence", strconv.FormatInt(*d.LastFence, 10))
		}
		if d.LastReason != nil {
			add("reason", strconv.Quote(terminalSafe(*d.LastReason)))
		}
		fmt.Fprintf(b, "  last run: %s\n", strings.Join(run, " "))
	}
	fmt.Fprintf(b, "  runs=%d failures=%d consecutive_failures=%d\n", d.Runs, d.Failures, d.ConsecutiveFailures)
	if len(d.Recent) > 0 {
		fmt.Fprintf(b, "  latest events:\n")
		for _, e := range d.Recent {
			fmt.Fprintf(b, "    %s\n", eventLine(e))
		}
	}
	writeOutput(b, "stdout", d.LastStdout)
	writeOutput(b, "stderr", d.LastStderr)
}

// left is what is left of a key's expiry, from its PTTL in milliseconds.
func left(ms *int64) string {
	switch {
	case ms == nil:
		return "none"
	case *ms < 0:
		return "no expiry"
	}
	return duration.Format(time.Duration(*ms)*time.Millisecond) + " left"
}

// outputShown is how many of the last bytes of a kept output status ITEM
// shows: some thirty lines of a terminal, enough for the error that ended
// a run. --json gives all that w8y kept.
const outputShown = 2048

// writeOutput writes the kept output of the last run, if the state hash
// holds it: its last outputShown bytes, each line indented and escaped so
// that no byte of it can move the cursor or change the terminal.
func writeOutput(b *strings.Builder, name string, output *string) {
	if output == nil {
		return
	}
	text := *output
	header := fmt.Sprintf("  last %s (%d bytes)", name, len(text))
	if len(text) > outputShown {
		text = text[len(text)-outputShown:]
		// Start at a rune, not inside one.
		for i := 0; i < utf8.UTFMax && i < len(text) && !utf8.RuneStart(text[i]); i++ {
			text = text[1:]
		}
		header = fmt.Sprintf("  last %s (%d bytes, the last %d shown)", name, len(*output), len(text))
	}
	fmt.Fprintf(b, "%s:\n", header)
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fmt.Fprintf(b, "    | %s\n", terminalSafe(line))
	}
}

// terminalSafe is s with every byte that a terminal would act on instead
// of showing (control characters, escape sequences, invalid UTF-8)
// written as a Go escape, \x1b, \t or \u2028; backslashes are doubled, so
// that the escapes read as what they stand for.
func terminalSafe(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && len(s[i:]) > 0 && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}
