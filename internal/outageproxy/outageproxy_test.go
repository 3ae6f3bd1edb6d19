package outageproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/outageproxy"
)

// echoServer is a plain TCP echo server on 127.0.0.1, closed when t ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo sends line through c and reports what came back within d.
func echo(c net.Conn, line string, d time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	return got, err
}

func mustEcho(t *testing.T, c net.Conn, line string) {
	t.Helper()
	got, err := echo(c, line, 2*time.Second)
	if err != nil || got != line+"\n" {
		t.Fatalf("echo %q through the proxy: %q, %v", line, got, err)
	}
}

// wantClosed fails unless the proxy has closed c: a read ends with EOF or a
// connection error, not a timeout.
func wantClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: read %d bytes, %v; want the connection closed", what, n, err)
	}
}

func TestCutAndRestore(t *testing.T) {
	p := outageproxy.New(t, echoServer(t))

	before := dial(t, p.Addr())
	mustEcho(t, before, "hello")

	p.Cut()
	wantClosed(t, before, "connection open when cut")
	during := dial(t, p.Addr()) // the listener stays; the proxy closes at once
	wantClosed(t, during, "connection made during the cut")

	p.Restore()
	after := dial(t, p.Addr())
	mustEcho(t, after, "again")
}

func TestFreezeAndHasSent(t *testing.T) {
	p := outageproxy.New(t, echoServer(t))
	c := dial(t, p.Addr())
	mustEcho(t, c, "warm")
	if !p.HasSent("warm") || p.HasSent("marker") {
		t.Fatalf("HasSent before the marker went out: warm %v, marker %v", p.HasSent("warm"), p.HasSent("marker"))
	}

	p.Freeze()
	got, err := echo(c, "marker", 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("echo while frozen: %q, %v; want nothing back", got, err)
	}
	if !p.HasSent("marker") {
		t.Fatal("HasSent(marker) false after the client sent it while frozen")
	}

	p.Restore()
	fresh := dial(t, p.Addr())
	mustEcho(t, fresh, "thawed")
}
