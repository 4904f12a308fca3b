package proc

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	alive := false
	err := eachProcess(func(pid string) bool {
		st, ok := readStat(pid)
		alive = ok && st.pgrp == pgid && st.state != "Z"
		return !alive
	})
	// Without /proc, only kill's answer is left: someone is there.
	return alive || err != nil
}

// stat is what /proc/<pid>/stat says of a process that w8y needs.
type stat struct {
	state               string
	ppid, pgrp, session int
}

// readStat reads /proc/<pid>/stat.
func readStat(pid string) (stat, bool) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return stat{}, false
	}
	// The fields after the parenthesised command name, which may hold
	// anything, are the state, the parent's pid, the process group and the
	// session.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return stat{}, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 4 {
		return stat{}, false
	}
	ppid, err1 := strconv.Atoi(fields[1])
	pgrp, err2 := strconv.Atoi(fields[2])
	session, err3 := strconv.Atoi(fields[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return stat{}, false
	}
	return stat{state: fields[0], ppid: ppid, pgrp: pgrp, session: session}, true
}

// ProcessesWithEnv lists the processes whose environment holds the entry
// kv, such as the marker that a Spawner gives every child: it finds what a
// child started even after it left the child's process group. Processes
// whose environment cannot be read (another user's) are passed over.
func ProcessesWithEnv(kv string) []int {
	var pids []int
	_ = eachProcess(func(pid string) bool {
		environ, err := os.ReadFile("/proc/" + pid + "/environ")
		if err == nil && slices.Contains(strings.Split(string(environ), "\x00"), kv) {
			n, _ := strconv.Atoi(pid)
			pids = append(pids, n)
		}
		return true
	})
	return pids
}

// eachProcess calls fn with the pid of every process in /proc, as text,
// until fn returns false. It fails only if /proc cannot be listed.
func eachProcess(fn func(pid string) bool) error {
	entries, err := os.ReadDir("/proc")
	for _, e := range entries {
		if name := e.Name(); name[0] >= '0' && name[0] <= '9' && !fn(name) {
			break
		}
	}
	return err
}
