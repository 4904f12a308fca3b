package proc

import (
	"io"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Terminal is the controlling terminal that w8y lends each child while it
// runs, so that a child in its own process group can still read it and gets
// the keys that signal the foreground (Ctrl-C, Ctrl-\, Ctrl-Z). Its zero
// value is no terminal.
//
// w8y lends it only while its own process group is the terminal's
// foreground, which it checks at each lending: a w8y started in the
// background, or sent there (Ctrl-Z, then bg), leaves the terminal to whoever
// holds it, as a background job must.
type Terminal struct {
	fd int
	// lends is set when the file is a terminal that w8y may lend.
	lends bool
}

// TerminalOf returns the terminal that f (w8y's stdin) is, which w8y lends
// its children whenever it holds the foreground; otherwise a Terminal that
// lends nothing.
func TerminalOf(f *os.File) Terminal {
	if f == nil {
		return Terminal{}
	}
	fd := int(f.Fd())
	if _, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil {
		return Terminal{}
	}
	return Terminal{fd: fd, lends: true}
}

// Kept returns t for a w8y that keeps the terminal's foreground to itself:
// a terminal has one foreground process group and cannot be lent to
// several children at once (--parallel), so Ctrl-C then reaches w8y, which
// forwards it to every child's group.
func (t Terminal) Kept() Terminal {
	t.lends = false
	return t
}

// foreground returns the terminal's foreground process group, or 0.
func (t Terminal) foreground() int {
	if !t.lends {
		return 0
	}
	pgrp, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP)
	if err != nil {
		return 0
	}
	return pgrp
}

// Owned reports whether t is a terminal that w8y lends and whose foreground
// is w8y's process group now.
func (t Terminal) Owned() bool {
	return t.lends && t.foreground() == syscall.Getpgrp()
}

// sysProcAttr puts the child in a new process group, which becomes the
// terminal's foreground group when w8y holds the foreground, and has the
// kernel SIGKILL the child if w8y dies first. It reports whether the child
// gets the terminal.
func (t Terminal) sysProcAttr() (*syscall.SysProcAttr, bool) {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	lent := t.Owned()
	if lent {
		attr.Foreground, attr.Ctty = true, t.fd
	}
	return attr, lent
}

// give makes pgid the terminal's foreground group. w8y calls it while it
// holds the foreground, or while a group it lent the terminal to holds it.
func (t Terminal) give(pgid int) error {
	// tcsetpgrp from a background group raises SIGTTOU unless the calling
	// thread blocks it, so block it on this thread alone; ignoring it for
	// the whole process would leak the ignored disposition into children.
	return withTTOUBlocked(func() error {
		return unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, pgid)
	})
}

// Reclaim makes w8y's process group the terminal's foreground again after
// the child in process group pgid, which it was lent to, has exited. A
// terminal that someone else holds by then (the shell, after Ctrl-Z and bg)
// is left to them.
func (t Terminal) Reclaim(pgid int) error {
	if t.foreground() != pgid {
		return nil
	}
	return t.give(syscall.Getpgrp())
}

// withTTOUBlocked calls fn on a thread that blocks SIGTTOU, so that what fn
// does to the terminal from a background process group is done rather than
// stopping all of w8y. Only that thread blocks it, for as long as fn runs:
// children inherit the mask of the thread that starts them.
func withTTOUBlocked(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	bits := uint(unsafe.Sizeof(set.Val[0]) * 8)
	sig := uint(unix.SIGTTOU) - 1
	set.Val[sig/bits] |= 1 << (sig % bits)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return err
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) //nolint:errcheck // restoring a mask we just read cannot fail
	return fn()
}

// TerminalWriter returns w for w8y's own lines, which go to a terminal: each
// write is made with SIGTTOU blocked. With `stty tostop`, a process in a
// background group that writes to its terminal is stopped by SIGTTOU; w8y
// stopped so would neither refresh its children's locks nor stop them
// (see StopJob for the stops w8y takes part in). Blocked, the write is
// made, as without tostop.
func TerminalWriter(w io.Writer) io.Writer { return ttyWriter{w} }

type ttyWriter struct{ w io.Writer }

func (t ttyWriter) Write(p []byte) (n int, err error) {
	blockErr := withTTOUBlocked(func() error {
		n, err = t.w.Write(p)
		return nil
	})
	if blockErr != nil {
		return t.w.Write(p)
	}
	return n, err
}
