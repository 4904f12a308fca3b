package proc

import "syscall"

const (
	// MaxArgStrlen is Linux's MAX_ARG_STRLEN: the longest single argument or
	// environment string that execve accepts, its closing NUL included.
	MaxArgStrlen = 32 * 4096
	// minArgMax is the least room execve gives all argument and environment
	// strings together, however low the stack limit (the kernel's ARG_MAX).
	minArgMax = 32 * 4096
	// maxArgMax caps that room whatever the stack limit: three quarters of
	// the kernel's 8 MiB _STK_LIM.
	maxArgMax = 8 << 20 / 4 * 3
	// ArgSlack is kept free below the computed room for what the sum leaves
	// out (alignment, the auxiliary vector, the Spawner's marker, which is
	// at most a host name and two numbers long), so that a value that
	// passes the check is never refused by execve.
	ArgSlack = 4096
)

// ArgMax is the room execve gives argument and environment strings and their
// pointers together: a quarter of the stack limit, within the kernel's bounds.
func ArgMax() int {
	var rlim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &rlim); err != nil {
		return minArgMax
	}
	return int(max(min(rlim.Cur/4, maxArgMax), minArgMax))
}

// ExecString is one string that execve copies, an argument or an
// environment entry, when a value is substituted into it: Fixed bytes of
// its own and Copies copies of the value.
type ExecString struct {
	Fixed, Copies int
}

// MaxValueLen is the longest value that can be substituted into strs, the
// strings of one execve of path, given room bytes for them all (ArgMax):
// execve fails with E2BIG when one string is longer than MaxArgStrlen or
// all of them overflow room.
func MaxValueLen(path string, strs []ExecString, room int) int {
	longest := MaxArgStrlen - 1
	fixed, copies := 0, 0
	for _, s := range strs {
		fixed += s.Fixed + 1
		copies += s.Copies
		if s.Copies > 0 {
			longest = min(longest, (MaxArgStrlen-1-s.Fixed)/s.Copies)
		}
	}
	if copies == 0 {
		return longest
	}
	// The kernel also copies the filename, and counts a pointer per string
	// plus the two closing NULL pointers.
	const pointer = 8
	left := room - fixed - (len(path) + 1) - (len(strs)+2)*pointer - ArgSlack
	return max(min(longest, left/copies), 0)
}
