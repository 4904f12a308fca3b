package redistest

import (
	"github.com/w8y/w8y/internal/poll"

	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Info returns the fields of one INFO section ("stats", "cpu",
// "replication", ...) of the server that c talks to, by name: the figures
// that tests compare, such as total_commands_processed, are read here and
// nowhere else.
func Info(tb testing.TB, c redis.Cmdable, section string) map[string]string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	text, err := c.Info(ctx, section).Result()
	if err != nil {
		tb.Fatalf("INFO %s: %v", section, err)
	}
	return parseInfo(text)
}

// CommandStats returns how many times the server that c talks to has run
// each command since it started or since CONFIG RESETSTAT, from INFO
// commandstats, by the lower-case name that Redis uses ("lmove"; a
// subcommand as "client|setinfo"). A command that never ran is absent, which
// reads as 0: tests ask, for instance, whether a path sent any LMOVE.
func CommandStats(tb testing.TB, c redis.Cmdable) map[string]int {
	tb.Helper()
	calls, err := commandCalls(Info(tb, c, "commandstats"))
	if err != nil {
		tb.Fatal(err)
	}
	return calls
}

// parseInfo splits INFO's text into its fields. Lines are "name:value" and
// end in CRLF; "# Section" headers and blank lines separate the sections.
// CLUSTER INFO answers in the same form.
func parseInfo(text string) map[string]string {
	fields := map[string]string{}
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if name, value, ok := strings.Cut(line, ":"); ok {
			fields[name] = value
		}
	}
	return fields
}

// commandCalls reads the calls per command from the fields of INFO
// commandstats, each "cmdstat_<name>" holding "calls=N,usec=...".
func commandCalls(fields map[string]string) (map[string]int, error) {
	calls := map[string]int{}
	for name, value := range fields {
		command, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(strings.TrimPrefix(value, "calls="), ",")
		count, err := strconv.Atoi(n)
		if err != nil || !strings.HasPrefix(value, "calls=") {
			return nil, fmt.Errorf("INFO commandstats: cannot read the calls of %s from %q", command, value)
		}
		calls[command] = count
	}
	return calls, nil
}
