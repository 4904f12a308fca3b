package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestFailureReports(t *testing.T) {
	var stderr bytes.Buffer
	for _, tc := range []struct {
		name string
		cfg  Config
		want io.Writer
	}{
		{"warnings reach stderr", Config{Level: "info"}, nil},
		{"warn level still shows failed runs", Config{Level: "warn"}, nil},
		{"error level hides them", Config{Level: "error"}, &stderr},
		{"a log file takes them off stderr", Config{Level: "info", File: "w8y.log"}, &stderr},
		{"quiet silences them", Config{Level: "error", Quiet: true}, nil},
		{"quiet with a log file too", Config{Level: "info", File: "w8y.log", Quiet: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FailureReports(tc.cfg, &stderr); got != tc.want {
				t.Errorf("FailureReports(%+v) = %v, want %v", tc.cfg, got, tc.want)
			}
		})
	}
}

func TestNewWritesJSONToTheFileAtItsLevel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w8y.log")
	var stderr bytes.Buffer
	log, closeLog, err := New(Config{File: path, Format: "json", Level: "warn", NoTimestamps: true}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("not at this level")
	log.Warn().Str("item", "a").Msg("shown")
	if err := closeLog(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 {
		t.Fatalf("log file holds %q, want the one warning", data)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatalf("log line %q is not JSON: %v", lines[0], err)
	}
	if line["message"] != "shown" || line["item"] != "a" || line["time"] != nil {
		t.Errorf("log line = %v, want the warning without a timestamp", line)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr got %q, want nothing: the log goes to the file", stderr.String())
	}
}

func TestNewQuietLogsNothing(t *testing.T) {
	var stderr bytes.Buffer
	log, _, err := New(Config{Quiet: true, Format: "console", Level: "debug"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	log.Error().Msg("unseen")
	if stderr.Len() != 0 {
		t.Errorf("stderr got %q with Quiet", stderr.String())
	}
}

func TestNewRefusesAnUnknownLevelBeforeOpeningTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w8y.log")
	if _, _, err := New(Config{File: path, Level: "loud"}, io.Discard); err == nil || !strings.Contains(err.Error(), `"loud"`) {
		t.Errorf("New with level loud: err = %v, want one that names it", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the log file was created for a log that cannot be made: %v", err)
	}
}

// brokenPipe is a reader that has gone: each write fails with EPIPE.
type brokenPipe struct{ writes int }

func (b *brokenPipe) Write([]byte) (int, error) {
	b.writes++
	return 0, syscall.EPIPE
}

func TestSinkDropsLinesOnceNobodyReads(t *testing.T) {
	pipe := &brokenPipe{}
	s := &sink{w: pipe}
	for range 3 {
		if n, err := s.Write([]byte("line\n")); n != 5 || err != nil {
			t.Fatalf("Write = %d, %v; want the line taken without an error", n, err)
		}
	}
	if pipe.writes != 1 {
		t.Errorf("the gone pipe was written %d times, want once", pipe.writes)
	}
}

// failing fails each write with an error other than EPIPE.
type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, syscall.EIO }

func TestSinkPassesOtherErrorsOn(t *testing.T) {
	s := &sink{w: failing{}}
	for range 2 {
		if _, err := s.Write([]byte("x")); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Write = %v, want EIO passed on", err)
		}
	}
}
