package claimcheck

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gocloud.dev/blob"
)

// Payload is a claimed payload: the handle a worker gets for a ticket. It
// does no I/O until opened, so a consumer that never opens the payload never
// downloads it. Close releases any verified copy held for it.
type Payload struct {
	store  *Store
	ticket *Ticket

	mu       sync.Mutex
	verified verifiedCopy // set once the payload has been fetched and verified
	plain    []byte       // an inline payload's verified (decrypted) bytes
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
// ticket, keeping the verified bytes until Close: a payload of at most
// 1 MiB in memory (one pooled buffer), a larger one in a temporary file
// under the spool directory; an unencrypted object of a file:// store is
// verified where it lies and its file, held open, is the verified copy
// (nothing copied). Calling it again is free.
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
	v, err := p.openVerifying(ctx)
	if err != nil {
		return err
	}
	defer v.Close()
	var copied verifiedCopy
	var dst io.Writer
	if p.ticket.Size <= fileBuf {
		m := newMemCopy()
		copied, dst = m, m
	} else {
		spool, err := p.store.createSpool()
		if err != nil {
			return err
		}
		copied, dst = spool, spool
	}
	// One pass, nothing read back to verify it (copyVerified).
	if rerr, werr := copyVerified(ctx, v, dst); rerr != nil || werr != nil {
		copied.Close()
		return p.copyError(ctx, rerr, werr)
	}
	p.verified = copied
	return nil
}

// verifiedCopy holds a payload's verified bytes (Verify): a spoolFile, a
// file:// store's object file, or a memCopy.
type verifiedCopy interface {
	io.ReaderAt
	io.Closer
}

// copyVerified copies the object v reads (openVerifying) to dst in one
// pass, verified: v is read in the caller's goroutine, which counts the
// bytes against the ticket's size; each fileBuf piece is then hashed and
// written by copyAhead's writing goroutine, so that reading the next piece
// (from the network, or from the decrypting goroutine) overlaps hashing and
// writing the last; once all is written, the SHA-256 is checked against
// the ticket (ErrPayloadCorrupt, or ErrConfig for an encrypted object and
// a store without a keeper, as v's own check). dst holds every byte,
// verified or not, until the caller acts on the outcome. rerr is the
// object's or the verification's error, werr dst's.
func copyVerified(ctx context.Context, v *verifyingReader, dst io.Writer) (rerr, werr error) {
	v.sumLater = true
	h := sha256.New()
	if _, rerr, werr = copyAhead(ctx, hashThenWrite{h, dst}, v, nil); rerr == nil && werr == nil {
		rerr = v.checkSum(h.Sum(nil))
	}
	return rerr, werr
}

// hashThenWrite hashes each piece, then writes it to w.
type hashThenWrite struct {
	h hash.Hash
	w io.Writer
}

func (t hashThenWrite) Write(p []byte) (int, error) {
	t.h.Write(p)
	return t.w.Write(p)
}

// copyError is a verified copy's error (copyAhead): the object's or the
// verification's (rerr) before the destination's (werr, already a
// fileError from a spool), a cancelled context's as ErrUnavailable.
func (p *Payload) copyError(ctx context.Context, rerr, werr error) error {
	switch {
	case errors.Is(rerr, ErrPayloadCorrupt), errors.Is(rerr, ErrConfig):
		return rerr
	case ctx.Err() != nil:
		return fmt.Errorf("claimcheck: claim %s: %w: %w", p.ticket, ErrUnavailable, ctx.Err())
	case rerr != nil:
		return rerr
	}
	return werr
}

// WriteFile claims the payload into the file at path, verified, in one
// pass: the object is read once, in 1 MiB pieces, each hashed and written
// by a second goroutine while the next is read (copyVerified), into a file
// in path's directory
// that has no name while it is written (O_TMPFILE, where the file system
// allows it; else a hidden ".claimcheck-*.tmp" file); once its size and
// SHA-256 match the ticket it is fsynced, given a name and renamed over
// path, and the directory is fsynced. On any failure nothing is left at
// path (a file already there is left as it was) and no temporary file
// remains. The file's mode is 0600. Nothing is spooled: the verified copy
// Open reads is not made (one already made by Verify is copied from
// instead). The ticket's size is the file's, in bytes. Memory: two 1 MiB
// buffers (and, for an encrypted payload, the decryption's).
//
// Errors: as for Verify (ErrPayloadMissing, ErrPayloadCorrupt,
// ErrAccessDenied, ErrUnavailable); ErrConfig when path is a directory;
// ErrUnavailable for the destination file's failures (a full disk:
// ErrNoSpace), its path named.
func (p *Payload) WriteFile(ctx context.Context, path string) error {
	t := p.ticket
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("claimcheck: claim %s: write %s: it is a directory: %w", t, path, ErrConfig)
	}
	dir := filepath.Dir(path)
	f, named, err := createBeside(dir)
	if err != nil {
		return fileError(fmt.Sprintf("claimcheck: claim %s: write %s: create a file in its directory", t, path), err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			if named != "" {
				os.Remove(named)
			}
		}
	}()
	wf := &writebackFile{f: f}
	var src io.Reader
	var stream *verifyingReader
	p.mu.Lock()
	switch {
	case t.IsInline():
		b, err := p.inlineBytes(ctx)
		if err != nil {
			p.mu.Unlock()
			return err
		}
		src = bytes.NewReader(b)
	case p.verified != nil:
		src = io.NewSectionReader(p.verified, 0, t.Size)
	}
	p.mu.Unlock()
	var rerr, werr error
	if src == nil {
		if stream, err = p.openVerifying(ctx); err != nil {
			return err
		}
		defer func() {
			if stream != nil {
				stream.Close()
			}
		}()
		rerr, werr = copyVerified(ctx, stream, wf)
	} else { // verified already
		_, rerr, werr = copyAhead(ctx, wf, src, nil)
	}
	if werr != nil {
		werr = fileError(fmt.Sprintf("claimcheck: claim %s: write %s", t, path), werr)
	}
	if err := p.copyError(ctx, rerr, werr); err != nil {
		return err
	}
	if stream != nil {
		err := stream.Close()
		stream = nil
		if err != nil {
			return storeError("claimcheck: claim "+t.String()+": close", err, false)
		}
	}
	// Durable before the rename is relied on: a crash leaves the old
	// file or the whole new one, never a short one.
	if err := f.Sync(); err != nil {
		return fileError(fmt.Sprintf("claimcheck: claim %s: write %s: fsync", t, path), err)
	}
	if named == "" {
		if named, err = linkTemp(f, dir); err != nil {
			return fileError(fmt.Sprintf("claimcheck: claim %s: write %s: name the file", t, path), err)
		}
	}
	if err := f.Close(); err != nil {
		return fileError(fmt.Sprintf("claimcheck: claim %s: write %s: close", t, path), err)
	}
	if err := os.Rename(named, path); err != nil {
		return fileError(fmt.Sprintf("claimcheck: claim %s: write %s: rename into place", t, path), err)
	}
	done = true
	if err := syncPath(dir); err != nil {
		return fileError(fmt.Sprintf("claimcheck: claim %s: write %s: fsync its directory", t, path), err)
	}
	return nil
}

// createBeside creates the file WriteFile writes in dir: without a name
// (createAnon; named is "") where the file system allows it, so that a
// process that dies mid-claim leaves nothing; else a hidden temporary file
// (named is its path).
func createBeside(dir string) (f *os.File, named string, err error) {
	if f, err := createAnon(dir); err == nil {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, "", err
		}
		return f, "", nil
	}
	if f, err = os.CreateTemp(dir, ".claimcheck-*.tmp"); err != nil {
		return nil, "", err
	}
	return f, f.Name(), nil
}

// linkTemp names f, made by createAnon, with a fresh hidden name in dir,
// for a rename over the destination (a link never replaces a name).
func linkTemp(f *os.File, dir string) (string, error) {
	for range 10 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		name := filepath.Join(dir, ".claimcheck-"+hex.EncodeToString(b[:])+".tmp")
		err := linkAnon(f, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("link a temporary file: %w", os.ErrExist)
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
	t := p.ticket
	if t.IsInline() {
		p.mu.Lock()
		b, err := p.inlineBytes(ctx)
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	v, err := p.openVerifying(ctx)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// openVerifying is OpenStream for an object (not an inline ticket).
func (p *Payload) openVerifying(ctx context.Context) (*verifyingReader, error) {
	t := p.ticket
	s := p.store
	// Close cancels rctx when the decrypting goroutine is still in a read
	// of r: r is closed only once that read has returned (a blob.Reader is
	// not safe for concurrent use).
	rctx, cancel := context.WithCancel(ctx)
	var r *blob.Reader
	fail := func(err error) (*verifyingReader, error) {
		if r != nil {
			r.Close()
		}
		cancel()
		return nil, err
	}
	var wrapped, keyID string
	format := 1 // of the sealed object (sealFormat)
	if s.seal != nil {
		// The wrapped data key is in the object's metadata: that of the
		// read itself where the store's driver has it (ReaderMetadata),
		// else one request for the attributes first.
		var md map[string]string
		if rm, ok := s.hooks.(ReaderMetadata); ok {
			var err error
			if r, err = s.bucket.NewReader(rctx, t.Key, nil); err != nil {
				return fail(s.claimError(ctx, "claimcheck: claim "+t.String(), t, err))
			}
			md, _ = rm.ReaderMetadata(r.As)
		}
		if md == nil {
			attrs, err := s.bucket.Attributes(ctx, t.Key)
			if err != nil {
				return fail(s.claimError(ctx, "claimcheck: claim "+t.String(), t, err))
			}
			md = attrs.Metadata
		}
		if wrapped, keyID = md[metaDEK], md[metaKEKID]; wrapped == "" {
			// The producer stored it plain (a library store opened without
			// Options.Keeper, or --keeper none): a configuration mismatch
			// between producer and worker, retried and reported, never a
			// corrupt payload.
			return fail(fmt.Errorf("claimcheck: claim %s: the payload was stored unencrypted and this worker requires encryption: "+
				"give the producer this worker's keeper (Options.Keeper and KeeperID, or --keeper; `claimcheck keys` prints it), "+
				"or run this worker without one (--keeper none): %w", t, ErrConfig))
		}
		var err error
		if format, err = sealFormat(md); err != nil {
			return fail(fmt.Errorf("claimcheck: claim %s: %w", t, err))
		}
	}
	if r == nil {
		var err error
		if r, err = s.bucket.NewReader(rctx, t.Key, nil); err != nil {
			return fail(s.claimError(ctx, "claimcheck: claim "+t.String(), t, err))
		}
	}
	v := &verifyingReader{r: r, cancel: cancel, t: t, sum: sha256.New(), src: r}
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
		aead, err := s.seal.openDataKey(ctx, wrapped, associatedData(t.Tenant, t.Key))
		if err != nil {
			return fail(fmt.Errorf("claimcheck: claim %s: sealed under key id %s, this worker's keeper has key id %s: %w", t, KeyIDText(keyID), KeyIDText(s.seal.keyID), err))
		}
		tr := &trackingReader{r: r}
		dr, err := aead.NewDecryptingReader(tr, objectAD(format, t.Tenant, t.Key))
		if err != nil {
			return fail(fmt.Errorf("claimcheck: claim %s: ciphertext header: %w", t, ErrPayloadCorrupt))
		}
		ahead, done := decryptAhead(dr)
		// Callers read in small pieces (io.Copy: 32 KiB); a buffer of a
		// segment (1 MiB, or the payload's size if smaller: it is
		// allocated and zeroed per claim) turns those into one hand-off
		// per segment from the goroutine.
		v.src, v.tracked, v.ahead, v.aheadDone = bufio.NewReaderSize(ahead, int(min(1<<20, max(t.Size, 4096)))), tr, ahead, done
	}
	return v, nil
}

// inlineBytes returns an inline payload's bytes, decrypted if sealed, after
// checking them against the ticket: once per Payload (Verify, then Open,
// hash them once). Callers hold p.mu.
func (p *Payload) inlineBytes(ctx context.Context) ([]byte, error) {
	if p.plain != nil {
		return p.plain, nil // verified before it was kept (below); only readers of it are handed out
	}
	if p.ticket.Size == 0 && p.ticket.DEK == "" {
		return nil, verifyInline(p.ticket, nil)
	}
	t := p.ticket
	b := t.Inline
	if t.DEK != "" {
		if p.store.seal == nil {
			return nil, fmt.Errorf("claimcheck: claim %s: the payload is encrypted and this store has no keeper: %w", t, ErrConfig)
		}
		if have := p.store.seal.keyID; t.KID != have && strings.HasPrefix(t.KID, "local-") && strings.HasPrefix(have, "local-") {
			// The ticket names its key, and another local key cannot
			// unwrap it. (A KMS key may be named two ways, an alias and
			// its ARN: it is tried, and a failure names both ids.)
			return nil, fmt.Errorf("claimcheck: claim %s: sealed inline under key id %s, this worker's keeper has key id %s: give the worker the key the producer sealed with: %w",
				t, t.KID, have, ErrKeeper)
		}
		var err error
		b, err = p.store.seal.openInline(ctx, t.DEK, associatedData(t.Tenant, ""), t.Inline, t.Size)
		switch {
		case errors.Is(err, errInlineCiphertext):
			return nil, fmt.Errorf("claimcheck: claim %s: inline ciphertext does not decrypt: %w", t, ErrPayloadCorrupt)
		case err != nil:
			// A ticket sealed before "kid" was written does not name its
			// key: name this worker's.
			return nil, fmt.Errorf("claimcheck: claim %s: sealed inline under key id %s, this worker's keeper has key id %s: %w", t, KeyIDText(t.KID), KeyIDText(p.store.seal.keyID), err)
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

// verifyingReader hashes and counts what src yields (the object, or its
// decryption) and fails at EOF on a mismatch; r is the object, closed at
// the end.
type verifyingReader struct {
	r       io.ReadCloser
	cancel  context.CancelFunc // of r's context; nil: none (verifyFile's)
	src     io.Reader
	tracked *trackingReader // the object under a decrypting src, to classify errors
	ahead   *io.PipeReader  // the decrypting goroutine's output, closed on Close
	// aheadDone is closed when the decrypting goroutine has returned.
	aheadDone <-chan struct{}
	sealed    func() (bool, string) // store without a keeper: reports an encrypted object and its key id
	t         *Ticket
	sum       interface {
		io.Writer
		Sum([]byte) []byte
	}
	// sumLater: Read does not hash; the caller hashes what it returns
	// and calls checkSum after io.EOF (copyVerified).
	sumLater bool
	n        int64
	err      error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.src.Read(p)
	v.n += int64(n)
	if !v.sumLater {
		v.sum.Write(p[:n])
	}
	switch {
	case v.n > v.t.Size:
		v.err = v.mismatch(fmt.Errorf("claimcheck: claim %s: object is longer than the ticket's size: %w", v.t, ErrPayloadCorrupt))
		return 0, v.err
	case errors.Is(err, io.EOF):
		if v.n != v.t.Size {
			v.err = v.mismatch(fmt.Errorf("claimcheck: claim %s: object has %d bytes, ticket says %d: %w", v.t, v.n, v.t.Size, ErrPayloadCorrupt))
		} else if !v.sumLater {
			v.err = v.checkSum(v.sum.Sum(nil))
		}
		if v.err == nil {
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

// checkSum checks sum, the SHA-256 of every byte read, against the
// ticket's: the error is ErrPayloadCorrupt (or, through mismatch, ErrConfig).
func (v *verifyingReader) checkSum(sum []byte) error {
	if hex.EncodeToString(sum) != v.t.SHA256 {
		v.err = v.mismatch(fmt.Errorf("claimcheck: claim %s: sha256 mismatch: %w", v.t, ErrPayloadCorrupt))
		return v.err
	}
	return nil
}

// Close stops the stream: later reads fail with errClaimClosed (unless it
// had already ended), and an encrypted object's decrypting goroutine has
// returned before the object is closed, its read in flight cut by
// cancelling r's context if closing the pipe did not stop it. That
// cancellation, the stream's own doing, is not Close's error.
func (v *verifyingReader) Close() error {
	if v.err == nil {
		v.err = errClaimClosed
	}
	cancelled := false
	if v.ahead != nil {
		v.ahead.CloseWithError(errClaimClosed) // the goroutine's next write fails
		select {
		case <-v.aheadDone:
		default:
			v.cancel() // it is in a read of r: cut it
			cancelled = true
			<-v.aheadDone
		}
	}
	err := v.r.Close()
	if v.cancel != nil {
		v.cancel()
	}
	if cancelled && errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

var errClaimClosed = errors.New("claimcheck: claim closed")

// decryptAhead runs decryption in its own goroutine, one 1 MiB chunk (a
// ciphertext segment) ahead of the reader, so that decrypting and the
// verifying SHA-256 (and the caller's work) use two cores: serially they
// ran at about 60-70% of an unencrypted claim here, in parallel at about
// 90-100%. Errors pass through unchanged; memory is one chunk. done is
// closed when the goroutine returns.
func decryptAhead(dr io.Reader) (*io.PipeReader, <-chan struct{}) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := getFileBuf() // a pipe's Write returns once the reader has copied every byte
		_, err := io.CopyBuffer(pw, dr, buf)
		putFileBuf(buf)
		pw.CloseWithError(err) // nil: the reader sees io.EOF
	}()
	return pr, done
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
