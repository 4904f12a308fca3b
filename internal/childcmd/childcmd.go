// Package childcmd is the command that w8y runs for each item: the
// executable, found before any item is taken; its arguments, with {}
// replaced by the item; its environment, with W8Y_ITEM, W8Y_LOCK_KEY,
// W8Y_FENCE and --env-var set; and the longest item that execve can carry
// in all of them, so that a longer one is skipped before its lock is taken.
// Running it, under its lock, is the root's spawn.go, over internal/proc.
package childcmd

import (
	"io"
	"os/exec"
	"strconv"
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

// Resolve finds the executable argv[0] (see proc.LookPath), so that one
// that cannot run fails before any item is taken. envVar is --env-var, and
// environ the environment that each child starts from.
func Resolve(argv []string, envVar string, environ []string) (Command, error) {
	path, err := proc.LookPath(argv[0])
	if err != nil {
		return Command{}, err
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

// Build returns the exec.Cmd for item, whose lock has the key lockKey and
// the fencing token fence, with c's standard streams.
func (c Command) Build(item, lockKey string, fence int64) *exec.Cmd {
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

// HolderVar is set to the run's lock token in every child's environment,
// by the spawner that w8y gives it as its marker. It tells the child who
// holds its lock, and marks the processes that the guard kills if w8y dies
// (see proc.Spawner).
const HolderVar = "W8Y_HOLDER"

// MaxItemLen is the longest item that the child's arguments and environment
// can carry, given room bytes for them all (proc.ArgMax). lockPrefix is the
// lock key of the empty item. An item over this length is skipped before its
// lock is taken, instead of failing after.
func (c Command) MaxItemLen(lockPrefix string, room int) int {
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
