package keepoutput

import (
	"bytes"
	crand "crypto/rand"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/proctest"
	"github.com/w8y/w8y/internal/redistest"
)

// TestTail: whatever the writes' sizes, a Tail holds the last bytes of
// everything written, up to its size.
func TestTail(t *testing.T) {
	for _, size := range []int{0, 1, 7, 64} {
		tail, all := NewTail(size), []byte{}
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		for i := range 200 {
			p := make([]byte, rng.IntN(3*size+2))
			for j := range p {
				p[j] = byte(i + j)
			}
			if n, err := tail.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			all = append(all, p...)
			want := all[max(len(all)-size, 0):]
			if got := tail.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("size %d after %d writes: %q, want %q", size, i+1, got, want)
			}
		}
	}
}

// TestCapture: what a writer puts in the pipes comes out on the other side
// byte for byte (binary, and more than a pipe holds), the tails are the
// last bytes of each, and each write is passed on before the next.
func TestCapture(t *testing.T) {
	var stdout bytes.Buffer
	var stderr redistest.SyncBuffer
	c, err := Start(&stdout, &stderr, 1000)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3<<20)
	if _, err := crand.Read(big); err != nil {
		t.Fatal(err)
	}
	out, errw := c.Stdout, c.Stderr
	written := make(chan error, 1)
	go func() {
		_, err := out.Write(big)
		out.Close()
		written <- err
	}()
	if _, err := errw.Write([]byte("first\x00\xff")); err != nil {
		t.Fatal(err)
	}
	// Unbuffered: the first write shows before the writer writes more.
	if !poll.Poll(poll.Timeout, func() bool { return stderr.String() == "first\x00\xff" }) {
		t.Fatalf("a write was not passed on at once: %q", stderr.String())
	}
	if _, err := errw.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	errw.Close()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	tailOut, tailErr := c.Finish(time.Now().Add(5 * time.Second))
	if !bytes.Equal(stdout.Bytes(), big) {
		t.Errorf("stdout passed on %d bytes, not the %d written", stdout.Len(), len(big))
	}
	if !bytes.Equal(tailOut, big[len(big)-1000:]) {
		t.Errorf("stdout's tail is not its last 1000 bytes")
	}
	if want := "first\x00\xffsecond"; stderr.String() != want || string(tailErr) != want {
		t.Errorf("stderr %q, tail %q; want %q", stderr.String(), tailErr, want)
	}
}

// TestCaptureHeldOpen: a process that keeps a pipe open past the child does
// not keep Finish waiting past its deadline.
func TestCaptureHeldOpen(t *testing.T) {
	c, err := Start(io.Discard, io.Discard, 10)
	if err != nil {
		t.Fatal(err)
	}
	held, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(c.Stdout.Fd())), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Write([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, _ := c.Finish(time.Now().Add(200 * time.Millisecond))
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Finish took %s", took)
	}
	if string(out) != "kept" {
		t.Errorf("tail %q", out)
	}
}

// TestCaptureReaderGone: the pipes pass a reader's going on to the child,
// as a shell's pipeline would: a stream whose reader has gone before the
// start is the child's as it is, so that its first write fails; and once
// a write finds the reader gone, the child's next write fails too. What
// came before is kept.
func TestCaptureReaderGone(t *testing.T) {
	before := proctest.ClosedPipe(t)
	c, err := Start(before, io.Discard, 100)
	if err != nil {
		t.Fatal(err)
	}
	if c.Stdout != before {
		t.Errorf("a stdout whose reader has gone is piped")
	}
	if _, err := c.Stdout.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("the child's write to a stdout without a reader: %v, want EPIPE", err)
	}
	if out, _ := c.Finish(time.Now()); len(out) != 0 {
		t.Errorf("kept %q of a stream never piped", out)
	}
	if _, err := before.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("Finish closed w8y's own stdout: %v", err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, err = Start(w, io.Discard, 100)
	if err != nil {
		t.Fatal(err)
	}
	child := c.Stdout
	if _, err := child.Write([]byte("read ")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "read " {
		t.Fatalf("passed on %q, %v", buf, err)
	}
	r.Close()
	var werr error
	if !poll.Poll(poll.Timeout, func() bool { _, werr = child.Write([]byte("more ")); return werr != nil }) || !errors.Is(werr, syscall.EPIPE) {
		t.Errorf("the child's writes once the reader went: %v, want EPIPE", werr)
	}
	if out, _ := c.Finish(time.Now()); !bytes.HasPrefix(out, []byte("read more ")) {
		t.Errorf("kept %q, want what came before the reader went", out)
	}
}
