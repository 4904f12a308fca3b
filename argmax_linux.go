package main

import (
	"strings"
	"syscall"
)

const (
	// maxArgStrlen is Linux's MAX_ARG_STRLEN: the longest single argument or
	// environment string that execve accepts, its closing NUL included.
	maxArgStrlen = 32 * 4096
	// minArgMax is the least room execve gives all argument and environment
	// strings together, however low the stack limit (the kernel's ARG_MAX).
	minArgMax = 32 * 4096
	// maxArgMax caps that room whatever the stack limit: three quarters of
	// the kernel's 8 MiB _STK_LIM.
	maxArgMax = 8 << 20 / 4 * 3
	// argSlack is kept free below the computed room for what the sum leaves
	// out (alignment, the auxiliary vector, the W8Y_HOLDER variable, whose
	// token is at most a host name and two numbers long), so that an item
	// that passes the check is never refused by execve.
	argSlack = 4096
)

// argMax is the room execve gives argument and environment strings and their
// pointers together: a quarter of the stack limit, within the kernel's bounds.
func argMax() int {
	var rlim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &rlim); err != nil {
		return minArgMax
	}
	return int(max(min(rlim.Cur/4, maxArgMax), minArgMax))
}

// maxItemLen is the longest item that the child's arguments and environment
// can carry, given room bytes for them all (argMax): execve fails with E2BIG
// when one string is longer than maxArgStrlen or all of them overflow room.
// lockPrefix is the lock key of the empty item. An item over this length is
// skipped before its lock is taken, instead of failing after.
func (c Command) maxItemLen(lockPrefix string, room int) int {
	longest := maxArgStrlen - 1
	fixed, copies := 0, 0
	add := func(fixedLen, n int) {
		fixed += fixedLen + 1
		copies += n
		if n > 0 {
			longest = min(longest, (maxArgStrlen-1-fixedLen)/n)
		}
	}
	add(len(c.Path), 0) // argv[0]
	for _, arg := range c.Args {
		n := strings.Count(arg, placeholder)
		add(len(arg)-n*len(placeholder), n)
	}
	add(len("W8Y_ITEM="), 1)
	add(len("W8Y_LOCK_KEY=")+len(lockPrefix), 1)
	if c.EnvVar != "" {
		add(len(c.EnvVar)+1, 1)
	}
	for _, kv := range c.Environ {
		add(len(kv), 0)
	}
	// The kernel also copies the filename, and counts a pointer per string
	// plus the two closing NULL pointers.
	const pointer = 8
	count := 1 + len(c.Args) + len(c.Environ) + 3
	left := room - fixed - (len(c.Path) + 1) - (count+2)*pointer - argSlack
	return max(min(longest, left/copies), 0)
}
