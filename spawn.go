package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"strings"

	"github.com/w8y/w8y/internal/proc"
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

// resolveCommand finds the executable as exec.LookPath does, so that a
// missing or unrunnable one is reported before any item is taken.
func resolveCommand(argv []string, envVar string, environ []string) (Command, error) {
	path, err := exec.LookPath(argv[0])
	switch {
	case err == nil:
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
	return Command{Path: path, Args: argv[1:], EnvVar: envVar, Environ: environ}, nil
}

// expandArgs replaces every placeholder in args with item.
func expandArgs(args []string, item string) []string {
	out := make([]string, len(args))
	for i, arg := range args {
		out[i] = strings.ReplaceAll(arg, placeholder, item)
	}
	return out
}

// build returns the exec.Cmd for item, with c's standard streams.
func (c Command) build(item, lockKey string) *exec.Cmd {
	cmd := exec.Command(c.Path, expandArgs(c.Args, item)...)
	env := append(c.Environ[:len(c.Environ):len(c.Environ)], "W8Y_ITEM="+item, "W8Y_LOCK_KEY="+lockKey)
	if c.EnvVar != "" {
		env = append(env, c.EnvVar+"="+item)
	}
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	return cmd
}

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
		proc.ExecString{Fixed: len("W8Y_LOCK_KEY=") + len(lockPrefix), Copies: 1})
	if c.EnvVar != "" {
		strs = append(strs, proc.ExecString{Fixed: len(c.EnvVar) + 1, Copies: 1})
	}
	for _, kv := range c.Environ {
		strs = append(strs, proc.ExecString{Fixed: len(kv)})
	}
	return proc.MaxValueLen(c.Path, strs, room)
}
