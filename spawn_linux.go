package main

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// signalGroup sends sig to every process in the process group pgid.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// groupAlive reports whether any process that is not a zombie is left in
// the process group pgid. Zombies count for kill(2), and an orphan's zombie
// lingers until init reaps it, so kill(-pgid, 0) alone would wait on the
// dead; /proc is read only when kill finds someone.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	group := strconv.Itoa(pgid)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the parenthesised command name are the state,
		// the parent's pid and the process group.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) >= 3 && fields[2] == group && fields[0] != "Z" {
			return true
		}
	}
	return false
}

// terminal is the controlling terminal that w8y hands to each child, so that
// a child in its own process group can still read it and receive Ctrl-C.
type terminal struct {
	fd int
	// foreground is set when stdin is a terminal whose foreground process
	// group is w8y's: then w8y may lend it to the child.
	foreground bool
}

// stdinTerminal returns the terminal on stdin if w8y is in its foreground.
func stdinTerminal() terminal {
	const fd = 0
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return terminal{fd: fd}
	}
	return terminal{fd: fd, foreground: pgrp == syscall.Getpgrp()}
}

// sysProcAttr puts the child in a new process group, which becomes the
// terminal's foreground group when w8y held the foreground, and has the
// kernel SIGKILL the child if w8y dies first.
func (t terminal) sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if t.foreground {
		attr.Foreground, attr.Ctty = true, t.fd
	}
	return attr
}

// reclaim makes w8y's process group the terminal's foreground again after a
// child that held it has exited.
func (t terminal) reclaim() error {
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
