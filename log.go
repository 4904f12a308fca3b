package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/items"
	"github.com/w8y/w8y/internal/proc"
)

// newLogger builds w8y's logger from the options: console lines on stderr by
// default, JSON with --log-format json, appended to --log-file if given. With
// --quiet and no --log-file it logs nothing. The returned close function
// closes the log file, if any.
func newLogger(opts *Options, stderr io.Writer) (zerolog.Logger, func() error, error) {
	closeLog := func() error { return nil }
	out := stderr
	switch {
	case opts.LogFile != "":
		f, err := os.OpenFile(opts.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return zerolog.Nop(), closeLog, fmt.Errorf("open log file: %w", err)
		}
		out, closeLog = f, f.Close
	case opts.Quiet:
		return zerolog.Nop(), closeLog, nil
	}
	colour := isTerminal(out)
	if colour {
		// Not stopped by its own log line from the background: see
		// proc.TerminalWriter.
		out = proc.TerminalWriter(out)
	}
	// The refresher and the signal router log from their own goroutines.
	out = zerolog.SyncWriter(&logSink{w: out})
	if opts.LogFormat == "console" {
		cw := zerolog.ConsoleWriter{Out: out, NoColor: !colour, TimeFormat: time.RFC3339}
		if opts.NoLogTimestamps {
			cw.PartsExclude = []string{zerolog.TimestampFieldName}
		}
		out = cw
	}
	level, err := zerolog.ParseLevel(opts.LogLevel)
	if err != nil {
		return zerolog.Nop(), closeLog, usageError("invalid --log-level %q", opts.LogLevel)
	}
	ctx := zerolog.New(out).Level(level).With()
	if !opts.NoLogTimestamps {
		ctx = ctx.Timestamp()
	}
	return ctx.Logger(), closeLog, nil
}

// failureReports returns where w8y writes the line that tells of a failed
// run (see reportedFailure) when its own log would not show it on stderr:
// with --log-file, or a --log-level above warn. cron mails only what a job
// writes on stderr, and a failed item must not go unseen. It returns nil
// when the log's warnings reach stderr, and with --quiet, which silences
// all of w8y's lines but the one that explains its own failure.
func failureReports(opts *Options, stderr io.Writer) io.Writer {
	level, _ := zerolog.ParseLevel(opts.LogLevel)
	switch {
	case opts.Quiet:
		return nil
	case opts.LogFile == "" && level <= zerolog.WarnLevel:
		return nil
	}
	return stderr
}

// logSink is where w8y's log lines go: w, until a write finds that nobody
// reads it any more (EPIPE: the pipe's reader exited, as head does, or a
// journald restarted). From then on the logs are gone, and lines are
// dropped without a word: a run goes on and ends as it would have, with
// its lock released and its exit code, and zerolog prints no complaint of
// its own on stderr, which may be that very pipe.
type logSink struct {
	w    io.Writer
	gone bool
}

func (s *logSink) Write(p []byte) (int, error) {
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

// quoteKey quotes a key for messages, so odd bytes in items stay visible,
// clipped as items are.
func quoteKey(key string) string { return fmt.Sprintf("%q", items.Clip(key)) }
