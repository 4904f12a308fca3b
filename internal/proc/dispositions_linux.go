package proc

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Ignored is the set of signals that a process ignores.
type Ignored uint64

// Has reports whether sig is in the set.
func (s Ignored) Has(sig syscall.Signal) bool {
	return sig > 0 && sig <= 64 && s&(1<<(sig-1)) != 0
}

// IgnoredNow returns the signals that w8y ignores, as the kernel sees them
// (SigIgn in /proc/self/status), or none if /proc cannot say.
//
// Read before w8y catches any signal, it tells which were ignored when w8y
// started (nohup, a shell's background job, a service manager), of those
// that Go's runtime left alone: SIGHUP and SIGINT when ignored, and the
// signals it never touches unless asked (SIGTSTP, SIGTTIN, SIGTTOU). The
// others it catches before main runs, and where they were ignored it does
// not say so; os/signal's Ignored knows only SIGHUP and SIGINT.
func IgnoredNow() Ignored {
	mask, err := statusSigset("SigIgn")
	if err != nil {
		return 0
	}
	return Ignored(mask)
}

// statusSigset reads one of the signal sets that /proc/self/status shows
// (SigIgn, ShdPnd, ...): bit n-1 stands for signal n.
func statusSigset(field string) (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if hex, ok := strings.CutPrefix(lines.Text(), field+":"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("%s in /proc/self/status: %w", field, err)
			}
			return mask, nil
		}
	}
	if err := lines.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}
