package proc

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Job control: a shell starts each command line as a job, a process group
// of its own, and a stop key (Ctrl-Z) stops the job that holds the terminal,
// so that the shell gets the terminal back; fg or bg continues it. w8y's
// children run in process groups of their own, which the terminal does not
// know belong to w8y's job, so w8y stops and continues them with itself.

// terminalStops are the signals with which a terminal stops a process
// group: its stop key (SIGTSTP), and a background group's read (SIGTTIN) or,
// with `stty tostop`, write (SIGTTOU).
var terminalStops = []syscall.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU}

// IsTerminalStop reports whether sig is one with which a terminal stops a
// process group (not SIGSTOP, which anyone may send).
func IsTerminalStop(sig syscall.Signal) bool {
	for _, s := range terminalStops {
		if sig == s {
			return true
		}
	}
	return false
}

// Orphaned reports whether w8y's process group is orphaned, as POSIX
// defines it: no member has a parent in another process group of the same
// session, which is what a job-control shell is to its jobs. No shell could
// continue such a group once stopped (w8y run by script(1), ssh -t, docker
// run -it, or as PID 1), which is why the kernel discards the terminal's stop
// signals for it; StopJob must not stop it either.
func Orphaned() bool { return orphaned(syscall.Getpgrp()) }

// StopJob stops w8y as a terminal stops a job, and returns once w8y has been
// continued (fg, bg, or SIGCONT from anyone). With whole, it stops w8y's
// whole process group, as the terminal would have had w8y kept its
// foreground: a script that runs w8y stops with it, and the shell sees its
// job stopped. Otherwise it stops w8y alone, when the terminal's stop key
// reached the rest of its group already. Check Orphaned first.
//
// It stops with SIGSTOP, which w8y cannot catch, so shells report the job
// as stopped by a signal.
func StopJob(whole bool) {
	target := os.Getpid()
	if whole {
		target = -syscall.Getpgrp()
	}
	// A signal that a process sends itself, unblocked, is delivered before
	// kill returns: this returns once w8y has been continued.
	_ = syscall.Kill(target, syscall.SIGSTOP)
}

// orphaned reports whether the process group pgrp is orphaned (see
// Orphaned).
func orphaned(pgrp int) bool {
	sid, err := unix.Getsid(0)
	if err != nil {
		return true
	}
	found := false
	_ = eachProcess(func(pid string) bool {
		st, ok := readStat(pid)
		if !ok || st.pgrp != pgrp {
			return true
		}
		parent, ok := readStat(strconv.Itoa(st.ppid))
		found = ok && parent.pgrp != pgrp && parent.session == sid
		return !found
	})
	return !found
}
