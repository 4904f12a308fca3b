package cli

import (
	"fmt"
	"io"
)

// PrintVersion prints --version: the command's name, and the version and
// commit that version reads from the build.
func PrintVersion(stdout io.Writer, name string, version func() (version, commit string)) {
	v, c := version()
	fmt.Fprintf(stdout, "%s %s (commit %s)\n", name, v, c)
}
