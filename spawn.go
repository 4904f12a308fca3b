package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/items"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/output"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/runs"
	"github.com/w8y/w8y/internal/schema"
)

// placeholder is replaced by the item anywhere inside any argument.
const placeholder = "{}"

// Command is the child to run for each item.
type Command struct {
	// Path is the resolved executable.
	Path string
	// Args are the arguments after the executable, with placeholders.
	Args []string
	// EnvVar, if set, names a variable that is set to the item.
	EnvVar string
	// Environ is the environment the child starts from.
	Environ []string
	// Stdin, Stdout and Stderr are the child's standard streams: w8y's own,
	// which an *os.File passes on untouched. A nil Stdin is /dev/null,
	// which --parallel gives every child: children would otherwise split
	// w8y's input between them unpredictably, or be stopped for reading a
	// terminal from the background.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// resolveCommand finds the executable as execvp(3), env(1) and the shells
// do, so that a missing or unrunnable one is reported before any item is
// taken: a name with a slash is a path, any other is looked up in PATH. A
// name that PATH holds only as something that cannot be run (a file without
// the run bit, a directory, as "." always is) cannot be run (126), as
// execvp's EACCES says, rather than not found (127).
func resolveCommand(argv []string, envVar string, environ []string) (Command, error) {
	path, err := exec.LookPath(argv[0])
	switch {
	case err == nil:
	case errors.Is(err, exec.ErrNotFound) && !strings.Contains(argv[0], "/"):
		if found := unrunnableInPath(argv[0]); found != "" {
			return Command{}, fmt.Errorf("%w: %q: %s", proc.ErrNotExecutable, argv[0], found)
		}
		return Command{}, fmt.Errorf("%w: %q", proc.ErrNotFound, argv[0])
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return Command{}, fmt.Errorf("%w: %q", proc.ErrNotFound, argv[0])
	default:
		// It exists, but is a directory or lacks the run bit.
		var eerr *exec.Error
		if errors.As(err, &eerr) {
			err = eerr.Err
		}
		return Command{}, fmt.Errorf("%w: %q: %w", proc.ErrNotExecutable, argv[0], err)
	}
	if err := checkInterpreter(path); err != nil {
		return Command{}, err
	}
	return Command{Path: path, Args: argv[1:], EnvVar: envVar, Environ: environ}, nil
}

// unrunnableInPath says what name is in the first directory of PATH that
// has it, as exec.LookPath searches them, or returns "". Call it once
// LookPath found nothing it could run: whatever is there cannot be run.
func unrunnableInPath(name string) string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "." // an empty entry is the working directory
		}
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		switch {
		case err != nil:
		case info.IsDir():
			return path + " is a directory"
		default:
			return path + " is not executable"
		}
	}
	return ""
}

// expandArgs replaces every placeholder in args with item.
func expandArgs(args []string, item string) []string {
	out := make([]string, len(args))
	for i, arg := range args {
		out[i] = strings.ReplaceAll(arg, placeholder, item)
	}
	return out
}

// build returns the exec.Cmd for item, whose lock has the key lockKey and
// the fencing token fence, with c's standard streams.
func (c Command) build(item, lockKey string, fence int64) *exec.Cmd {
	cmd := exec.Command(c.Path, expandArgs(c.Args, item)...)
	env := append(c.Environ[:len(c.Environ):len(c.Environ)], "W8Y_ITEM="+item, "W8Y_LOCK_KEY="+lockKey,
		fenceVar+"="+strconv.FormatInt(fence, 10))
	if c.EnvVar != "" {
		env = append(env, c.EnvVar+"="+item)
	}
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	return cmd
}

// fenceVar is set to the take's fencing token (see schema.Keys.Fence) in
// every child's environment.
const fenceVar = "W8Y_FENCE"

// holderVar is set to the run's lock token in every child's environment. It
// tells the child who holds its lock, and marks the processes that the guard
// kills if w8y dies (see proc.Spawner).
const holderVar = "W8Y_HOLDER"

// maxItemLen is the longest item that the child's arguments and environment
// can carry, given room bytes for them all (proc.ArgMax). lockPrefix is the
// lock key of the empty item. An item over this length is skipped before its
// lock is taken, instead of failing after.
func (c Command) maxItemLen(lockPrefix string, room int) int {
	strs := []proc.ExecString{{Fixed: len(c.Path)}} // argv[0]
	for _, arg := range c.Args {
		n := strings.Count(arg, placeholder)
		strs = append(strs, proc.ExecString{Fixed: len(arg) - n*len(placeholder), Copies: n})
	}
	strs = append(strs,
		proc.ExecString{Fixed: len("W8Y_ITEM="), Copies: 1},
		proc.ExecString{Fixed: len("W8Y_LOCK_KEY=") + len(lockPrefix), Copies: 1},
		// The longest token: an int64's 19 digits.
		proc.ExecString{Fixed: len(fenceVar) + 1 + 19})
	if c.EnvVar != "" {
		strs = append(strs, proc.ExecString{Fixed: len(c.EnvVar) + 1, Copies: 1})
	}
	for _, kv := range c.Environ {
		strs = append(strs, proc.ExecString{Fixed: len(kv)})
	}
	return proc.MaxValueLen(c.Path, strs, room)
}

// ErrTimeout is reported when a child ran past --timeout and was stopped.
var ErrTimeout = errors.New("timed out")

// ErrCancelled is reported when a cancel request stopped a child (see
// schema.Keys.Cancel); the error that wraps it is a *cancelledError.
var ErrCancelled = errors.New("cancelled")

// cancelledError is a run that its cancel request stopped: the request says
// why, who asked, and whether the run counts as a failure.
type cancelledError struct{ req schema.CancelRequest }

func (e *cancelledError) Error() string {
	return fmt.Sprintf("cancelled by %s: %q; the child was stopped", e.req.By, e.req.Reason)
}

func (e *cancelledError) Is(target error) bool { return target == ErrCancelled }

// childRunner runs an item's child while keeping its lock alive, and stops
// the child's process group when the lock is lost or --timeout passes.
type childRunner struct {
	command Command
	spawn   *proc.Spawner
	stops   *jobctl.Router
	// exitCodes are the codes that count as success (--exit-codes).
	exitCodes []int
	// killAfter is --kill-after; timeout is --timeout, 0 for none.
	killAfter, timeout time.Duration
	// keepOutput is --keep-output: how many of the last bytes of the
	// child's stdout and stderr to keep, 0 to leave them untouched.
	keepOutput int
	metrics    observer
	// health is nil unless --metrics-addr is given.
	health *health.Heartbeat
	log    zerolog.Logger
}

// run runs the child for item, whose lock is ours, and says how the run
// ended.
func (c *childRunner) run(ctx context.Context, item string, lock *Lock) runs.End {
	exit, stopped, kept, err := c.runChild(ctx, item, lock)
	end := newRunEnd(item, exit, err, stopped, c.exitCodes)
	end.Output = kept
	return end
}

// outputGrace is how long w8y waits, once the child's group has ended, for
// the pipes of --keep-output to empty and close: long enough to drain what
// the group wrote last, short enough that a process that left the group
// with the pipe open (a daemon) holds the run up little. Its later writes
// fail (EPIPE).
const outputGrace = time.Second

// runChild runs the child for item while keeping its lock alive. If the
// lock is lost, the child's group is stopped before the lease could run out,
// and the error wraps ErrLockLost; if --timeout passes first, the group is
// stopped and the error wraps ErrTimeout; if a refresh finds a cancel
// request aimed at the lock, the group is stopped the same way and the
// error is a *cancelledError. stopped reports whether a stop
// signal had reached w8y by the time the child ended. With --keep-output,
// kept is the end of the child's output.
func (c *childRunner) runChild(ctx context.Context, item string, lock *Lock) (exit proc.Exit, stopped bool, kept *runs.Output, err error) {
	log := c.log.With().Str("item", items.Clip(item)).Str("lock_key", items.Clip(lock.Key)).Logger()
	grace := killGrace(c.killAfter, lock.TTL)
	// The lease starts with the child, so that job control finds every
	// child with its lease (see jobctl.Router.StartChild).
	lease := lock.keepAlive(ctx, grace+stopMargin(lock.TTL), log)
	defer lease.Stop()
	cmd := c.command.build(item, lock.Key, lock.Fence)
	var capture *output.Capture
	if c.keepOutput > 0 {
		capture, err = output.Start(cmd.Stdout, cmd.Stderr, c.keepOutput)
		if err != nil {
			return proc.Exit{}, c.stops.Stopping(), nil, err
		}
		cmd.Stdout, cmd.Stderr = capture.Stdout, capture.Stderr
	}
	child, err := c.stops.StartChild(func() (*proc.Child, error) { return c.spawn.Start(cmd) }, lease)
	if capture != nil {
		capture.Started()
	}
	if err != nil {
		if capture != nil {
			capture.Finish(time.Now())
		}
		return proc.Exit{}, c.stops.Stopping(), nil, err
	}
	defer c.stops.ChildDone(child)
	defer child.Close()
	c.metrics.ChildStarted()
	defer c.metrics.ChildEnded()
	log.Info().Int("pid", child.PID).Str("holder", lock.Token).Msg("item started")

	var timeout <-chan time.Time
	if c.timeout > 0 {
		timer := time.NewTimer(c.timeout)
		defer timer.Stop()
		timeout = timer.C
	}
	// Waiting for the child is progress too, as far as /healthz goes: each
	// running child beats, so the worker stays healthy while any runs.
	stopBeating := c.health.BeatEvery(health.ChildBeat)
	var failed error
	for ended := false; !ended; {
		select {
		case <-child.Done():
			// EndStragglers also passes on what the terminal sent the
			// child's group before it exited (see proc.Spawner), so that
			// stopped below knows of a Ctrl-C that ended the child.
			if child.EndStragglers(time.Now().Add(grace)) {
				log.Warn().Int("pid", child.PID).Msg("the child left processes in its group; they were stopped")
			}
			// A lock found lost as the child ended (killed for it, after
			// w8y was stopped with it: see jobctl) is the run's end.
			select {
			case failed = <-lease.Lost():
				log.Error().Err(failed).Int("pid", child.PID).Msg("lock lost: the child was stopped")
			default:
			}
			ended = true
		case sig := <-child.Stopped():
			c.stops.ChildStopped(child, sig)
		case failed = <-lease.Lost():
			log.Error().Err(failed).Int("pid", child.PID).Msg("lock lost: stopping the child")
			child.Stop(grace)
			ended = true
		case req := <-lease.Cancelled():
			failed = &cancelledError{req: req}
			log.Warn().Str("reason", req.Reason).Str("by", req.By).Int("pid", child.PID).Msg("cancelled: stopping the child")
			// As for a timeout, the lease goes on while the child stops,
			// and finish.lua then deletes the request with the lock.
			child.Stop(grace)
			ended = true
		case <-timeout:
			failed = fmt.Errorf("%w after %s (--timeout); it was stopped", ErrTimeout, c.timeout)
			log.Error().Int("pid", child.PID).Msg("timed out: stopping the child")
			// The lease goes on while the child stops: the lock is still ours,
			// and the grace fits in the lease (see killGrace), so a lock lost
			// meanwhile needs no faster kill.
			child.Stop(grace)
			ended = true
		}
	}
	if capture != nil {
		// While the lease still holds the lock.
		stdout, stderr := capture.Finish(time.Now().Add(outputGrace))
		kept = &runs.Output{Stdout: stdout, Stderr: stderr}
	}
	stopped = c.stops.Stopping()
	stopBeating()
	lease.Stop()
	if err := c.spawn.Reclaim(child); err != nil {
		log.Warn().Err(err).Msg("could not take the terminal back from the child")
	}

	exit = child.Exit()
	// A failed run is a warning, so that --log-level warn still shows it;
	// a success is news.
	result := classify(exit, failed, stopped, c.exitCodes)
	event := log.Info()
	if result != schema.ResultSuccess {
		event = log.Warn().AnErr("cause", failed)
	}
	event.Int("pid", child.PID).Int("exit_code", exit.Code).Str("status", exit.String()).Str("result", string(result)).
		Float64("duration_s", exit.Duration.Seconds()).Msg("item finished")
	return exit, stopped, kept, failed
}

// killGrace is the time a child gets between SIGTERM and SIGKILL when w8y
// stops it: --kill-after, but at most a third of the lock's TTL, so that a
// child whose lock is being lost is gone before the lease ends.
func killGrace(killAfter, ttl time.Duration) time.Duration {
	return min(killAfter, ttl/3)
}

// stopMargin is kept free at the end of a lease on top of the kill grace, for
// the SIGKILL to land and the process to be gone: a tenth of the TTL, at
// most half a second.
func stopMargin(ttl time.Duration) time.Duration {
	return min(ttl/10, 500*time.Millisecond)
}
