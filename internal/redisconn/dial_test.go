package redisconn

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestTLSDialerDoesNotWaitTwice: against a server that never answers a TLS
// handshake, as a plain-text Redis does, the first dial waits out the
// timeout and names the likely cause; the retry that go-redis makes at once
// gets the same error without connecting again.
func TestTLSDialerDoesNotWaitTwice(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			// Read the ClientHello and say nothing, as Redis does with an
			// inline command that has no end of line yet.
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := conn.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()

	// The failure is remembered for a minute here, which leaves any
	// machine time for the second dial.
	dial := rememberingTLSDialer(&tls.Config{}, 300*time.Millisecond, time.Minute)
	addr := ln.Addr().String()
	_, first := dial(context.Background(), "tcp", addr)
	if first == nil || !strings.Contains(first.Error(), "the server seems to speak plain text") {
		t.Fatalf("first dial: %v, want the plain-text explanation", first)
	}
	_, second := dial(context.Background(), "tcp", addr)
	if second == nil || second.Error() != first.Error() {
		t.Fatalf("second dial: %v, want %v", second, first)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the server saw %d connections, want 1: the second dial connected again", n)
	}
}

// TestTLSDialerForgetsACallersDeadline: a dial cut short by the caller's
// deadline, not by the handshake timeout, says nothing about the server,
// and the next dial connects again.
func TestTLSDialerForgetsACallersDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- conn
		}
	}()
	dial := rememberingTLSDialer(&tls.Config{}, time.Minute, time.Minute)
	addr := ln.Addr().String()
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := dial(ctx, "tcp", addr)
		cancel()
		if err == nil {
			t.Fatalf("dial %d: connected to a server that never answers", i+1)
		}
		select {
		case conn := <-accepted:
			conn.Close()
		case <-time.After(10 * time.Second):
			t.Fatalf("dial %d did not connect: the caller's deadline was remembered as the server's silence", i+1)
		}
	}
}
