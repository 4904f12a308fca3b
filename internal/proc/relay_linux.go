package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// RelayArg, as w8y's first argument, makes the process a relay (see
// RunRelay). It is not an option: users never type it.
const RelayArg = "--w8y-relay"

// A relay is a small process (w8y itself, started with RelayArg) that w8y
// puts in the process group of a child that holds the terminal's
// foreground, so that w8y hears what the terminal's keys send that group:
// Ctrl-C (SIGINT) and Ctrl-\ (SIGQUIT). The child gets them as if it ran
// alone; w8y, in a background group then, would hear nothing, and could
// neither stop taking items on a Ctrl-C nor kill the group on a second, as
// it does when it holds the terminal itself. The relay tells w8y of each
// one on a pipe.
//
// It costs a process start per child, and only where w8y lends a child the
// terminal: an interactive run, never one from cron, systemd or a pod.
type relay struct {
	pid int
	// stdin is w8y's end of the relay's stdin: closing it asks the relay
	// to leave (see end).
	stdin *os.File
	// heard is closed once every report has been passed on and the relay
	// has exited.
	heard chan struct{}

	// mu guards echoes.
	mu sync.Mutex
	// echoes counts the signals that w8y itself sent the group and that
	// the relay will report too, so that they are not taken for the
	// terminal's.
	echoes map[syscall.Signal]int
}

// relayedSignals are the signals that a terminal's keys send its
// foreground group and that w8y must hear.
var relayedSignals = []os.Signal{syscall.SIGINT, syscall.SIGQUIT}

// relayDone is the signal that a relay sends each of its threads as it
// leaves (see leave). A childless process never gets SIGCHLD unless someone
// sends it on purpose, and Go's runtime lets none of its threads block it
// for long, whatever mask w8y was started with (SIGALRM, say, would stay
// blocked on every thread if w8y's parent had blocked it). Its number is
// above relayedSignals': of the signals that reach os/signal together, it
// hands on the lower-numbered first.
const relayDone = syscall.SIGCHLD

// startRelay starts a relay in the process group pgid, which must exist, or
// in a new one of its own for pgid 0, and returns once the relay hears
// signals. From a goroutine of its own, it passes each signal that the
// relay hears on to heard, until the relay ends.
func startRelay(reap *Reaper, pgid int, heard func(syscall.Signal)) (*relay, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer stdinR.Close()
	reportsR, reportsW, err := os.Pipe()
	if err != nil {
		stdinW.Close()
		return nil, err
	}
	defer reportsW.Close()
	cmd := &exec.Cmd{
		// Not os.Executable: /proc/self/exe still runs after the binary
		// was replaced or deleted by an upgrade.
		Path:   "/proc/self/exe",
		Args:   []string{"w8y-relay", RelayArg},
		Stdin:  stdinR,
		Stdout: reportsW,
		// No parent-death signal: if w8y dies, the relay's stdin ends, and
		// the guard kills the group it sits in.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pgid: pgid},
	}
	if err := reap.start(cmd); err != nil {
		stdinW.Close()
		reportsR.Close()
		return nil, err
	}
	r := &relay{pid: cmd.Process.Pid, stdin: stdinW, heard: make(chan struct{}), echoes: map[syscall.Signal]int{}}
	// The relay says it is ready with a first byte, once it catches the
	// signals it relays: before that, a SIGINT would end it unheard.
	if _, err := io.ReadFull(reportsR, make([]byte, 1)); err != nil {
		stdinW.Close()
		reportsR.Close()
		_ = cmd.Wait()
		reap.waited(r.pid)
		return nil, errors.New("w8y's relay did not start")
	}
	go func() {
		defer close(r.heard)
		defer reportsR.Close()
		report := make([]byte, 1)
		for {
			if _, err := reportsR.Read(report); err != nil {
				break
			}
			if sig := syscall.Signal(report[0]); !r.echo(sig) {
				heard(sig)
			}
		}
		_ = cmd.Wait()
		reap.waited(r.pid)
	}()
	return r, nil
}

// sent tells the relay's bookkeeping that w8y sent sig to the group.
func (r *relay) sent(sig syscall.Signal) {
	for _, s := range relayedSignals {
		if s == sig {
			r.mu.Lock()
			r.echoes[sig]++
			r.mu.Unlock()
		}
	}
}

// echo reports whether a report of sig is the echo of one that w8y sent.
// Two signals of one kind that reach the relay at the same instant arrive
// as one, so a Ctrl-C pressed in the very instant that w8y forwards a
// SIGINT is taken for the echo: the child got both all the same.
func (r *relay) echo(sig syscall.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.echoes[sig] == 0 {
		return false
	}
	r.echoes[sig]--
	return true
}

// end asks the relay to leave and returns once it has, with everything it
// heard before passed on: so whoever asks whether a stop came hears of one
// that reached the group before its child exited.
func (r *relay) end() {
	r.stdin.Close()
	<-r.heard
}

// RunRelay is the relay's side (see relay): it reports each SIGINT and
// SIGQUIT that reaches its process group as one byte, the signal's number,
// on stdout, ignores the other signals that w8y or the terminal send the
// group, and returns once stdin ends, with every such signal that reached
// the group before then reported (see leave).
func RunRelay() error {
	// The relay leaves when w8y asks or dies (stdin ends), or when its
	// group is killed (SIGKILL), not for what w8y forwards to the group.
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGPIPE)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, relayedSignals...)
	// A channel of its own, so that relayedSignals never crowd out the one
	// relayDone that leave waits for at a time.
	done := make(chan os.Signal, 1)
	signal.Notify(done, relayDone)
	if _, err := os.Stdout.Write([]byte{0}); err != nil {
		return errW8yGone
	}
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	for {
		select {
		case <-eof:
			return leave(sigs, done)
		case sig := <-sigs:
			if err := report(sig); err != nil {
				return err
			}
		}
	}
}

// errW8yGone is why a relay leaves when it cannot report.
var errW8yGone = errors.New("w8y is gone")

// report passes a relayed signal on to w8y.
func report(sig os.Signal) error {
	if _, err := os.Stdout.Write([]byte{byte(sig.(syscall.Signal))}); err != nil {
		return errW8yGone
	}
	return nil
}

// leave returns once every relayed signal that reached the relay's group
// before it was called has come out of sigs and been reported.
//
// kill(2) makes a signal pending on every process of the group before it
// returns, and w8y asks the relay to leave after that; so when leave is
// called, such a signal is either still pending on the relay, or taken by
// one of its threads, whose handler may not yet have handed it to os/signal
// (a thread can be preempted there for as long as the machine likes), or
// already on its way through sigs. One marker signal sent to the process
// would not do: another thread can take it and hand it over first.
//
// So leave first waits until none is pending any more: the kernel has a
// thread take a pending signal at once, and a signal taken after leave
// looked makes one come out of sigs, its cue to look again. Then it sends
// relayDone to each thread in turn and waits for it on done: Go's handler
// runs with every signal blocked on its thread, so a thread takes relayDone
// only after it has handed over the signal it took before, and os/signal
// puts that one in sigs before it puts relayDone in done. A thread that
// starts later took nothing before. The relay never locks a goroutine to
// its thread, so none of its threads ends before it does, taking a
// relayDone with it.
func leave(sigs, done <-chan os.Signal) error {
	for {
		pending, err := statusSigset("ShdPnd")
		if err != nil {
			return err
		}
		if !relayedIn(pending) {
			break
		}
		if err := report(<-sigs); err != nil {
			return err
		}
	}
	threads, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	// A relayDone that came before is someone else's.
	select {
	case <-done:
	default:
	}
	pid := os.Getpid()
	for _, thread := range threads {
		tid, err := strconv.Atoi(thread.Name())
		if err != nil {
			return fmt.Errorf("thread %q in /proc/self/task: %w", thread.Name(), err)
		}
		switch err := unix.Tgkill(pid, tid, relayDone); {
		case errors.Is(err, unix.ESRCH):
			// It ended, and so was in no handler.
			continue
		case err != nil:
			return fmt.Errorf("cannot signal thread %d: %w", tid, err)
		}
		<-done
		if err := reportQueued(sigs); err != nil {
			return err
		}
	}
	return nil
}

// reportQueued reports the signals already in sigs.
func reportQueued(sigs <-chan os.Signal) error {
	for {
		select {
		case sig := <-sigs:
			if err := report(sig); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// relayedIn reports whether the signal set mask (bit n-1 for signal n)
// holds one of relayedSignals.
func relayedIn(mask uint64) bool {
	for _, sig := range relayedSignals {
		if mask&(1<<(sig.(syscall.Signal)-1)) != 0 {
			return true
		}
	}
	return false
}
