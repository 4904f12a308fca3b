// Package proc supervises the processes that w8y starts for its items, the
// way init systems and timeout(1) do on Linux: each child in a process group
// of its own, with one goroutine that owns its Wait; stopped as a group
// (SIGTERM, a grace, SIGKILL); killed by the kernel if w8y dies first
// (the parent-death signal), and with everything it started killed by a
// guard process if w8y dies without saying goodbye, and stopped by the same
// guard if its lease runs out while w8y is stopped (see Deadline); lent the
// terminal's foreground and given it back; and orphans reaped when w8y is
// PID 1 or a subreaper. It also knows how to find an executable as execvp
// does (and a script's #! interpreter), how much execve accepts, and how to
// find processes in /proc.
//
// It is Linux-only, and says so at compile time (see unsupported.go).
package proc
