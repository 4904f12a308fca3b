package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/proc"
)

// errFound is what check returns when it found problems that it left in
// place: run ends with exitFound, and prints no further line, the findings
// being on stdout.
var errFound = errors.New("check found problems")

// runCheck is w8yctl check: the maintenance pass, which with --fix repairs
// what is safe to repair.
func runCheck(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	findings, err := fleet.Check(ctx, childcmd.MaxItemLenAny(fleet.Keys.Lock(""), proc.ArgMax()), c.opts.Fix)
	if err != nil {
		return err
	}
	if out.json {
		if findings == nil {
			findings = []control.Finding{}
		}
		err = out.document(findings)
	} else {
		for _, d := range findings {
			if _, err = fmt.Fprintln(out.w, findingLine(d)); err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	var left int64
	for _, d := range findings {
		if d.Fixed == nil {
			left++
		}
	}
	if !out.json {
		summary := fmt.Sprintf("found %s under %q", plural(int64(len(findings)), "problem"), fleet.Keys.Prefix)
		if c.opts.Fix {
			summary += fmt.Sprintf(", repaired %d", int64(len(findings))-left)
		}
		if _, err := fmt.Fprintln(out.w, summary); err != nil {
			return err
		}
	}
	if left > 0 {
		return errFound
	}
	return nil
}

// findingLine is a finding as check prints it: its kind, what is wrong,
// and what --fix did or what an operator can do.
func findingLine(d control.Finding) string {
	line := d.Kind + ": " + d.Problem
	switch {
	case d.Fixed != nil:
		line += ": " + *d.Fixed
	case d.Remedy != nil:
		line += "; to repair: " + *d.Remedy
	}
	return line
}
