package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// PrintLine prints err as the one line on stderr that explains a failure
// of the command called name: "w8y: ...". A message of several lines is
// joined into one; an error that is a list of its own (the items that
// w8yctl add refuses, each with its reason) gets a line for each.
func PrintLine(stderr io.Writer, name string, err error) {
	var list interface{ Lines() []string }
	if errors.As(err, &list) {
		for _, line := range list.Lines() {
			fmt.Fprintf(stderr, "%s: %s\n", name, line)
		}
		return
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", " "))
}

// Fail prints err as PrintLine does and returns code, the exit code that
// the command gives err: for a command's failures before it could start.
func Fail(stderr io.Writer, name string, err error, code int) int {
	PrintLine(stderr, name, err)
	return code
}
