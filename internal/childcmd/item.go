package childcmd

import (
	"fmt"
	"strings"

	"github.com/w8y/w8y/internal/proc"
)

// What makes a work item one that w8y can hand to a child: not empty, no
// NUL byte, short enough for execve. Both the worker, which skips items it
// cannot run, and w8yctl, which refuses to add them, say so in the same
// words.

// ItemProblem says why item cannot be handed to a child whose arguments and
// environment fit items of up to maxLen bytes, or returns "".
func ItemProblem(item string, maxLen int) string {
	return ItemProblemOf(len(item), strings.IndexByte(item, 0) >= 0, maxLen)
}

// ItemProblemOf is ItemProblem for an item of size bytes that holds a NUL byte or
// not. It checks the size first, so that internal/take's batch.lua, which
// returns only the head of a skipped item, gets the same reason without
// sending the whole item.
func ItemProblemOf(size int, hasNUL bool, maxLen int) string {
	switch {
	case size == 0:
		return "it is empty"
	case size > maxLen:
		return fmt.Sprintf("it is %d bytes long, and the command's arguments and environment fit at most %d", size, maxLen)
	case hasNUL:
		return "it holds a NUL byte, which cannot pass through argv or the environment"
	}
	return ""
}

// MaxItemLenAny is the longest item that any child could be given on this host,
// whatever its command: every child gets the item in W8Y_ITEM and its lock
// key (lockPrefix followed by the item) in W8Y_LOCK_KEY, in room bytes of
// arguments and environment (proc.ArgMax). A worker's own limit, which
// counts its command too (Command.MaxItemLen), is lower.
func MaxItemLenAny(lockPrefix string, room int) int {
	return proc.MaxValueLen("", []proc.ExecString{
		{Fixed: len("W8Y_ITEM="), Copies: 1},
		{Fixed: len("W8Y_LOCK_KEY=") + len(lockPrefix), Copies: 1},
	}, room)
}
