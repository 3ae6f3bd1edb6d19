package ctxio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Dialer makes TCP connections bounded in time, for the clients of stores,
// databases, keepers and brokers: a connection attempt fails after Connect,
// and a connection whose reads and writes make no progress for Stall fails
// its pending Read or Write with a *StallError. That is what a network
// partition, or a server that accepts and never answers, looks like: no
// error, only silence, which without a bound blocks a call forever.
//
// Progress in either direction re-arms the watchdog for both, so a client
// waiting for a response after writing its request has Stall from its last
// write, and an upload or download has Stall from its last bytes. A
// deadline the client sets itself (SetDeadline and its kin) is kept, and
// its expiry is reported as the client expects, not as a stall. An idle
// connection whose client keeps a Read pending (an HTTP keep-alive pool)
// is closed by the watchdog after Stall; set the pool's idle timeout below
// Stall so it closes such connections first.
type Dialer struct {
	// Connect bounds each connection attempt (DNS, TCP handshake). Zero
	// leaves it to ctx.
	Connect time.Duration
	// Stall is how long a connection may make no progress. Zero disables
	// the watchdog.
	Stall time.Duration
	// KeepAlive is the TCP keep-alive period (net.Dialer.KeepAlive).
	KeepAlive time.Duration
}

// DialContext connects to addr (host:port) on network ("tcp", "tcp4",
// "tcp6") as net.Dialer does, within d.Connect, and watches the connection
// for stalls. Its signature is http.Transport.DialContext's and
// pgconn.DialFunc's.
func (d Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: d.Connect, KeepAlive: d.KeepAlive}
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil || d.Stall <= 0 {
		return c, err
	}
	return &stallConn{Conn: c, stall: d.Stall, addr: addr}, nil
}

// Dial is DialContext without a context, for clients that take a
// func(network, addr string) (net.Conn, error) (amqp091's Config.Dial).
func (d Dialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

// StallError is the failure of a Read or Write on a connection that made
// no progress for After. It is a net.Error whose Timeout is true, and it
// wraps the *net.OpError of the expired deadline.
type StallError struct {
	Op    string // "read" or "write"
	Addr  string // the endpoint dialled, host:port
	After time.Duration
	Err   error
}

func (e *StallError) Error() string {
	return fmt.Sprintf("%s %s: no progress for %v", e.Op, e.Addr, e.After)
}
func (e *StallError) Unwrap() error   { return e.Err }
func (e *StallError) Timeout() bool   { return true }
func (e *StallError) Temporary() bool { return true }

// maxStallWrite splits large writes, so that each piece, not the whole
// buffer, must make progress within the stall timeout.
const maxStallWrite = 64 << 10

type stallConn struct {
	net.Conn
	stall time.Duration
	addr  string

	mu       sync.Mutex
	rdl, wdl time.Time // the client's own deadlines; zero: none
}

func (c *stallConn) Read(p []byte) (int, error) {
	own := c.arm()
	n, err := c.Conn.Read(p)
	return n, c.stalled("read", own.rdl, err)
}

func (c *stallConn) Write(p []byte) (int, error) {
	var written int
	for len(p) > 0 {
		chunk := p[:min(len(p), maxStallWrite)]
		own := c.arm()
		n, err := c.Conn.Write(chunk)
		written += n
		if err != nil {
			return written, c.stalled("write", own.wdl, err)
		}
		p = p[n:]
	}
	return written, nil
}

type deadlines struct{ rdl, wdl time.Time }

// arm sets both deadlines to Stall from now, or to the client's own when
// that is sooner, and returns the client's own.
func (c *stallConn) arm() deadlines {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := time.Now().Add(c.stall)
	_ = c.Conn.SetReadDeadline(sooner(c.rdl, next))
	_ = c.Conn.SetWriteDeadline(sooner(c.wdl, next))
	return deadlines{c.rdl, c.wdl}
}

// stalled turns the expiry of the watchdog's deadline into a *StallError;
// the expiry of the client's own deadline is returned as it is.
func (c *stallConn) stalled(op string, own time.Time, err error) error {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if !own.IsZero() && !time.Now().Before(own) {
		return err
	}
	return &StallError{Op: op, Addr: c.addr, After: c.stall, Err: err}
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl, c.wdl = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func sooner(own, next time.Time) time.Time {
	if !own.IsZero() && own.Before(next) {
		return own
	}
	return next
}
