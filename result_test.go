package main

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	codes := []int{0, 3}
	tests := []struct {
		name    string
		exit    ChildExit
		err     error
		stopped bool
		want    result
		failed  bool
		event   string
	}{
		{"exit 0", ChildExit{Code: 0}, nil, false, resultSuccess, false, "finish"},
		{"exit 3 is listed", ChildExit{Code: 3}, nil, false, resultSuccess, false, "finish"},
		{"exit 1", ChildExit{Code: 1}, nil, false, resultFailure, true, "finish"},
		{"killed by a signal", ChildExit{Code: 137, Signal: syscall.SIGKILL}, nil, false, resultFailure, true, "finish"},
		{"stopped by w8y's stop signal", ChildExit{Code: 143, Signal: syscall.SIGTERM}, nil, true, resultInterrupted, false, "finish"},
		{"success despite a stop signal", ChildExit{Code: 0}, nil, true, resultSuccess, false, "finish"},
		{"stop before the child started", ChildExit{}, errStopped, true, resultInterrupted, false, "finish"},
		{"lock lost", ChildExit{Code: 143}, fmt.Errorf("x: %w", ErrLockLost), false, resultLockLost, true, "lock_lost"},
		{"lock lost during a stop", ChildExit{Code: 143}, fmt.Errorf("x: %w", ErrLockLost), true, resultLockLost, true, "lock_lost"},
		{"timeout", ChildExit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), false, resultTimeout, true, "timeout"},
		{"could not be run", ChildExit{}, fmt.Errorf("%w: x", ErrNotExecutable), false, resultFailure, true, "finish"},
		{"other error", ChildExit{}, errors.New("boom"), false, resultFailure, true, "finish"},
		{"timeout during a stop", ChildExit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), true, resultTimeout, true, "timeout"},
		{"lock lost though the child exited 0", ChildExit{Code: 0}, fmt.Errorf("x: %w", ErrLockLost), false, resultLockLost, true, "lock_lost"},
		{"executable not found", ChildExit{}, fmt.Errorf("%w: gone", ErrNotFound), false, resultFailure, true, "finish"},
	}
	for _, tt := range tests {
		got := classify(tt.exit, tt.err, tt.stopped, codes)
		if got != tt.want || got.failed() != tt.failed || got.event() != tt.event {
			t.Errorf("%s: %q (failed %v, event %q), want %q (failed %v, event %q)",
				tt.name, got, got.failed(), got.event(), tt.want, tt.failed, tt.event)
		}
	}
}
