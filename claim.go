package claimcheck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Payload is a claimed payload: the handle a worker gets for a ticket. It
// does no I/O until opened, so a consumer that never opens the payload never
// downloads it. Close releases any verified copy held for it.
type Payload struct {
	store  *Store
	ticket *Ticket

	mu       sync.Mutex
	verified *spoolFile // set once the payload has been fetched and verified
	plain    []byte     // an inline payload's verified (decrypted) bytes
}

// Claim validates a ticket against this store and returns its payload,
// unopened. A ticket for another store, or whose key is not under its
// tenant's prefix, fails with ErrTicketInvalid before anything is fetched.
func (s *Store) Claim(t *Ticket) (*Payload, error) {
	if t == nil {
		return nil, fmt.Errorf("claimcheck: claim: nil ticket: %w", ErrTicketInvalid)
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	if !t.IsInline() && t.Store != s.name {
		return nil, fmt.Errorf("claimcheck: claim %s: ticket is for store %q, this is %q: %w", t, t.Store, s.name, ErrTicketInvalid)
	}
	if err := s.authorize(t); err != nil {
		return nil, err
	}
	return &Payload{store: s, ticket: t}, nil
}

// Ticket is the payload's ticket.
func (p *Payload) Ticket() *Ticket { return p.ticket }

// Size is the payload's size in bytes, from the ticket.
func (p *Payload) Size() int64 { return p.ticket.Size }

// Verify fetches the payload and checks its size and SHA-256 against the
// ticket, keeping the verified bytes in a temporary file under the spool
// directory (never in memory) until Close; an unencrypted object of a
// file:// store is verified where it lies and its file, held open, is the
// verified copy (no spool written). Calling it again is free.
//
// Errors: ErrPayloadMissing when the object does not exist; ErrPayloadCorrupt
// on a size or digest mismatch; ErrAccessDenied or ErrUnavailable for store
// failures (transient, never "missing").
func (p *Payload) Verify(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ticket.IsInline() {
		_, err := p.inlineBytes(ctx)
		return err
	}
	if p.verified != nil {
		return nil
	}
	// An unencrypted object of a file:// store is verified where it lies,
	// and read from there: no copy (filestore.go).
	if f, ok, err := p.verifyFile(ctx); err != nil {
		return err
	} else if ok {
		p.verified = &spoolFile{f}
		return nil
	}
	spool, err := p.store.createSpool()
	if err != nil {
		return err
	}
	if err := p.spoolVerified(ctx, spool); err != nil {
		spool.Close()
		if !errors.Is(err, ErrPayloadCorrupt) && ctx.Err() != nil {
			return fmt.Errorf("claimcheck: claim %s: %w: %w", p.ticket, ErrUnavailable, ctx.Err())
		}
		return err
	}
	p.verified = spool
	return nil
}

// spoolVerified streams the object into spool, verifying it: its reads
// (and decryption) run ahead in a goroutine of their own (aheadReader)
// while this one hashes each buffer and writes it to the spool, while it
// is still in this core's cache (a third goroutine writing the spool took
// twice the kernel time for the same writes). The error is OpenStream's,
// or its reader's, or the spool's.
func (p *Payload) spoolVerified(ctx context.Context, spool *spoolFile) error {
	v, err := p.openStream(ctx, true)
	if err != nil {
		return err
	}
	defer v.Close()
	for err == nil {
		if err = ctx.Err(); err != nil {
			break
		}
		var b []byte
		b, err = v.next()
		var werr error
		if len(b) > 0 {
			_, werr = spool.Write(b)
		}
		v.ahead.release(b)
		if werr != nil {
			return werr
		}
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Open returns a reader over verified bytes: it calls Verify, so the caller
// never sees a byte that does not match the ticket. The reader is seekable
// (some formats, PDF among them, need it); each Open returns an independent
// reader. Errors as for Verify.
func (p *Payload) Open(ctx context.Context) (io.ReadSeekCloser, error) {
	if err := p.Verify(ctx); err != nil {
		return nil, err
	}
	if p.ticket.IsInline() {
		return nopSeekCloser{bytes.NewReader(p.plain)}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.verified == nil { // closed by another goroutine since Verify
		return nil, fmt.Errorf("claimcheck: claim %s: payload closed while opening: %w", p.ticket, ErrUnavailable)
	}
	return nopSeekCloser{io.NewSectionReader(p.verified, 0, p.ticket.Size)}, nil
}

// OpenStream returns a reader that streams the object without spooling it,
// for callers that opt in: bytes arrive before they are verified, and the
// reader returns ErrPayloadCorrupt instead of io.EOF if the size or SHA-256
// does not match (or as soon as more bytes arrive than the ticket's size).
// A caller must read to EOF before acting on what it read.
//
// Errors: ErrPayloadMissing, ErrAccessDenied, ErrUnavailable at open.
func (p *Payload) OpenStream(ctx context.Context) (io.ReadCloser, error) {
	if p.ticket.IsInline() {
		p.mu.Lock()
		b, err := p.inlineBytes(ctx)
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	v, err := p.openStream(ctx, false)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// openStream opens the object behind an offloaded payload's ticket for a
// verifying read (OpenStream, or Verify's spool when spooling). Its reads,
// and the decryption of an encrypted object, run ahead in a goroutine of
// their own (aheadReader), but for an OpenStream of a plain file:// object.
func (p *Payload) openStream(ctx context.Context, spooling bool) (*verifyingReader, error) {
	t := p.ticket
	s := p.store
	var wrapped, keyID string
	if s.seal != nil {
		// The wrapped data key is in the object's metadata: one HEAD first.
		attrs, err := s.bucket.Attributes(ctx, t.Key)
		if err != nil {
			return nil, s.claimError(ctx, "claimcheck: claim "+t.String(), t, err)
		}
		if wrapped, keyID = attrs.Metadata[metaDEK], attrs.Metadata[metaKEKID]; wrapped == "" {
			// The producer stored it plain (a library store opened without
			// Options.Keeper, or --keeper none): a configuration mismatch
			// between producer and worker, retried and reported, never a
			// corrupt payload.
			return nil, fmt.Errorf("claimcheck: claim %s: the payload was stored unencrypted and this worker requires encryption: "+
				"give the producer this worker's keeper (Options.Keeper and KeeperID, or --keeper; `claimcheck keys` prints it), "+
				"or run this worker without one (--keeper none): %w", t, ErrConfig)
		}
	}
	// Close cancels rctx: a read in flight in the goroutine returns, and r
	// is closed once it has (blob.Reader is not safe for concurrent use).
	rctx, cancel := context.WithCancel(ctx)
	r, err := s.bucket.NewReader(rctx, t.Key, nil)
	if err != nil {
		cancel()
		return nil, s.claimError(ctx, "claimcheck: claim "+t.String(), t, err)
	}
	v := &verifyingReader{r: r, cancel: cancel, t: t, sum: sha256.New()}
	var src io.Reader = r
	if s.seal == nil {
		// Only when the bytes do not match: is the object encrypted, so
		// that this store's missing keeper, not the payload, is at fault?
		v.sealed = func() (bool, string) {
			attrs, err := s.bucket.Attributes(ctx, t.Key)
			if err != nil || attrs.Metadata[metaDEK] == "" {
				return false, ""
			}
			return true, attrs.Metadata[metaKEKID]
		}
	}
	if wrapped != "" {
		ad := associatedData(t.Tenant, t.Key)
		aead, err := s.seal.openDataKey(ctx, wrapped, ad)
		if err != nil {
			r.Close()
			cancel()
			return nil, fmt.Errorf("claimcheck: claim %s: sealed under key id %s, this worker's keeper has key id %s: %w", t, KeyIDText(keyID), KeyIDText(s.seal.keyID), err)
		}
		tr := &trackingReader{r: r}
		dr, err := aead.NewDecryptingReader(tr, ad)
		if err != nil {
			r.Close()
			cancel()
			return nil, fmt.Errorf("claimcheck: claim %s: ciphertext header: %w", t, ErrPayloadCorrupt)
		}
		src, v.tracked = dr, tr
	}
	if !spooling && v.tracked == nil && s.fileRoot != "" {
		// A plain object of a file:// store: its reads are copies from
		// the page cache, cheaper than a copy out of a buffer read ahead.
		v.src = src
		return v, nil
	}
	// Reading (and decrypting) ahead, one goroutine, while the caller's
	// goroutine hashes what it reads: serially an unencrypted claim from
	// S3 left the connection idle while it hashed, and an encrypted one
	// ran at about 60-70% of an unencrypted one; in parallel at about
	// 90-100%.
	v.ahead = newAheadReader(src, aheadBuffers, fileBuf)
	return v, nil
}

// inlineBytes returns an inline payload's bytes, decrypted if sealed, after
// checking them against the ticket. Callers hold p.mu.
func (p *Payload) inlineBytes(ctx context.Context) ([]byte, error) {
	if p.plain != nil || p.ticket.Size == 0 && p.ticket.DEK == "" {
		return p.plain, verifyInline(p.ticket, p.plain)
	}
	t := p.ticket
	b := t.Inline
	if t.DEK != "" {
		if p.store.seal == nil {
			return nil, fmt.Errorf("claimcheck: claim %s: the payload is encrypted and this store has no keeper: %w", t, ErrConfig)
		}
		var err error
		b, err = p.store.seal.openInline(ctx, t.DEK, associatedData(t.Tenant, ""), t.Inline, t.Size)
		switch {
		case errors.Is(err, errInlineCiphertext):
			return nil, fmt.Errorf("claimcheck: claim %s: inline ciphertext does not decrypt: %w", t, ErrPayloadCorrupt)
		case err != nil:
			// An inline ticket does not record its key id (no field for it
			// in the ticket format): name this worker's.
			return nil, fmt.Errorf("claimcheck: claim %s: sealed inline, this worker's keeper has key id %s: %w", t, KeyIDText(p.store.seal.keyID), err)
		}
	}
	if err := verifyInline(t, b); err != nil {
		return nil, err
	}
	p.plain = b
	return b, nil
}

// Close releases the verified copy, if any: readers returned by Open fail
// after it. The payload can be opened again.
func (p *Payload) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.verified != nil {
		err := p.verified.Close()
		p.verified = nil
		return err
	}
	return nil
}

func verifyInline(t *Ticket, b []byte) error {
	sum := sha256.Sum256(b)
	if int64(len(b)) != t.Size || hex.EncodeToString(sum[:]) != t.SHA256 {
		return fmt.Errorf("claimcheck: claim %s: inline bytes do not match the ticket: %w", t, ErrPayloadCorrupt)
	}
	return nil
}

// verifyingReader hashes and counts what ahead (or src) yields (the
// object, or its decryption) and fails at EOF on a mismatch; r is the
// object, closed at the end.
type verifyingReader struct {
	r       io.ReadCloser
	cancel  context.CancelFunc    // of r's context; nil: none
	ahead   *aheadReader          // reads (and decrypts) r ahead; stopped on Close
	src     io.Reader             // without ahead: r, read in the caller's goroutine
	tracked *trackingReader       // the object under a decrypting reader, to classify errors
	sealed  func() (bool, string) // store without a keeper: reports an encrypted object and its key id
	t       *Ticket
	sum     interface {
		io.Writer
		Sum([]byte) []byte
	}
	n   int64
	err error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	var n int
	var err error
	if v.ahead != nil {
		n, err = v.ahead.Read(p)
	} else {
		n, err = v.src.Read(p)
	}
	return v.check(p[:n], err)
}

// next is Read without a copy: it returns the next buffer read ahead,
// checked, which the caller owns (and gives back: ahead.release) and
// err as Read's. Only with ahead.
func (v *verifyingReader) next() ([]byte, error) {
	if v.err != nil {
		return nil, v.err
	}
	b, err := v.ahead.next()
	n, err := v.check(b, err)
	return b[:n], err
}

// check hashes and counts p, just read with err, and returns what Read
// returns: on a size or digest mismatch ErrPayloadCorrupt (and no bytes
// past the ticket's size), at the end io.EOF, otherwise the read's error
// classified.
func (v *verifyingReader) check(p []byte, err error) (int, error) {
	n := len(p)
	v.n += int64(n)
	v.sum.Write(p)
	switch {
	case v.n > v.t.Size:
		v.err = v.mismatch(fmt.Errorf("claimcheck: claim %s: object is longer than the ticket's size: %w", v.t, ErrPayloadCorrupt))
		return 0, v.err
	case errors.Is(err, io.EOF):
		if v.n != v.t.Size {
			v.err = v.mismatch(fmt.Errorf("claimcheck: claim %s: object has %d bytes, ticket says %d: %w", v.t, v.n, v.t.Size, ErrPayloadCorrupt))
		} else if hex.EncodeToString(v.sum.Sum(nil)) != v.t.SHA256 {
			v.err = v.mismatch(fmt.Errorf("claimcheck: claim %s: sha256 mismatch: %w", v.t, ErrPayloadCorrupt))
		} else {
			v.err = io.EOF
		}
		return n, v.err
	case err != nil && v.tracked != nil && v.tracked.err == nil:
		// The object read fine, so the decryption failed: tampered bytes.
		v.err = fmt.Errorf("claimcheck: claim %s: ciphertext does not authenticate: %w", v.t, ErrPayloadCorrupt)
		return n, v.err
	case err != nil:
		v.err = storeError("claimcheck: claim "+v.t.String()+": read", err, true)
		return n, v.err
	}
	return n, nil
}

func (v *verifyingReader) Close() error {
	if v.cancel != nil {
		v.cancel() // a read of r in flight returns
	}
	if v.ahead != nil {
		v.ahead.stop() // and waits for the goroutine: r is not read concurrently
	}
	if v.err == nil {
		v.err = errClaimClosed // not what was read ahead
	}
	return v.r.Close()
}

// mismatch returns corrupt, the error for bytes that do not match the
// ticket, unless this store has no keeper and the object is encrypted: then
// the worker's configuration is wrong, not the payload, and the error is
// ErrConfig (retried, as for an encrypted inline ticket), never a dead letter.
func (v *verifyingReader) mismatch(corrupt error) error {
	if v.sealed != nil {
		if sealed, keyID := v.sealed(); sealed {
			return fmt.Errorf("claimcheck: claim %s: the payload is encrypted (key id %s) and this worker has no keeper: "+
				"open the store with that key (Options.Keeper and KeeperID, or --keeper; `claimcheck keys` on the producer prints it): %w", v.t, KeyIDText(keyID), ErrConfig)
		}
	}
	return corrupt
}

type nopSeekCloser struct{ io.ReadSeeker }

func (nopSeekCloser) Close() error { return nil }

// trackingReader remembers the first non-EOF error of the object read, so a
// decryption failure can be told from a store failure.
type trackingReader struct {
	r   io.Reader
	err error
}

func (t *trackingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && t.err == nil {
		t.err = err
	}
	return n, err
}

// aheadBuffers is how many fileBuf buffers a verified claim reads ahead
// into: one filled by its goroutine while the caller reads the other.
const aheadBuffers = 2

// aheadReader reads r in a goroutine of its own into a pool of buffers,
// handing them over filled (or at r's end or first error, with it), so
// that reading r (a connection, a decryption) overlaps with what its
// reader does with the bytes. Read copies out of the current buffer (no
// hand-off per small read); next hands the buffer itself over. Memory is
// the pool's buffers.
type aheadReader struct {
	free   chan []byte
	filled chan aheadChunk
	done   chan struct{} // closed by stop
	exited chan struct{} // closed when the goroutine returns
	once   sync.Once
	cur    []byte // Read: the unread part of buf
	buf    []byte // Read: the buffer being read, to give back
	err    error  // r's error, once its last buffer is read
}

type aheadChunk struct {
	b   []byte
	err error
}

// newAheadReader starts reading r into n buffers of size bytes.
func newAheadReader(r io.Reader, n, size int) *aheadReader {
	pool := make(chan []byte, n)
	for range n {
		pool <- make([]byte, size)
	}
	a := &aheadReader{free: pool, filled: make(chan aheadChunk, n), done: make(chan struct{}), exited: make(chan struct{})}
	go a.run(r)
	return a
}

func (a *aheadReader) run(r io.Reader) {
	defer close(a.exited)
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.done:
			return
		}
		n, err := 0, error(nil)
		for n < len(b) && err == nil {
			var k int
			k, err = r.Read(b[n:])
			n += k
		}
		select {
		case a.filled <- aheadChunk{b[:n], err}:
		case <-a.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// next returns the next buffer read, which the caller owns (and gives
// back to the pool), and r's error once it has none left (a buffer may
// come with it). After stop it returns errClaimClosed.
func (a *aheadReader) next() ([]byte, error) {
	if a.err != nil {
		return nil, a.err
	}
	select {
	case c := <-a.filled:
		if c.err != nil {
			a.err = c.err
		}
		return c.b, c.err
	case <-a.done:
		a.err = errClaimClosed
		return nil, a.err
	}
}

func (a *aheadReader) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.buf != nil {
			a.free <- a.buf // never blocks: the pool's own buffer
			a.buf = nil
		}
		if a.err != nil {
			return 0, a.err
		}
		b, err := a.next()
		a.cur, a.buf = b, b[:cap(b)]
		if cap(b) == 0 {
			a.buf = nil
		}
		if err != nil && len(b) == 0 {
			return 0, err
		}
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// release gives back to the pool a buffer that next returned (nil: none).
func (a *aheadReader) release(b []byte) {
	if cap(b) > 0 {
		a.free <- b[:cap(b)]
	}
}

// stop ends the goroutine at its next buffer and waits for it to return:
// the caller first makes a read of r in flight return (cancels its
// context).
func (a *aheadReader) stop() {
	a.once.Do(func() { close(a.done) })
	<-a.exited
}

// errClaimClosed is what reads return after Close.
var errClaimClosed = fmt.Errorf("claimcheck: claim: read after Close: %w", os.ErrClosed)
