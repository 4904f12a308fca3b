// Package output passes a child's stdout and stderr on to w8y's own as they
// come, byte for byte, and keeps the last bytes of each, for --keep-output:
// so that the item's state hash can say why a run failed without anyone
// finding the host that ran it.
//
// The child writes to pipes that w8y reads (and so sees pipes, not a
// terminal); each read is written on at once, unbuffered, before the next.
package output

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
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
	// Stdout and Stderr are the pipes' write ends, for the child.
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
// keeping the last keep bytes of each. A write to stdout or stderr that
// fails (its reader has gone) stops the passing on but not the copying, so
// that the child never blocks on a full pipe, and its tail is still kept.
func Start(stdout, stderr io.Writer, keep int) (*Capture, error) {
	c := &Capture{}
	for i, w := range []io.Writer{stdout, stderr} {
		if w == nil {
			w = io.Discard
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
func (s *stream) copy(w io.Writer) {
	defer close(s.done)
	buf := make([]byte, 32*1024)
	passing := true
	for {
		n, err := s.r.Read(buf)
		if n > 0 {
			if passing {
				if _, werr := w.Write(buf[:n]); werr != nil {
					passing = false
				}
			}
			_, _ = s.tail.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// Started closes w8y's copies of the write ends, once the child has its
// own: the pipes then end when the child and whatever it started with them
// have closed them.
func (c *Capture) Started() {
	for _, f := range []*os.File{c.Stdout, c.Stderr} {
		if f != nil {
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
		if err := s.r.SetReadDeadline(deadline); err != nil && !errors.Is(err, os.ErrClosed) {
			// Not pollable: closing ends the read instead.
			_ = s.r.Close()
		}
	}
	for _, s := range c.streams {
		<-s.done
		_ = s.r.Close()
	}
	return c.streams[0].tail.Bytes(), c.streams[1].tail.Bytes()
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
