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
	group := strconv.Itoa(pgid)
	alive := false
	err := eachProcess(func(pid string) bool {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return true
		}
		// The fields after the parenthesised command name are the state,
		// the parent's pid and the process group.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			return true
		}
		fields := strings.Fields(string(stat[i+1:]))
		alive = len(fields) >= 3 && fields[2] == group && fields[0] != "Z"
		return !alive
	})
	// Without /proc, only kill's answer is left: someone is there.
	return alive || err != nil
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
