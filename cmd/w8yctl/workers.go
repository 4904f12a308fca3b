package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/registry"
)

// runWorkers is w8yctl workers: the live workers of the registry, as a
// table or with --json as one array.
func runWorkers(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	entries, err := registry.Read(ctx, fleet.Client, fleet.Keys)
	if err != nil {
		return err
	}
	warnIfNoList(ctx, fleet, out)
	if out.json {
		return out.document(entries)
	}
	if len(entries) == 0 {
		_, err := fmt.Fprintf(out.w, "no live worker under %q (w8y workers announce themselves in %q)\n", fleet.Keys.Prefix, fleet.Keys.Workers())
		return err
	}
	tw := tabwriter.NewWriter(out.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOLDER\tSTATE\tFOR\tRUNNING\tMODE\tVERSION\tSTARTED")
	for _, e := range entries {
		running := make([]string, len(e.Running))
		for i, r := range e.Running {
			running[i] = quote(r.Item)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", terminalSafe(e.Holder), e.State, since(e.Since, c.now),
			orDash(strings.Join(running, " ")), e.Mode, terminalSafe(e.Version), e.Started.UTC().Format(timeLayout))
	}
	fmt.Fprintf(tw, "%s live\n", plural(int64(len(entries)), "worker"))
	return tw.Flush()
}

// since is how long ago t was, to the second.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return max(now.Sub(t), 0).Truncate(time.Second).String()
}

// orDash is s, or "-" for nothing.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// warnIfNoList warns, for the verbs that show the fleet rather than change
// the list (workers, serve), when the list is missing or of another type:
// a mistyped prefix would otherwise show an empty fleet without a word. A
// failed read says nothing; the verb's own reads report it.
func warnIfNoList(ctx context.Context, fleet *control.Fleet, out *printer) {
	if err := fleet.CheckList(ctx); errors.Is(err, control.ErrRefused) {
		out.log.Warn().Msg(err.Error())
	}
}
