//go:build !linux

package proc

// w8y relies on Linux: process groups and the terminal's foreground group,
// the parent-death signal and child subreapers (prctl), waitid's WNOWAIT,
// and /proc. Elsewhere the build stops here with this sentence, rather than
// with a list of undefined names.
var _ int = "w8y runs on Linux only: it needs prctl, waitid and /proc"
