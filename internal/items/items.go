// Package items knows what makes a work item one that w8y can hand to a
// child (not empty, no NUL byte, short enough for execve), and how w8y's
// messages show an item, which may be megabytes long, or other text that
// the user typed (on one line). Both the worker, which
// skips items it cannot run, and w8yctl, which refuses to add them, say so
// in the same words.
package items

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/w8y/w8y/internal/proc"
)

// Problem says why item cannot be handed to a child whose arguments and
// environment fit items of up to maxLen bytes, or returns "".
func Problem(item string, maxLen int) string {
	return ProblemOf(len(item), strings.IndexByte(item, 0) >= 0, maxLen)
}

// ProblemOf is Problem for an item of size bytes that holds a NUL byte or
// not. It checks the size first, so that internal/take's take.lua, which
// returns only the head of a skipped item, gets the same reason without
// sending the whole item.
func ProblemOf(size int, hasNUL bool, maxLen int) string {
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

// MaxLen is the longest item that any child could be given on this host,
// whatever its command: every child gets the item in W8Y_ITEM and its lock
// key (lockPrefix followed by the item) in W8Y_LOCK_KEY, in room bytes of
// arguments and environment (proc.ArgMax). A worker's own limit, which
// counts its command too, is lower.
func MaxLen(lockPrefix string, room int) int {
	return proc.MaxValueLen("", []proc.ExecString{
		{Fixed: len("W8Y_ITEM="), Copies: 1},
		{Fixed: len("W8Y_LOCK_KEY=") + len(lockPrefix), Copies: 1},
	}, room)
}

// ClipLen is how much of an item (or a key that holds one) a message shows:
// enough to find it with LRANGE, short enough that a megabyte item does not
// flood the log.
const ClipLen = 64

// Clip shortens item, or a key that holds one, for a message: every line of
// a run names its item and lock key, and a 10 kB item would fill each twice
// over. The child still gets the whole item.
func Clip(item string) string {
	return ClipHead(item[:min(len(item), ClipLen)], len(item))
}

// ClipHead is Clip for an item of size bytes of which only head, its first
// ClipLen bytes or fewer, is known.
func ClipHead(head string, size int) string {
	if size <= ClipLen {
		return head
	}
	return fmt.Sprintf("%s... (%d bytes)", head, size)
}

// OneLine writes the control characters of s, text that a message quotes
// from what the user typed (a flag or a URL pasted with its newline), as Go
// escapes them, so that the message stays one line.
func OneLine(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
