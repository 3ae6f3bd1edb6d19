// Package outageproxy is a TCP proxy for tests that cuts connections to a
// real server to simulate an outage; not a fake server.
//
// Every byte goes to the upstream server and back unchanged, and the proxy
// speaks no protocol. Cut closes every proxied connection and makes the
// proxy close new ones as soon as it accepts them, as an outage would;
// Restore lets them through again. Freeze drops what the server sends while
// still forwarding what clients send, and HasSent checks what clients sent.
// Silent is a listener with no server behind it: it accepts and never
// answers.
package outageproxy

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards connections from Addr to the upstream server.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	down   bool
	frozen bool         // drop what the server sends
	sent   bytes.Buffer // everything the clients sent
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// New starts a proxy on a free port of 127.0.0.1 that forwards to upstream
// (host:port). It is closed, with every connection through it, when t ends.
func New(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port, to connect to instead of upstream.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection through the proxy and makes it close new ones
// at once, until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore ends a Cut or a Freeze: new connections go through again and
// what the server sends reaches the clients again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down, p.frozen = false, false
}

// Freeze drops everything the server sends from now on, until Restore;
// what clients send still reaches the server.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// HasSent reports whether a client has sent s through the proxy.
func (p *Proxy) HasSent(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Contains(p.sent.Bytes(), []byte(s))
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		if !p.track(c) {
			c.Close() // down: the client's handshake fails at once
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers c unless the proxy is down.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		p.untrack(client)
		return
	}
	if !p.track(up) { // cut while dialling
		p.untrack(client, up)
		return
	}
	done := make(chan struct{})
	go func() {
		p.pipe(up, client, false)
		p.untrack(client, up)
		close(done)
	}()
	p.pipe(client, up, true)
	p.untrack(client, up)
	<-done
}

// pipe copies src to dst, recording what clients send; bytes to the client
// are dropped while the proxy is frozen.
func (p *Proxy) pipe(dst, src net.Conn, toClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := toClient && p.frozen
			if !toClient {
				p.sent.Write(buf[:n])
			}
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Silent starts a listener on a free port of 127.0.0.1 that accepts TCP
// connections and never answers (what a client sees of a network partition
// or a hung server), and returns its host:port. What clients send is read
// and dropped, so their writes succeed. It is closed, with its connections,
// when t ends.
func Silent(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 32<<10)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
