package ctxio

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReaderStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Reader(ctx, strings.NewReader("abcdef"))
	buf := make([]byte, 2)
	if n, err := r.Read(buf); n != 2 || err != nil || string(buf) != "ab" {
		t.Fatalf("before cancel: %d %v %q", n, err, buf)
	}
	cancel()
	if n, err := r.Read(buf); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %d %v, want 0 and context.Canceled", n, err)
	}
	if _, err := io.ReadAll(Reader(context.Background(), strings.NewReader("x"))); err != nil {
		t.Fatal(err)
	}
}

// silentServer accepts connections and never answers (a partitioned
// server, as the client sees it), or answers one byte every answerEvery.
// It reads what the client sends, so the client's writes succeed.
func silentServer(t *testing.T, answerEvery time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go io.Copy(io.Discard, c)
			if answerEvery > 0 {
				go func() {
					for {
						time.Sleep(answerEvery)
						if _, err := c.Write([]byte{'.'}); err != nil {
							return
						}
					}
				}()
			}
		}
	}()
	return ln.Addr().String()
}

func TestDialerStall(t *testing.T) {
	t.Parallel()
	addr := silentServer(t, 0)
	d := Dialer{Connect: time.Second, Stall: 300 * time.Millisecond}
	c, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Read(make([]byte, 10))
	elapsed := time.Since(start)
	var se *StallError
	if !errors.As(err, &se) || se.Op != "read" || se.Addr != addr || se.After != d.Stall {
		t.Fatalf("read from a silent server: %v, want a *StallError naming %s", err, addr)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%v: not a net.Error timeout wrapping os.ErrDeadlineExceeded", err)
	}
	if elapsed < d.Stall || elapsed > d.Stall+time.Second {
		t.Fatalf("stall reported after %v, want about %v", elapsed, d.Stall)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "no progress for 300ms") {
		t.Fatalf("message %q does not name the endpoint and the bound", err)
	}
}

func TestDialerProgressKeepsConnection(t *testing.T) {
	t.Parallel()
	addr := silentServer(t, 50*time.Millisecond) // one byte every 50 ms
	c, err := Dialer{Stall: 250 * time.Millisecond}.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("read with progress every 50 ms, stall 250 ms: %v", err)
		}
	}
}

func TestDialerKeepsCallersDeadline(t *testing.T) {
	t.Parallel()
	addr := silentServer(t, 0)
	c, err := Dialer{Stall: time.Hour}.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 1))
	var se *StallError
	if !errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &se) {
		t.Fatalf("read past the caller's own deadline: %v, want os.ErrDeadlineExceeded and no stall", err)
	}
}

func TestDialerConnectRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Dialer{Connect: time.Second, Stall: time.Second}.DialContext(context.Background(), "tcp", addr)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial a closed port: %v, want ECONNREFUSED", err)
	}
}
