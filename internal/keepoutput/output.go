// Package keepoutput passes a child's stdout and stderr on to w8y's own as they
// come, byte for byte, and keeps the last bytes of each, for --keep-output:
// so that the item's state hash can say why a run failed without anyone
// finding the host that ran it.
//
// The child writes to pipes that w8y reads (and so sees pipes, not a
// terminal); each read is written on at once, unbuffered, before the next.
package keepoutput

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Max bounds how many bytes of each stream are kept: the tails travel in
// the finish's round trip and sit in the state hash, which --status reads.
// Dkron, which keeps output in memory, caps it at 256 KiB; a mebibyte is
// room for a long stack trace and still quick to write and read.
const Max = 1 << 20

// Tail is an io.Writer that keeps the last bytes written to it, up to its
// size, in a ring.
type Tail struct {
	buf []byte
	// next is where the next byte goes; full is set once buf has wrapped.
	next int
	full bool
}

// NewTail keeps the last size bytes written.
func NewTail(size int) *Tail { return &Tail{buf: make([]byte, size)} }

// Write keeps the end of p. It never fails.
func (t *Tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(t.buf) == 0 {
		return n, nil
	}
	if len(p) >= len(t.buf) {
		copy(t.buf, p[len(p)-len(t.buf):])
		t.next, t.full = 0, true
		return n, nil
	}
	copied := copy(t.buf[t.next:], p)
	if copied < len(p) {
		copy(t.buf, p[copied:])
		t.full = true
	}
	t.next = (t.next + len(p)) % len(t.buf)
	if t.next == 0 && len(p) > 0 {
		t.full = true
	}
	return n, nil
}

// Bytes returns the bytes kept, oldest first.
func (t *Tail) Bytes() []byte {
	if !t.full {
		return append([]byte(nil), t.buf[:t.next]...)
	}
	return append(append([]byte(nil), t.buf[t.next:]...), t.buf[:t.next]...)
}

// Capture is a child's stdout and stderr while it runs: give the child
// Stdout and Stderr, call Started once it runs, and Finish once it ended.
type Capture struct {
	// Stdout and Stderr are the pipes' write ends, for the child; or, for
	// a stream whose reader has gone already (see readerGone), w8y's own,
	// which the child then gets as it is.
	Stdout, Stderr *os.File
	streams        [2]*stream
}

// stream is one pipe that a goroutine copies from until EOF or Finish.
type stream struct {
	r    *os.File
	tail *Tail
	done chan struct{}
}

// Start makes the pipes and starts copying each to stdout and stderr,
// keeping the last keep bytes of each. The pipes are as transparent as
// they can be to a child that writes where nobody reads: a stream whose
// reader has gone before the child starts (w8y ... | true) is not piped at
// all, so that the child's first write there fails as it would without
// w8y (SIGPIPE, or EPIPE); and once a write to stdout or stderr finds its
// reader gone (w8y ... | head -1), the pipe's read end is closed, so that
// the child's next write there fails. Any other failed write stops the
// passing on but not the copying, so that the child never blocks on a full
// pipe, and its tail is still kept.
func Start(stdout, stderr io.Writer, keep int) (*Capture, error) {
	c := &Capture{}
	for i, w := range []io.Writer{stdout, stderr} {
		if w == nil {
			w = io.Discard
		}
		if f, ok := w.(*os.File); ok && readerGone(f) {
			if i == 0 {
				c.Stdout = f
			} else {
				c.Stderr = f
			}
			continue
		}
		r, pw, err := os.Pipe()
		if err != nil {
			c.close()
			return nil, fmt.Errorf("make a pipe for the child's output: %w", err)
		}
		if i == 0 {
			c.Stdout = pw
		} else {
			c.Stderr = pw
		}
		s := &stream{r: r, tail: NewTail(keep), done: make(chan struct{})}
		c.streams[i] = s
		go s.copy(w)
	}
	return c, nil
}

// copy reads until EOF or Finish's deadline, passing each read on at once.
// A reader of w gone (EPIPE) closes the pipe, so that the child's next
// write fails as it would without w8y.
func (s *stream) copy(w io.Writer) {
	defer close(s.done)
	buf := make([]byte, 32*1024)
	passing := true
	for {
		n, err := s.r.Read(buf)
		if n > 0 {
			_, _ = s.tail.Write(buf[:n])
			if passing {
				if _, werr := w.Write(buf[:n]); errors.Is(werr, syscall.EPIPE) {
					_ = s.r.Close()
					return
				} else if werr != nil {
					passing = false
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// readerGone reports whether f is a pipe, or a socket, whose reader has
// gone: poll says so (POLLERR) without writing a byte.
func readerGone(f *os.File) bool {
	conn, err := f.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = conn.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			gone = fds[0].Revents&unix.POLLERR != 0
		}
	})
	return gone
}

// Started closes w8y's copies of the write ends, once the child has its
// own: the pipes then end when the child and whatever it started with them
// have closed them. A stream that the child got as w8y's own stays open.
func (c *Capture) Started() {
	for i, f := range []*os.File{c.Stdout, c.Stderr} {
		if f != nil && c.streams[i] != nil {
			_ = f.Close()
		}
	}
}

// Finish waits until both pipes have ended, or until deadline for a
// process that holds one open past the child (one that left its group, or
// was not killed yet), and returns the tails of stdout and stderr. Call it
// once the child has exited and its group was stopped.
func (c *Capture) Finish(deadline time.Time) (stdout, stderr []byte) {
	c.Started()
	for _, s := range c.streams {
		if s == nil {
			continue
		}
		if err := s.r.SetReadDeadline(deadline); err != nil && !errors.Is(err, os.ErrClosed) {
			// Not pollable: closing ends the read instead.
			_ = s.r.Close()
		}
	}
	var tails [2][]byte
	for i, s := range c.streams {
		if s == nil {
			tails[i] = []byte{}
			continue
		}
		<-s.done
		_ = s.r.Close()
		tails[i] = s.tail.Bytes()
	}
	return tails[0], tails[1]
}

// close releases what Start made before it failed.
func (c *Capture) close() {
	c.Started()
	for _, s := range c.streams {
		if s != nil {
			_ = s.r.Close()
			<-s.done
		}
	}
}
