package proc

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Terminal is the controlling terminal that w8y hands to each child, so that
// a child in its own process group can still read it and receive Ctrl-C.
// Its zero value is no terminal.
type Terminal struct {
	fd int
	// foreground is set when the file is a terminal whose foreground process
	// group is w8y's: then w8y may lend it to the child.
	foreground bool
}

// TerminalOf returns the terminal that f (w8y's stdin) is, when w8y is in
// its foreground; otherwise a Terminal that lends nothing.
func TerminalOf(f *os.File) Terminal {
	if f == nil {
		return Terminal{}
	}
	fd := int(f.Fd())
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return Terminal{fd: fd}
	}
	return Terminal{fd: fd, foreground: pgrp == syscall.Getpgrp()}
}

// Kept returns t for a w8y that keeps the terminal's foreground to itself:
// a terminal has one foreground process group and cannot be lent to
// several children at once (--parallel), so Ctrl-C then reaches w8y, which
// forwards it to every child's group.
func (t Terminal) Kept() Terminal {
	t.foreground = false
	return t
}

// sysProcAttr puts the child in a new process group, which becomes the
// terminal's foreground group when w8y held the foreground, and has the
// kernel SIGKILL the child if w8y dies first.
func (t Terminal) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if t.foreground {
		attr.Foreground, attr.Ctty = true, t.fd
	}
	return attr
}

// Reclaim makes w8y's process group the terminal's foreground again after a
// child that held it has exited.
func (t Terminal) Reclaim() error {
	if !t.foreground {
		return nil
	}
	// tcsetpgrp from a background group raises SIGTTOU unless the calling
	// thread blocks it, so block it on this thread alone; ignoring it for
	// the whole process would leak the ignored disposition into children.
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
	return unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, syscall.Getpgrp())
}
