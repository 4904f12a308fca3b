// Package logging sets up w8y's own log: where its lines go (stderr or a
// file, as console lines or JSON), what happens to them once nobody reads
// them any more, and where the line that tells of a failed run goes when
// the log does not reach stderr.
package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/proc"
)

// Config is what the log options ask for.
type Config struct {
	// File is --log-file: append to this file instead of stderr.
	File string
	// Quiet is --quiet: no log at all, unless File is given.
	Quiet bool
	// Format is --log-format: "console" or "json".
	Format string
	// Level is --log-level: "debug", "info", "warn" or "error".
	Level string
	// NoTimestamps is --no-log-timestamps.
	NoTimestamps bool
}

// New builds the logger of cfg: console lines on stderr by default, JSON
// with Format "json", appended to File if given. With Quiet and no File it
// logs nothing. The returned close function closes the log file, if any.
func New(cfg Config, stderr io.Writer) (zerolog.Logger, func() error, error) {
	closeLog := func() error { return nil }
	level, err := zerolog.ParseLevel(cfg.Level)
	if err != nil {
		return zerolog.Nop(), closeLog, fmt.Errorf("invalid --log-level %q", cfg.Level)
	}
	out := stderr
	switch {
	case cfg.File != "":
		f, err := os.OpenFile(cfg.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return zerolog.Nop(), closeLog, fmt.Errorf("open log file: %w", err)
		}
		out, closeLog = f, f.Close
	case cfg.Quiet:
		return zerolog.Nop(), closeLog, nil
	}
	colour := isTerminal(out)
	if colour {
		// Not stopped by its own log line from the background: see
		// proc.TerminalWriter.
		out = proc.TerminalWriter(out)
	}
	// The refresher and the signal router log from their own goroutines.
	out = zerolog.SyncWriter(&sink{w: out})
	if cfg.Format == "console" {
		cw := zerolog.ConsoleWriter{Out: out, NoColor: !colour, TimeFormat: time.RFC3339}
		if cfg.NoTimestamps {
			cw.PartsExclude = []string{zerolog.TimestampFieldName}
		}
		out = cw
	}
	ctx := zerolog.New(out).Level(level).With()
	if !cfg.NoTimestamps {
		ctx = ctx.Timestamp()
	}
	return ctx.Logger(), closeLog, nil
}

// FailureReports returns where w8y writes the line that tells of a failed
// run when its own log would not show it on stderr: with a File, or a Level
// above warn. cron mails only what a job writes on stderr, and a failed
// item must not go unseen. It returns nil when the log's warnings reach
// stderr, and with Quiet, which silences all of w8y's lines but the one
// that explains its own failure.
func FailureReports(cfg Config, stderr io.Writer) io.Writer {
	level, _ := zerolog.ParseLevel(cfg.Level)
	switch {
	case cfg.Quiet:
		return nil
	case cfg.File == "" && level <= zerolog.WarnLevel:
		return nil
	}
	return stderr
}

// sink is where w8y's log lines go: w, until a write finds that nobody
// reads it any more (EPIPE: the pipe's reader exited, as head does, or a
// journald restarted). From then on the logs are gone, and lines are
// dropped without a word: a run goes on and ends as it would have, with
// its lock released and its exit code, and zerolog prints no complaint of
// its own on stderr, which may be that very pipe.
type sink struct {
	w    io.Writer
	gone bool
}

func (s *sink) Write(p []byte) (int, error) {
	if s.gone {
		return len(p), nil
	}
	n, err := s.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		s.gone = true
		return len(p), nil
	}
	return n, err
}

// isTerminal reports whether w is a terminal, where colour helps. go-isatty
// is in the build anyway, through zerolog's console writer.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
