package main

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/schema"
)

// TestNewRunEnd: how each way a run can end is named, whether it counts
// against the item, which event ends it and which exit code its record
// gets.
func TestNewRunEnd(t *testing.T) {
	codes := []int{0, 3}
	const none = -1 // no exit code recorded: no child was started
	tests := []struct {
		name    string
		exit    proc.Exit
		err     error
		stopped bool
		want    schema.Result
		failed  bool
		event   string
		code    int
	}{
		{"exit 0", proc.Exit{Code: 0}, nil, false, schema.ResultSuccess, false, "finish", 0},
		{"exit 3 is listed", proc.Exit{Code: 3}, nil, false, schema.ResultSuccess, false, "finish", 3},
		{"exit 1", proc.Exit{Code: 1}, nil, false, schema.ResultFailure, true, "finish", 1},
		{"killed by a signal", proc.Exit{Code: 137, Signal: syscall.SIGKILL}, nil, false, schema.ResultFailure, true, "finish", 137},
		{"stopped by w8y's stop signal", proc.Exit{Code: 143, Signal: syscall.SIGTERM}, nil, true, schema.ResultInterrupted, false, "finish", 143},
		{"success despite a stop signal", proc.Exit{Code: 0}, nil, true, schema.ResultSuccess, false, "finish", 0},
		{"stop before the child started", proc.Exit{}, jobctl.StopError{Signal: syscall.SIGTERM}, true, schema.ResultInterrupted, false, "finish", none},
		{"lock lost", proc.Exit{Code: 143}, fmt.Errorf("x: %w", lease.ErrLost), false, schema.ResultLockLost, true, "lock_lost", 143},
		{"lock lost during a stop", proc.Exit{Code: 143}, fmt.Errorf("x: %w", lease.ErrLost), true, schema.ResultLockLost, true, "lock_lost", 143},
		{"timeout", proc.Exit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), false, schema.ResultTimeout, true, "timeout", 143},
		{"could not be run", proc.Exit{}, fmt.Errorf("%w: x", proc.ErrNotExecutable), false, schema.ResultFailure, true, "finish", 126},
		{"other error", proc.Exit{}, errors.New("boom"), false, schema.ResultFailure, true, "finish", 0},
		{"timeout during a stop", proc.Exit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), true, schema.ResultTimeout, true, "timeout", 143},
		{"lock lost though the child exited 0", proc.Exit{Code: 0}, fmt.Errorf("x: %w", lease.ErrLost), false, schema.ResultLockLost, true, "lock_lost", 0},
		{"executable not found", proc.Exit{}, fmt.Errorf("%w: gone", proc.ErrNotFound), false, schema.ResultFailure, true, "finish", 127},
		{"cancelled", proc.Exit{Code: 143}, &cancelledError{}, false, schema.ResultCancelled, false, "cancelled", 143},
		{"cancelled as a failure", proc.Exit{Code: 143}, &cancelledError{req: schema.CancelRequest{AsFailure: true}}, false, schema.ResultCancelled, true, "cancelled", 143},
		{"cancelled though the child exited 0", proc.Exit{Code: 0}, &cancelledError{}, false, schema.ResultCancelled, false, "cancelled", 0},
		{"cancelled during a stop", proc.Exit{Code: 143}, &cancelledError{}, true, schema.ResultCancelled, false, "cancelled", 143},
	}
	for _, tt := range tests {
		end := newRunEnd("a", tt.exit, tt.err, tt.stopped, codes)
		got := end.Result
		if got != tt.want || end.Failed() != tt.failed || got.Event() != tt.event {
			t.Errorf("%s: %q (failed %v, event %q), want %q (failed %v, event %q)",
				tt.name, got, end.Failed(), got.Event(), tt.want, tt.failed, tt.event)
		}
		if want := tt.want == schema.ResultCancelled; (end.Cancel != nil) != want {
			t.Errorf("%s: the end's cancel request is %v", tt.name, end.Cancel)
		}
		code := none
		if end.Exited {
			code = end.Exit.Code
		}
		if code != tt.code || end.Item != "a" || end.Err != tt.err || end.At.IsZero() {
			t.Errorf("%s: recorded code %d, item %q, err %v, at %v; want code %d", tt.name, code, end.Item, end.Err, end.At, tt.code)
		}
	}
}
