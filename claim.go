package claimcheck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	return &Payload{store: s, ticket: t}, nil
}

// Ticket is the payload's ticket.
func (p *Payload) Ticket() *Ticket { return p.ticket }

// Size is the payload's size in bytes, from the ticket.
func (p *Payload) Size() int64 { return p.ticket.Size }

// Verify fetches the payload and checks its size and SHA-256 against the
// ticket, keeping the verified bytes in a temporary file under the spool
// directory (never in memory) until Close. Calling it again is free.
//
// Errors: ErrPayloadMissing when the object does not exist; ErrPayloadCorrupt
// on a size or digest mismatch; ErrAccessDenied or ErrUnavailable for store
// failures (transient, never "missing").
func (p *Payload) Verify(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ticket.IsInline() {
		return verifyInline(p.ticket)
	}
	if p.verified != nil {
		return nil
	}
	r, err := p.OpenStream(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	spool, err := p.store.createSpool()
	if err != nil {
		return err
	}
	if _, err := io.Copy(spool, contextReader{ctx, r}); err != nil {
		spool.Close()
		if !errors.Is(err, ErrPayloadCorrupt) && ctx.Err() != nil {
			return fmt.Errorf("claimcheck: claim %s: %w: %w", p.ticket, ErrUnavailable, ctx.Err())
		}
		return err
	}
	p.verified = spool
	return nil
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
		return nopSeekCloser{bytes.NewReader(p.ticket.Inline)}, nil
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
	t := p.ticket
	if t.IsInline() {
		if err := verifyInline(t); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(t.Inline)), nil
	}
	r, err := p.store.bucket.NewReader(ctx, t.Key, nil)
	if err != nil {
		return nil, storeError("claimcheck: claim "+t.String(), err, true)
	}
	return &verifyingReader{r: r, t: t, sum: sha256.New()}, nil
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

func verifyInline(t *Ticket) error {
	sum := sha256.Sum256(t.Inline)
	if int64(len(t.Inline)) != t.Size || hex.EncodeToString(sum[:]) != t.SHA256 {
		return fmt.Errorf("claimcheck: claim %s: inline bytes do not match the ticket: %w", t, ErrPayloadCorrupt)
	}
	return nil
}

type verifyingReader struct {
	r   io.ReadCloser
	t   *Ticket
	sum interface {
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
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.sum.Write(p[:n])
	switch {
	case v.n > v.t.Size:
		v.err = fmt.Errorf("claimcheck: claim %s: object is longer than the ticket's size: %w", v.t, ErrPayloadCorrupt)
		return 0, v.err
	case errors.Is(err, io.EOF):
		if v.n != v.t.Size {
			v.err = fmt.Errorf("claimcheck: claim %s: object has %d bytes, ticket says %d: %w", v.t, v.n, v.t.Size, ErrPayloadCorrupt)
		} else if hex.EncodeToString(v.sum.Sum(nil)) != v.t.SHA256 {
			v.err = fmt.Errorf("claimcheck: claim %s: sha256 mismatch: %w", v.t, ErrPayloadCorrupt)
		} else {
			v.err = io.EOF
		}
		return n, v.err
	case err != nil:
		v.err = storeError("claimcheck: claim "+v.t.String()+": read", err, true)
		return n, v.err
	}
	return n, nil
}

func (v *verifyingReader) Close() error { return v.r.Close() }

type nopSeekCloser struct{ io.ReadSeeker }

func (nopSeekCloser) Close() error { return nil }
