package main

import (
	"io"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/doctest"
)

// TestScheduleDocsExamples: every example in docs/scheduling.md's table of
// --schedule, --schedule-timezone and --jitter is accepted as the page
// says, given as a user would give it.
func TestScheduleDocsExamples(t *testing.T) {
	section := doctest.Section(t, "docs/scheduling.md", "## Clock-time schedules: `--schedule`")
	option, seen := "", 0
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.Contains(cells[2], "`") {
			continue
		}
		if name := strings.Trim(strings.TrimSpace(cells[1]), "`"); name != "" {
			option = name
		}
		example := strings.Trim(strings.TrimSpace(cells[2]), "`'")
		args := []string{"--schedule", "@daily"}
		if option == "--schedule" {
			args = nil
		}
		args = append(args, option, example, "true")
		if _, err := parseOptions(args, io.Discard); err != nil {
			t.Errorf("%s %q from docs/scheduling.md: %v", option, example, err)
		}
		seen++
	}
	if seen < 5 {
		t.Errorf("read %d examples from docs/scheduling.md's table, want 5", seen)
	}
}
