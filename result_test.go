package main

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/proc"
)

func TestClassify(t *testing.T) {
	codes := []int{0, 3}
	tests := []struct {
		name    string
		exit    proc.Exit
		err     error
		stopped bool
		want    result
		failed  bool
		event   string
	}{
		{"exit 0", proc.Exit{Code: 0}, nil, false, resultSuccess, false, "finish"},
		{"exit 3 is listed", proc.Exit{Code: 3}, nil, false, resultSuccess, false, "finish"},
		{"exit 1", proc.Exit{Code: 1}, nil, false, resultFailure, true, "finish"},
		{"killed by a signal", proc.Exit{Code: 137, Signal: syscall.SIGKILL}, nil, false, resultFailure, true, "finish"},
		{"stopped by w8y's stop signal", proc.Exit{Code: 143, Signal: syscall.SIGTERM}, nil, true, resultInterrupted, false, "finish"},
		{"success despite a stop signal", proc.Exit{Code: 0}, nil, true, resultSuccess, false, "finish"},
		{"stop before the child started", proc.Exit{}, errStopped, true, resultInterrupted, false, "finish"},
		{"lock lost", proc.Exit{Code: 143}, fmt.Errorf("x: %w", ErrLockLost), false, resultLockLost, true, "lock_lost"},
		{"lock lost during a stop", proc.Exit{Code: 143}, fmt.Errorf("x: %w", ErrLockLost), true, resultLockLost, true, "lock_lost"},
		{"timeout", proc.Exit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), false, resultTimeout, true, "timeout"},
		{"could not be run", proc.Exit{}, fmt.Errorf("%w: x", proc.ErrNotExecutable), false, resultFailure, true, "finish"},
		{"other error", proc.Exit{}, errors.New("boom"), false, resultFailure, true, "finish"},
		{"timeout during a stop", proc.Exit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), true, resultTimeout, true, "timeout"},
		{"lock lost though the child exited 0", proc.Exit{Code: 0}, fmt.Errorf("x: %w", ErrLockLost), false, resultLockLost, true, "lock_lost"},
		{"executable not found", proc.Exit{}, fmt.Errorf("%w: gone", proc.ErrNotFound), false, resultFailure, true, "finish"},
	}
	for _, tt := range tests {
		got := classify(tt.exit, tt.err, tt.stopped, codes)
		if got != tt.want || got.failed() != tt.failed || got.event() != tt.event {
			t.Errorf("%s: %q (failed %v, event %q), want %q (failed %v, event %q)",
				tt.name, got, got.failed(), got.event(), tt.want, tt.failed, tt.event)
		}
	}
}
