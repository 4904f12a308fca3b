// Package clip shows in w8y's messages an item, which may be megabytes
// long, or other text that the user typed, on one line and short enough
// not to flood a log.
package clip

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Len is how much of an item (or a key that holds one) a message shows:
// enough to find it with LRANGE, short enough that a megabyte item does not
// flood the log.
const Len = 64

// Item shortens item, or a key that holds one, for a message: every line of
// a run names its item and lock key, and a 10 kB item would fill each twice
// over. The child still gets the whole item.
func Item(item string) string {
	return Head(item[:min(len(item), Len)], len(item))
}

// Head is Item for an item of size bytes of which only head, its first
// Len bytes or fewer, is known.
func Head(head string, size int) string {
	if size <= Len {
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
