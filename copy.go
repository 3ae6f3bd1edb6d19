package claimcheck

// The copy machinery check-ins and verified claims share on every store:
// fileBuf pieces from one pool, written by a goroutine of their own while
// the next piece is read (aheadWriter, copyAhead), and a payload of at most
// fileBuf kept in one of them (memCopy).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/claimcheck/claimcheck/internal/ctxio"
)

// fileBuf is the size of the pieces check-ins and verified claims read,
// hash and write, on every store (bytes).
const fileBuf = 1 << 20

// fileBufs keeps fileBuf buffers between check-ins and claims (getFileBuf,
// putFileBuf). A check-in of a stream takes three (spoolHashed's two, the
// upload's one) and a fourth while a payload of at most fileBuf is kept in
// memory (memCopy), and a verified claim two or three, and a fourth for a
// payload kept in memory: allocated anew, and zeroed, for each one, their
// allocation (before the memCopy) was 8%
// of the CPU of a workload of small offloaded payloads (bench workload
// --always-offload, PostgreSQL and S3, beside 14% of garbage collection),
// and all but 16 KiB of the 3,166,000 bytes a 100 KiB check-in and
// claim allocated (BenchmarkCheckInClaim/100KiB). TestCopyBuffersNotShared
// fails when a buffer goes back while still in use.
var fileBufs = sync.Pool{New: func() any { return new([fileBuf]byte) }}

// getFileBuf returns a buffer of fileBuf bytes, not zeroed.
func getFileBuf() []byte { return fileBufs.Get().(*[fileBuf]byte)[:] }

// putFileBuf gives b, from getFileBuf, back once nothing refers to it.
func putFileBuf(b []byte) {
	if cap(b) >= fileBuf {
		fileBufs.Put((*[fileBuf]byte)(b[:fileBuf]))
	}
}

// aheadWriter writes buffers to w in a goroutine of its own, up to
// len(free) of them queued: the caller fills the next buffer (reading,
// hashing, encrypting) while the previous one is written. Memory is
// len(free) fileBuf buffers, from fileBufs; close gives back those the
// caller has handed back too.
type aheadWriter struct {
	w      io.Writer
	free   chan []byte
	work   chan []byte
	done   chan struct{}
	failed atomic.Bool
	err    error // the first write error; read after done
	n      int64
}

func newAheadWriter(w io.Writer, buffers int) *aheadWriter {
	a := &aheadWriter{w: w, free: make(chan []byte, buffers), work: make(chan []byte, buffers), done: make(chan struct{})}
	for range buffers {
		a.free <- getFileBuf()
	}
	go func() {
		defer close(a.done)
		for p := range a.work {
			if a.err == nil {
				var n int
				n, a.err = a.w.Write(p)
				a.n += int64(n)
				if a.err != nil {
					a.failed.Store(true)
				}
			}
			a.free <- p[:cap(p)]
		}
	}()
	return a
}

// buffer returns a free buffer of the full size.
func (a *aheadWriter) buffer() []byte { return <-a.free }

// submit queues p (a buffer from buffer) for writing. It reports whether
// an earlier write failed: the error is then close's.
func (a *aheadWriter) submit(p []byte) bool {
	if a.failed.Load() {
		a.free <- p[:cap(p)]
		return false
	}
	a.work <- p
	return true
}

// Write copies p into buffers and queues them (for writers, such as an
// encrypting one, that hand over their own slices).
func (a *aheadWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		b := a.buffer()
		k := copy(b, p)
		if !a.submit(b[:k]) {
			return n, errAheadFailed
		}
		n, p = n+k, p[k:]
	}
	return n, nil
}

var errAheadFailed = errors.New("claimcheck: an earlier write failed")

// close waits for every queued write and returns the first error, and the
// bytes written. The buffers are given back to fileBufs: neither the
// writing goroutine (done) nor w (an io.Writer keeps no slice it was
// given) holds one any more, and the caller must not use one after close.
func (a *aheadWriter) close() (int64, error) {
	close(a.work)
	<-a.done
	for {
		select {
		case b := <-a.free:
			putFileBuf(b)
		default:
			return a.n, a.err
		}
	}
}

// copyAhead copies src to dst in one pass: src is read in fileBuf pieces in
// the caller's goroutine, each piece is handed to seen there (if not nil:
// spoolHashed hashes it and counts it against the size limit; an error
// stops the copy), and then written to dst (which may hash it instead:
// copyVerified) by a goroutine of its own (aheadWriter, two buffers,
// handed over without a copy), so reading the next piece overlaps writing
// the last. Memory: two fileBuf buffers. rerr is src's or seen's error
// (io.EOF is none), werr dst's first.
func copyAhead(ctx context.Context, dst io.Writer, src io.Reader, seen func([]byte) error) (n int64, rerr, werr error) {
	aw := newAheadWriter(dst, 2)
	r := ctxio.Reader(ctx, src)
	for {
		b := aw.buffer()
		k, err := io.ReadFull(r, b)
		if k > 0 && seen != nil {
			if rerr = seen(b[:k]); rerr != nil {
				aw.free <- b
				break
			}
		}
		if k > 0 {
			if !aw.submit(b[:k]) {
				break // a write failed: close reports it
			}
		} else {
			aw.free <- b
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	n, werr = aw.close()
	return n, rerr, werr
}

// memCopy holds at most fileBuf bytes in a buffer of the pool: a
// check-in's payload between hashing and storing it (checkInSpool) and a
// claim's verified copy (Verify). Close gives the buffer back; a read
// after it fails, and a read holds mu, so that no reader of an Open made
// before Close can see the bytes of the buffer's next user.
type memCopy struct {
	mu  sync.RWMutex
	buf []byte // nil once closed
	n   int
}

func newMemCopy() *memCopy { return &memCopy{buf: getFileBuf()} }

// fits reports whether k more bytes fit.
func (m *memCopy) fits(k int) bool { return k <= len(m.buf)-m.n }

// bytes is what was written, for the writer's own goroutine (no lock).
func (m *memCopy) bytes() []byte { return m.buf[:m.n] }

var errCopyClosed = errors.New("claimcheck: the verified copy was released (Payload.Close)")

// Write appends p. More than the buffer holds is refused: a claim's
// verifyingReader has refused more bytes than the ticket's size before,
// and a check-in asks fits first.
func (m *memCopy) Write(p []byte) (int, error) {
	if !m.fits(len(p)) {
		return 0, fmt.Errorf("claimcheck: more than %d bytes for a copy kept in memory: %w", len(m.buf), ErrPayloadCorrupt)
	}
	m.n += copy(m.buf[m.n:], p)
	return len(p), nil
}

func (m *memCopy) ReadAt(p []byte, off int64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.buf == nil {
		return 0, errCopyClosed
	}
	if off >= int64(m.n) {
		return 0, io.EOF
	}
	n := copy(p, m.buf[off:m.n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memCopy) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil {
		putFileBuf(m.buf)
		m.buf = nil
	}
	return nil
}
