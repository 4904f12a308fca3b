package main

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	flags "github.com/jessevdk/go-flags"
	"github.com/w8y/w8y/internal/duration"
	"golang.org/x/sys/unix"
)

// StopOptions say how w8y stops a child: with which signal at --timeout,
// and how long a stop signal lets the running children finish. They sit in
// the "The child" group of --help (ChildOptions embeds them).
type StopOptions struct {
	TimeoutSignal signalFlag    `long:"timeout-signal" env:"W8Y_TIMEOUT_SIGNAL" default:"TERM" value-name:"SIGNAL" description:"Signal sent to the child's group at --timeout" details:"The signal that a child's process group gets when --timeout passes, as timeout -s chooses it, followed by SIGCONT (so that a stopped group sees it) and, after --kill-after, SIGKILL. A name with or without SIG, in any case (TERM, sigint, USR1), or a number (15)."`
	DrainTimeout  duration.Flag `long:"drain-timeout" env:"W8Y_DRAIN_TIMEOUT" value-name:"DURATION" description:"On a stop signal, let running children finish for DURATION" details:"On a stop signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT), take no new item and let the running children finish, keeping their locks, for up to DURATION; then pass them the signal, as w8y does at once without it. A second stop signal kills their groups at once. 0 (the default) passes the signal at once."`
}

// validateStop checks --timeout-signal and --drain-timeout.
func (o *StopOptions) validateStop() error {
	if o.DrainTimeout < 0 {
		return usageError("--drain-timeout must not be negative, got %s", o.DrainTimeout)
	}
	return nil
}

// drain is --drain-timeout as a duration.
func (o *StopOptions) drain() time.Duration { return time.Duration(o.DrainTimeout) }

// signalFlag is --timeout-signal: a signal named as kill(1) and timeout(1)
// accept it, TERM, SIGTERM or 15, in any case.
type signalFlag syscall.Signal

// UnmarshalFlag implements flags.Unmarshaler.
func (s *signalFlag) UnmarshalFlag(value string) error {
	sig, err := parseSignal(value)
	if err != nil {
		return err
	}
	*s = signalFlag(sig)
	return nil
}

// MarshalFlag implements flags.Marshaler: --help shows the name without SIG.
func (s signalFlag) MarshalFlag() (string, error) {
	return strings.TrimPrefix(unix.SignalName(syscall.Signal(s)), "SIG"), nil
}

// completedSignals are the names that completion offers for --timeout-signal,
// the signals a child is stopped with; any other name or number is accepted.
var completedSignals = []string{"TERM", "INT", "HUP", "QUIT", "KILL", "USR1", "USR2"}

// Complete implements flags.Completer: the names that start with match, in
// any case, with SIG if match has it.
func (signalFlag) Complete(match string) []flags.Completion {
	var out []flags.Completion
	for _, name := range completedSignals {
		for _, n := range []string{name, "SIG" + name} {
			if strings.HasPrefix(n, strings.ToUpper(match)) && (match != "" || n == name) {
				out = append(out, flags.Completion{Item: n})
			}
		}
	}
	return out
}

// parseSignal reads a signal's name, with or without SIG in any case, or
// its number. Signal 0 sends nothing, so it is refused.
func parseSignal(value string) (syscall.Signal, error) {
	v := strings.ToUpper(strings.TrimSpace(value))
	if n, err := strconv.Atoi(v); err == nil {
		if n > 0 && unix.SignalName(syscall.Signal(n)) != "" {
			return syscall.Signal(n), nil
		}
	} else if sig := unix.SignalNum("SIG" + strings.TrimPrefix(v, "SIG")); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("%q is not a signal: give its name, with or without SIG, in any case (TERM, SIGINT, usr1), or its number (15)", value)
}
