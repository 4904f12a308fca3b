package redistest

import (
	"context"
	"maps"
	"strconv"
	"testing"
)

// cannedInfo is INFO's text as Redis 7 sends it: CRLF line ends, section
// headers, blank lines between sections.
const cannedInfo = "# Stats\r\n" +
	"total_connections_received:12\r\n" +
	"total_commands_processed:345\r\n" +
	"instantaneous_ops_per_sec:0\r\n" +
	"\r\n" +
	"# CPU\r\n" +
	"used_cpu_sys:0.412345\r\n" +
	"used_cpu_user:1.5\r\n" +
	"\r\n" +
	"# Commandstats\r\n" +
	"cmdstat_lmove:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|setinfo:calls=2,usec=1,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_evalsha:calls=1200,usec=99,usec_per_call=0.08,rejected_calls=0,failed_calls=1\r\n"

func TestParseInfo(t *testing.T) {
	got := parseInfo(cannedInfo)
	for name, want := range map[string]string{
		"total_commands_processed": "345",
		"used_cpu_sys":             "0.412345",
		"used_cpu_user":            "1.5",
		"cmdstat_lmove":            "calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0",
	} {
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
	if len(got) != 8 {
		t.Errorf("%d fields, want 8 (no headers, no blank lines): %q", len(got), got)
	}
	// CLUSTER INFO has no headers and may end without CRLF.
	if got := parseInfo("cluster_state:ok\r\ncluster_slots_ok:16384"); got["cluster_state"] != "ok" || got["cluster_slots_ok"] != "16384" {
		t.Errorf("CLUSTER INFO: %q", got)
	}
}

func TestCommandCalls(t *testing.T) {
	got, err := commandCalls(parseInfo(cannedInfo))
	want := map[string]int{"lmove": 3, "client|setinfo": 2, "evalsha": 1200}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("commandCalls = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"usec=12,calls=3", "calls=many,usec=1", ""} {
		if got, err := commandCalls(map[string]string{"cmdstat_get": bad}); err == nil {
			t.Errorf("commandCalls of %q = %v, want an error", bad, got)
		}
	}
}

// TestInfoOfALiveServer reads a real server's counts, which the canned text
// could get wrong.
func TestInfoOfALiveServer(t *testing.T) {
	t.Parallel()
	s := Start(t)
	ctx := context.Background()
	if err := s.Client.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.Client.RPush(ctx, "l", "x")
	}
	s.Client.LLen(ctx, "l")
	stats := CommandStats(t, s.Client)
	if stats["rpush"] != 3 || stats["llen"] != 1 || stats["lmove"] != 0 {
		t.Errorf("CommandStats = %v, want 3 RPUSH, 1 LLEN and no LMOVE", stats)
	}
	// CONFIG RESETSTAT, 3 RPUSH, LLEN and the INFO commandstats above.
	if n, err := strconv.Atoi(Info(t, s.Client, "stats")["total_commands_processed"]); err != nil || n != 6 {
		t.Errorf("total_commands_processed = %d, %v; want 6", n, err)
	}
}
