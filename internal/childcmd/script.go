package childcmd

import (
	"path/filepath"
	"strings"
)

// InScript is a {} that stands inside the script that a shell's -c runs
// (sh -c 'echo {}'), or that is that script (sh -c {}): the item would be
// read as shell code, so that whoever may add an item to the list could run
// any command on the worker's host. `sh -c '... "$1" ...' sh {}` passes the
// same item as data.
type InScript struct {
	// Shell is the shell's name as the command gives it, such as "bash".
	Shell string
	// Script is the script, as given, with its {}.
	Script string
}

// shells are the names of the shells whose -c runs its operand as a
// script: the POSIX shells and their kin, csh, and fish. busybox and env
// need no entry: a shell named after them (busybox sh -c, env sh -c) is
// found where it stands, as one behind any other wrapper (timeout, nice,
// sudo) is.
var shells = map[string]bool{
	"sh": true, "bash": true, "rbash": true, "dash": true, "ash": true, "zsh": true, "ksh": true, "ksh93": true,
	"mksh": true, "lksh": true, "pdksh": true, "oksh": true, "yash": true, "posh": true, "hush": true,
	"csh": true, "tcsh": true, "fish": true,
}

// shellLongArgOptions are the shells' long options that take the next
// argument as their value: bash's rc files, fish's init command.
var shellLongArgOptions = map[string]bool{"--rcfile": true, "--init-file": true, "--init-command": true}

// valueLetters are the one-letter options that take the next argument as
// their value, alone or in a bundle (-o pipefail, -euo pipefail): set -o's
// and shopt's names; and fish's, whose -C is its init command (elsewhere
// -C is noclobber, and takes none).
const (
	valueLetters     = "oO"
	fishValueLetters = "oOC"
)

// ItemInScript finds, in argv (the executable and its arguments, as w8y is
// given them), a shell run with -c whose script holds the placeholder. It
// looks at every argument, not only the executable, so that a shell started
// through env, busybox, timeout or sudo is found too. It returns nil when
// the item reaches every shell as data: as an argument of its own, or in
// W8Y_ITEM.
func ItemInScript(argv []string) *InScript {
	for i, arg := range argv {
		if !shells[filepath.Base(arg)] {
			continue
		}
		if script, ok := shellScript(filepath.Base(arg), argv[i+1:]); ok && strings.Contains(script, placeholder) {
			return &InScript{Shell: filepath.Base(arg), Script: script}
		}
	}
	return nil
}

// shellScript reads a shell's arguments as POSIX sh reads them
// (sh -c [options] script [name [args...]]): whether -c is given, alone or
// in a bundle of one-letter options (-ec, -xc), or as fish's --command, and
// the script, the first operand after the options.
func shellScript(shell string, args []string) (script string, ok bool) {
	letters := valueLetters
	if shell == "fish" {
		letters = fishValueLetters
	}
	command := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			return operand(args[i+1:], command)
		case strings.HasPrefix(arg, "--command="):
			return strings.TrimPrefix(arg, "--command="), true
		case arg == "--command":
			return operand(args[i+1:], true)
		case shellLongArgOptions[arg]:
			i++
		case strings.HasPrefix(arg, "--"):
			// bash's and zsh's other long options (--norc, --login) take
			// no value.
		case len(arg) > 1 && (arg[0] == '-' || arg[0] == '+'):
			if arg[0] == '-' && strings.ContainsRune(arg[1:], 'c') {
				command = true
			}
			for _, letter := range arg[1:] {
				if strings.ContainsRune(letters, letter) {
					i++
				}
			}
		default:
			return operand(args[i:], command)
		}
	}
	return "", false
}

// operand is the script of a shell with -c (command): the first of args.
func operand(args []string, command bool) (string, bool) {
	if !command || len(args) == 0 {
		return "", false
	}
	return args[0], true
}
