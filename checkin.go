package claimcheck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tink-crypto/tink-go/v2/tink"
	"go.opentelemetry.io/otel/metric"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck/internal/ctxio"
)

// Object metadata written with every payload, so a re-check-in can tell
// whether the object at a key already holds the same bytes without reading
// them, and operators can inspect an object's identity.
const (
	metaSHA256 = "claimcheck-sha256"
	metaSize   = "claimcheck-size"
	metaTenant = "claimcheck-tenant"
)

// CheckInOptions adjust one check-in. The zero value checks a payload in
// under its content address.
type CheckInOptions struct {
	// ContentType is the payload's media type, recorded in the ticket and on
	// the object. At most MaxContentTypeLen bytes.
	ContentType string
	// Name, when set, stores the payload under a stable business key
	// (payloads/<tenant>/named/<Name>[@<Version>]) instead of its content
	// address, however small (a named payload never travels inline): A-Z, a-z, 0-9, '-', '_', '.', and '/' between segments, at most
	// MaxNameLen bytes. Re-checking the same bytes in is a no-op; different
	// bytes under the same name and version fail with ErrKeyConflict.
	Name string
	// Version distinguishes payloads that legitimately change under one Name
	// (a reissued label). At most MaxVersionLen bytes, no '/'.
	Version string
	// Result stores the payload under the results prefix (results/).
	Result bool
	// Offload stores the payload as an object however small, as
	// Options.AlwaysOffload does for every check-in (a manifest's
	// documents are always objects: see CheckInManifest).
	Offload bool
	// Progress, if set, is called as bytes are read from the payload, with the
	// running total in bytes.
	Progress func(n int64)
	// BeforeStore, if set, is called once the payload has been read and its
	// key is known, and before anything is written at the key or an object
	// already there is reused: t has its Store, Key, Tenant, SHA256, Size and
	// Created set. An error from it fails the check-in with nothing stored
	// (pipeline.Pipeline.CheckIn records its check-in intent here). It is
	// not called for a payload that travels inline.
	BeforeStore func(ctx context.Context, t *Ticket) error
}

// CheckIn streams r into the store and returns its ticket. It reads r to
// EOF, computing size and SHA-256 on the way; memory does not grow with the
// payload (at most the inline threshold plus copy buffers are held).
//
// Payloads of at most the inline threshold travel inline in the ticket and
// touch no object. Larger ones are kept while hashed (the content address
// is known only at the end of the stream): in memory up to 1 MiB, in a
// temporary file beyond; then written to their key with a conditional
// create (a payload of at most 5 MiB without looking at the key first: a
// key found taken is then checked as it would have been); a file:// store writes
// them into the object's own file as it hashes them instead, encrypting
// them on the way if it encrypts (filestore.go). Otherwise, when r is a
// regular file (an *os.File), nothing is spooled: the file is read from
// its offset to its end to hash it (and take a CRC32C), then that byte
// range is read again to store it, checked against the CRC32C. r is left
// at its end either way. An object already at the key with the same
// digest and size is left as it is: a retried check-in writes nothing
// new. The object is durable (acknowledged by the store; fsynced with its
// directory on file://) before CheckIn returns, and a failed or cancelled
// check-in leaves no object at its final key.
//
// Errors: ErrTicketInvalid for a bad tenant, name, version or content type;
// ErrPayloadTooLarge past Options.MaxPayloadSize; ErrKeyConflict when a
// named key holds other bytes; ErrUnavailable or ErrAccessDenied from the
// store; the reader's own error, wrapped, if reading r fails;
// ErrPayloadCorrupt, saying the file changed while it was checked in, when
// r is a regular file whose bytes differ (or end early) the second time
// they are read: nothing is stored at the key.
func (s *Store) CheckIn(ctx context.Context, tenant string, r io.Reader, opts *CheckInOptions) (*Ticket, error) {
	return s.checkIn(ctx, tenant, r, opts, false)
}

// checkIn is CheckIn; manifest marks the ticket as a manifest's
// (CheckInManifest), before it is signed.
func (s *Store) checkIn(ctx context.Context, tenant string, r io.Reader, opts *CheckInOptions, manifest bool) (t *Ticket, err error) {
	role := "payload"
	if opts != nil && opts.Result {
		role = "result"
	}
	ctx, span := s.startSpan(ctx, "claimcheck.check_in", AttrTenant.String(tenant), AttrRole.String(role))
	start := time.Now()
	defer func() {
		// Enabled, IsRecording: no attribute set or list is built for a
		// meter or span that records nothing (the global no-ops; the sets
		// were a tenth of a small payload's check-in CPU).
		if s.tel.checkInDuration.Enabled(ctx) {
			s.tel.checkInDuration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(append(ErrorAttrs(err), AttrRole.String(role))...))
		}
		if err == nil {
			if span.IsRecording() {
				span.SetAttributes(ticketAttrs(t)...)
			}
			if s.tel.checkedIn.Enabled(ctx) {
				s.tel.checkedIn.Add(ctx, t.Size, metric.WithAttributes(AttrTenant.String(tenant), AttrPlacement.String(placementOf(t)), AttrRole.String(role)))
			}
		}
		endSpan(span, err)
	}()
	return s.checkInTicket(ctx, tenant, r, opts, manifest)
}

// headBuffer is an empty buffer for a check-in's first threshold+1 bytes
// (at most 1 MiB: a larger payload's head is only its first piece), from
// the store's pool; put it back with s.heads.Put once nothing holds its
// bytes (sealInline and spoolHashed copy them). One allocation of 64 KiB
// (a large object, zeroed) per small payload was a fifth of its check-in's
// CPU.
func (s *Store) headBuffer() *bytes.Buffer {
	if b, ok := s.heads.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	b := new(bytes.Buffer)
	if s.threshold >= 0 {
		b.Grow(int(min(s.threshold+1, 1<<20))) // one allocation, not doublings
	}
	return b
}

// placementOf is "inline" or "object".
func placementOf(t *Ticket) string {
	if t.IsInline() {
		return "inline"
	}
	return "object"
}

func (s *Store) checkInTicket(ctx context.Context, tenant string, r io.Reader, opts *CheckInOptions, manifest bool) (*Ticket, error) {
	if opts == nil {
		opts = &CheckInOptions{}
	}
	if err := ValidateTenant(tenant); err != nil {
		return nil, fmt.Errorf("claimcheck: check in: %v: %w", err, ErrTicketInvalid)
	}
	if err := validateContentType(opts.ContentType); err != nil {
		return nil, fmt.Errorf("claimcheck: check in tenant=%s: %v: %w", tenant, err, ErrTicketInvalid)
	}
	var key string
	if opts.Name != "" {
		k, err := namedKey(opts.Result, tenant, opts.Name, opts.Version)
		if err != nil {
			return nil, fmt.Errorf("claimcheck: check in tenant=%s: %v: %w", tenant, err, ErrTicketInvalid)
		}
		key = k
	} else if opts.Version != "" {
		return nil, fmt.Errorf("claimcheck: check in tenant=%s: a version needs a name: %w", tenant, ErrTicketInvalid)
	}

	h := newDigester(s.keys.tenantMAC(tenant))
	file, fileOff, fileSize, isFile := regularFile(r) // before anything is read: where the payload starts, its size (-1: not a file)
	src := &countingReader{r: r, progress: opts.Progress}
	t := &Ticket{Version: TicketVersion, Tenant: tenant, ContentType: opts.ContentType, Created: time.Now().UTC()}

	// Read up to threshold+1 bytes: if the stream ends within the threshold,
	// the payload travels inline.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("claimcheck: check in tenant=%s: %w: %w", tenant, ErrUnavailable, err)
	}
	head := s.headBuffer()
	defer s.heads.Put(head)
	if s.threshold >= 0 && key == "" && !opts.Offload { // a named payload is always stored under its name
		if _, err := io.CopyN(head, src, s.threshold+1); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("claimcheck: check in tenant=%s: read payload: %w", tenant, err)
		}
		if int64(head.Len()) <= s.threshold {
			if err := s.checkSize(int64(head.Len())); err != nil {
				return nil, err
			}
			h.Write(head.Bytes())
			t.SHA256, t.Size = h.sha256(), int64(head.Len())
			if err := s.sealInline(ctx, t, head.Bytes()); err != nil {
				return nil, err
			}
			if err := s.sign(t); err != nil {
				return nil, err
			}
			return t, nil
		}
	}

	// A file:// store writes the object itself (filestore.go), straight
	// into a temporary file of the store, renamed to its key once that is
	// known; an encrypted payload is encrypted into it as it is hashed
	// (format v2: seal.go).
	var objTemp *os.File   // the object's temporary file, when written in pass one
	var sealed *sealWriter // encrypting into objTemp (v2)
	var spool *checkInSpool
	tempDir, direct := "", false
	if key != "" {
		var path string
		if path, direct = s.filePath(key); direct {
			tempDir = filepath.Dir(path)
		}
	} else if path, ok := s.filePath(rolePrefix(opts.Result) + tenant + "/x"); ok {
		tempDir, direct = filepath.Dir(path), true
	}
	var dst io.Writer
	what := "spool file in data directory"
	var reread *rereadFile // the payload file, read again to store it
	if direct {
		f, err := s.createStoreTemp(tempDir)
		if err != nil {
			return nil, fmt.Errorf("claimcheck: check in tenant=%s: %w", tenant, err)
		}
		wf := &writebackFile{f: f}
		objTemp, dst, what = f, wf, "object file in the file store"
		defer func() { removeTemp(objTemp) }() // nil once committed or handed on
		if s.seal != nil {
			if sealed, err = s.seal.newSealWriter(wf, tenant, fileSize); err != nil {
				return nil, fmt.Errorf("claimcheck: check in tenant=%s: %w", tenant, err)
			}
			dst = sealed
		}
	} else if isFile {
		// A regular file needs no spool: it is read once to hash it (and
		// a CRC32C), then again to store it, checked against that CRC.
		reread = &rereadFile{f: file, off: fileOff, sum: crc32.New(castagnoli)}
		dst, what = reread.sum, "checksum"
	} else {
		spool = &checkInSpool{s: s, mem: newMemCopy()}
		defer spool.close()
		dst = spool
	}
	n, err := s.spoolHashed(ctx, tenant, dst, what, head.Bytes(), src, h)
	if err != nil {
		return nil, err
	}
	if sealed != nil {
		if err := sealed.close(); err != nil { // the final segment
			return nil, fmt.Errorf("claimcheck: check in tenant=%s: %w", tenant, fileError("claimcheck: write "+what, err))
		}
	}
	t.SHA256, t.Size = h.sha256(), n
	if reread != nil {
		reread.arm(n)
	}
	if key == "" {
		key = contentKey(opts.Result, tenant, h.keyDigest())
		if s.seal != nil {
			// Sealed objects are named by their key too: the same bytes
			// stored plain, or sealed under another key, are another object.
			key += "." + kekTag(s.seal.keyID)
		}
	}
	t.Store, t.Key, t.Manifest = s.name, key, manifest

	if opts.BeforeStore != nil {
		if err := opts.BeforeStore(ctx, t); err != nil {
			return nil, fmt.Errorf("claimcheck: check in %s: %w", t, err)
		}
	}
	if path, ok := s.filePath(key); ok && direct {
		f := objTemp
		objTemp = nil // putFile removes it unless it becomes the object
		if err := s.putFile(ctx, t, path, f, sealed); err != nil {
			return nil, err
		}
	} else {
		var body io.Reader
		if spool != nil {
			var err error
			if body, err = spool.reader(); err != nil {
				return nil, fmt.Errorf("claimcheck: check in %s: rewind spool: %v", t, pathErrNoName(err))
			}
		} else if reread != nil {
			body = reread
		} else { // written in the store and yet not to be renamed: copy it (sealed: as it is)
			if _, err := objTemp.Seek(0, io.SeekStart); err != nil {
				return nil, fileError("claimcheck: check in "+t.String()+": rewind", err)
			}
			body = objTemp
		}
		if err := s.put(ctx, t, body, sealed); err != nil {
			return nil, err
		}
	}
	if err := s.sign(t); err != nil {
		return nil, err
	}
	if _, err := t.Marshal(); err != nil { // budget guard: never hand out an oversized ticket
		return nil, err
	}
	return t, nil
}

// put writes the spooled payload to t.Key unless an object with the same
// digest and size is already there. body is the plaintext, sealed (v1) on
// the way when the store encrypts, or, when sealed is not nil, the v2
// ciphertext sealed wrote, stored as it is.
func (s *Store) put(ctx context.Context, t *Ticket, body io.Reader, sealed *sealWriter) error {
	if s.fileRoot != "" {
		mu := fileKeyLock(s.fileRoot, t.Key)
		mu.Lock()
		defer mu.Unlock()
	}
	// A payload written in one request is written without looking first
	// (lookFirst): its write asks that the key not exist (IfNotExist), and
	// a key that does is then looked at as below. That saves a round trip
	// per check-in at the cost of sending the bytes of a payload already
	// stored; a larger one, and a file store's (a local stat), looks first.
	looked := s.lookFirst(t)
	if looked {
		if reused, err := s.reuse(ctx, t); err != nil || reused {
			return err
		}
	}
	meta, aead, err := s.objectMeta(ctx, t, sealed)
	if err != nil {
		return err
	}
	var file *os.File
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, t.Key, &blob.WriterOptions{
		ContentType:                 t.ContentType,
		DisableContentTypeDetection: t.ContentType == "",
		IfNotExist:                  true,
		Metadata:                    meta,
		BeforeWrite: func(as func(any) bool) error {
			as(&file) // fileblob exposes its temporary *os.File
			if s.hooks == nil {
				return nil
			}
			// The store's driver: S3's checksums the server verifies,
			// bounded parts, aborted multipart uploads (stores/s3store).
			return s.hooks.BeforeWrite(as, Upload{Size: t.Size, SHA256: t.SHA256, Sealed: s.seal != nil})
		},
	})
	if err != nil {
		return storeError("claimcheck: check in "+t.String(), err, false)
	}
	// Plain reader and writer, so io.Copy cannot pick blob.Writer.ReadFrom:
	// one 1 MiB buffer (fewer hand-offs into the upload's pipe than 32 KiB
	// pieces). The reader stops once ctx is done,
	// so a cancelled check-in stops sending and its upload is aborted.
	var dst io.WriteCloser = nopWriteCloser{w}
	if aead != nil {
		if dst, err = aead.NewEncryptingWriter(w, associatedData(t.Tenant, t.Key)); err != nil {
			cancel()
			_ = w.Close()
			return fmt.Errorf("claimcheck: check in %s: seal: %w: %w", t, ErrUnavailable, err)
		}
	}
	buf := getFileBuf()
	_, err = io.CopyBuffer(struct{ io.Writer }{dst}, ctxio.Reader(ctx, body), buf)
	putFileBuf(buf) // neither writer keeps a slice it was given
	if err == nil {
		err = dst.Close() // the final ciphertext segment
	}
	if err != nil {
		cancel() // cancelling before Close commits nothing
		_ = w.Close()
		if errors.Is(err, errFileChanged) {
			return fmt.Errorf("claimcheck: check in %s: %w", t, err)
		}
		return storeError("claimcheck: check in "+t.String()+": write", err, false)
	}
	if file != nil && s.fileRoot != "" {
		// Durable before the rename is relied on (docs/invariants.md, invariant 1).
		if err := file.Sync(); err != nil {
			cancel()
			_ = w.Close()
			return fileError("claimcheck: check in "+t.String()+": fsync", err)
		}
	}
	if err := w.Close(); err != nil {
		if gcerrors.Code(err) == gcerrors.FailedPrecondition {
			if looked {
				// Lost a race with a concurrent check-in of the same key.
				if same, herr := s.holds(ctx, t); herr != nil || same {
					return herr
				}
				return fmt.Errorf("claimcheck: check in %s: %w", t, ErrKeyConflict)
			}
			// Stored before: reused as above. One gone by now (an
			// expiry since the refused write) is not written again here,
			// the body being spent: the check-in fails, transient.
			if reused, err := s.reuse(ctx, t); err != nil || reused {
				return err
			}
			return fmt.Errorf("claimcheck: check in %s: the stored copy of these bytes went while it was being reused: check in again: %w", t, ErrUnavailable)
		}
		return storeError("claimcheck: check in "+t.String()+": commit", err, false)
	}
	if file != nil && s.fileRoot != "" {
		if err := s.syncDirs(filepath.Dir(file.Name())); err != nil {
			return fileError("claimcheck: check in "+t.String()+": fsync directory", err)
		}
	}
	return nil
}

// oneRequestSize is the largest payload put writes without looking at its
// key first: 5 MiB, S3's smallest part (S3 PutObject and multipart upload
// limits; stores/s3store's multipart threshold is its part size, at least
// that), so that on S3 a key found taken costs at most one request's body.
const oneRequestSize = 5 << 20

// lookFirst reports whether put looks at t's key before writing it: for a
// file store (a stat of a local file), and for a payload larger than
// oneRequestSize. Otherwise the write's IfNotExist (If-None-Match: * on
// S3, a precondition on GCS and Azure) finds a key taken, which the
// store's driver must honour (stores/s3store).
func (s *Store) lookFirst(t *Ticket) bool {
	return s.fileRoot != "" || t.Size > oneRequestSize
}

// objectMeta is the metadata recorded on t's object and, when the store
// encrypts, its wrapped data key: sealed's (v2, the ciphertext already
// written, in a file nothing names yet), or a fresh one (v1), whose AEAD
// is returned to encrypt the object with. Either way the data key is
// wrapped before anything is stored at the key: if the keeper cannot,
// nothing is, in plaintext or otherwise.
func (s *Store) objectMeta(ctx context.Context, t *Ticket, sealed *sealWriter) (map[string]string, tink.StreamingAEAD, error) {
	meta := map[string]string{
		metaSHA256: t.SHA256,
		metaSize:   strconv.FormatInt(t.Size, 10),
		metaTenant: t.Tenant,
	}
	if s.seal == nil {
		return meta, nil, nil
	}
	var aead tink.StreamingAEAD
	var dek string
	var err error
	if sealed != nil {
		dek, err = s.seal.wrap(ctx, sealed.h, associatedData(t.Tenant, t.Key))
		meta[metaSeal] = sealV2
	} else {
		aead, dek, err = s.seal.newDataKey(ctx, associatedData(t.Tenant, t.Key), t.Size)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("claimcheck: check in %s%s: %w", t, s.seal.underKeyID(), err)
	}
	meta[metaDEK] = dek
	if s.seal.keyID != "" {
		meta[metaKEKID] = s.seal.keyID
	}
	return meta, aead, nil
}

// reuse reports whether the object at t.Key already holds t's payload
// (holds), its age then refreshed (refresh) so that expiry counts from
// this check-in. An object that went in between (a lifecycle expiry, or a
// store whose HEAD was stale) is not reused: a reused object must exist.
// Errors: holds' (ErrKeyConflict for other bytes) and refresh's.
func (s *Store) reuse(ctx context.Context, t *Ticket) (reused bool, err error) {
	if same, err := s.holds(ctx, t); err != nil || !same {
		return false, err
	}
	gone, err := s.refresh(ctx, t)
	return err == nil && !gone, err
}

// fileKeyLocks serialize writes of one key into a file:// store within this
// process. fileblob's IfNotExist is a stat before a rename, not an atomic
// create, so two check-ins of different bytes under one name could both
// commit and both get a ticket (TestCheckInNamedConcurrentConflict).
var fileKeyLocks [64]sync.Mutex

func fileKeyLock(root, key string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(root + "\x00" + key))
	return &fileKeyLocks[h.Sum32()%uint32(len(fileKeyLocks))]
}

// holds reports whether the object at t.Key already holds t's payload,
// judged by the digest and size recorded on it. Another object there is
// ErrKeyConflict.
func (s *Store) holds(ctx context.Context, t *Ticket) (bool, error) {
	attrs, err := s.bucket.Attributes(ctx, t.Key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return false, nil
	}
	if err != nil {
		return false, storeError("claimcheck: check in "+t.String()+": look up key", err, false)
	}
	if err := s.samePosture(ctx, t, attrs.Metadata); err != nil {
		return false, err
	}
	if attrs.Metadata[metaSHA256] == t.SHA256 && attrs.Metadata[metaSize] == strconv.FormatInt(t.Size, 10) {
		if s.hooks != nil {
			if err := s.hooks.CheckExisting(attrs); err != nil { // e.g. S3's server-side encryption
				return false, storeError("claimcheck: check in "+t.String(), err, false)
			}
		}
		return true, nil
	}
	return false, fmt.Errorf("claimcheck: check in %s: %w (add a version to the name)", t, ErrKeyConflict)
}

// samePosture returns nil when an object already at t.Key, with metadata
// meta, was stored with this store's encryption posture: plain for a store
// without a keeper, or sealed under this store's key (the same recorded key
// id or, when either id is unrecorded, a data key this keeper unwraps).
// Otherwise reusing it would hand out a ticket no worker of this
// deployment can claim: ErrKeyConflict naming both postures (a content
// address never gets here, its name carries the key's tag; a named key
// needs a version).
func (s *Store) samePosture(ctx context.Context, t *Ticket, meta map[string]string) error {
	sealed, have := meta[metaDEK] != "", meta[metaKEKID]
	switch {
	case s.seal == nil && !sealed:
		return nil
	case s.seal == nil:
		return fmt.Errorf("claimcheck: check in %s: the key holds a copy sealed under key id %s and this store has no keeper (add a version to the name): %w", t, KeyIDText(have), ErrKeyConflict)
	case !sealed:
		return fmt.Errorf("claimcheck: check in %s: an unencrypted object holds the key and this store encrypts (add a version to the name): %w", t, ErrKeyConflict)
	case have != "" && s.seal.keyID != "":
		if have == s.seal.keyID {
			return nil
		}
	default:
		if _, err := s.seal.openDataKey(ctx, meta[metaDEK], associatedData(meta[metaTenant], t.Key)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("claimcheck: check in %s: the key holds a copy sealed under key id %s, not this store's key %s (add a version to the name): %w",
		t, KeyIDText(have), KeyIDText(s.seal.keyID), ErrKeyConflict)
}

func (s *Store) checkSize(n int64) error {
	if s.maxSize > 0 && n > s.maxSize {
		return fmt.Errorf("claimcheck: check in: payload exceeds %d bytes: %w", s.maxSize, ErrPayloadTooLarge)
	}
	return nil
}

func (s *Store) tooLarge(tenant string, err error) error {
	return fmt.Errorf("claimcheck: check in tenant=%s: payload exceeds the maximum of %d bytes: %w", tenant, s.maxSize, ErrPayloadTooLarge)
}

// castagnoli is CRC32C's table (hash/crc32 computes it with the CPU's
// instruction where there is one).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// regularFile returns r as a regular file, the offset it is read from
// and its size in bytes from there (as Stat saw it before anything was
// read), when it is one (an *os.File whose Stat is a regular file,
// seekable): its bytes can then be read again (rereadFile) instead of
// spooled. Otherwise ok is false and size is -1.
func regularFile(r io.Reader) (f *os.File, off, size int64, ok bool) {
	f, isFile := r.(*os.File)
	if !isFile || f == nil {
		return nil, 0, -1, false
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, 0, -1, false
	}
	off, err = f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, -1, false
	}
	return f, off, max(fi.Size()-off, 0), true
}

// errFileChanged is a check-in's error when the payload, a regular file
// read twice (once to hash it, once to store it: rereadFile), gave other
// bytes the second time: it was written to, or truncated, while it was
// checked in. Nothing is stored at the key. It is ErrPayloadCorrupt: the
// bytes that would be stored do not match the ticket's digest (a retry
// reads the file again).
var errFileChanged = fmt.Errorf("the payload file changed while it was checked in (its bytes, read a second time to store them, differ from those hashed; check it in once nothing writes to it): %w", ErrPayloadCorrupt)

// rereadFile is the second read of a check-in's payload file: the byte
// range the first read hashed (from off, n bytes), checked against the
// first read's CRC32C (sum, written by spoolHashed; a cheap check, in
// hardware, of what the ticket's SHA-256 then protects end to end: every
// claim verifies it). Its final Read fails with errFileChanged instead of
// io.EOF when the bytes differ or end early, so the check-in stops before
// it commits: no object at the key, the upload aborted (a file store
// through fileblob's writer: its temporary file never renamed). The
// file's own offset is left where the first read left it, at its end.
type rereadFile struct {
	f    *os.File
	off  int64
	sum  hash.Hash32 // the first read's CRC32C, then the second's
	want uint32
	r    *io.SectionReader
	got  int64
}

// arm ends the first read (n bytes) and starts the second.
func (c *rereadFile) arm(n int64) {
	c.want = c.sum.Sum32()
	c.sum.Reset()
	c.r = io.NewSectionReader(c.f, c.off, n)
}

func (c *rereadFile) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sum.Write(p[:n])
	c.got += int64(n)
	if err == io.EOF && (c.got != c.r.Size() || c.sum.Sum32() != c.want) {
		return n, errFileChanged
	}
	return n, err
}

// checkInSpool keeps a check-in's payload from a stream between hashing
// it and storing it: in memory while it fits in one fileBuf (1 MiB, a
// memCopy), else in a spool file, the buffered bytes first. A document
// of 64 KiB to 1 MiB, offloaded, then costs no file to create, unlink,
// write, rewind and read back. The buffer goes back to the pool as soon as
// the payload outgrows it: a larger payload's check-in holds no more
// memory than before.
type checkInSpool struct {
	s    *Store
	mem  *memCopy // the payload while it fits; nil once it is in file
	file *spoolFile
}

func (c *checkInSpool) Write(p []byte) (int, error) {
	if c.file == nil {
		if c.mem.fits(len(p)) {
			return c.mem.Write(p)
		}
		f, err := c.s.createSpool()
		if err != nil {
			return 0, err
		}
		c.file = f
		_, err = f.Write(c.mem.bytes())
		c.mem.Close()
		c.mem = nil
		if err != nil {
			return 0, err
		}
	}
	return c.file.Write(p)
}

// reader reads the payload from its start.
func (c *checkInSpool) reader() (io.Reader, error) {
	if c.file == nil {
		return bytes.NewReader(c.mem.bytes()), nil
	}
	_, err := c.file.Seek(0, io.SeekStart)
	return c.file, err
}

// close gives the buffer back and closes the file, if any: reader's
// reader is spent.
func (c *checkInSpool) close() {
	if c.file != nil {
		c.file.Close()
	}
	if c.mem != nil {
		c.mem.Close()
	}
}

// spoolFile is a temporary file that is unlinked as soon as it is created,
// so nothing is left behind whatever happens to the process.
type spoolFile struct{ *os.File }

func (s *Store) createSpool() (*spoolFile, error) {
	f, err := os.CreateTemp(s.spoolDir, "claimcheck-spool-*")
	if err != nil {
		return nil, fileError("claimcheck: create spool file in data directory", err)
	}
	_ = os.Remove(f.Name())
	return &spoolFile{f}, nil
}

// Write writes to the spool; a failure (a full disk) is ErrUnavailable,
// its cause named, so that it is not taken for the payload reader's.
func (f *spoolFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if err != nil {
		err = fileError("claimcheck: write spool file in data directory", err)
	}
	return n, err
}

// digester computes the payload's SHA-256 and, when keys are salted, the
// tenant HMAC that names its object, in one pass.
type digester struct {
	sum hash.Hash
	mac hash.Hash
}

func newDigester(mac hash.Hash) *digester { return &digester{sum: sha256.New(), mac: mac} }

func (d *digester) Write(p []byte) (int, error) {
	d.sum.Write(p)
	if d.mac != nil {
		d.mac.Write(p)
	}
	return len(p), nil
}

func (d *digester) sha256() string { return hex.EncodeToString(d.sum.Sum(nil)) }

func (d *digester) keyDigest() string {
	if d.mac == nil {
		return d.sha256()
	}
	return hex.EncodeToString(d.mac.Sum(nil))
}

type countingReader struct {
	r        io.Reader
	n        int64
	progress func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if n > 0 && c.progress != nil {
		c.progress(c.n)
	}
	return n, err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// sealInline sets an inline ticket's bytes: the plaintext, or, when the
// store encrypts, its ciphertext under the tenant's one-shot data key
// (AES256-GCM, sealer.sealKey: shared by the tenant's inline payloads
// within limits) wrapped into t.DEK (the broker never carries
// plaintext), and the id of the key that wrapped it in t.KID.
func (s *Store) sealInline(ctx context.Context, t *Ticket, plain []byte) error {
	if s.seal == nil {
		if len(plain) > 0 {
			t.Inline = bytes.Clone(plain)
		}
		return nil
	}
	ad := associatedData(t.Tenant, "")
	aead, dek, err := s.seal.sealKey(ctx, t.Tenant, ad)
	if err != nil {
		return fmt.Errorf("claimcheck: check in %s%s: %w", t, s.seal.underKeyID(), err)
	}
	ct, err := aead.Encrypt(plain, ad)
	if err != nil {
		return fmt.Errorf("claimcheck: check in %s: seal: %w: %w", t, ErrUnavailable, err)
	}
	t.Inline, t.DEK = ct, dek
	if len(s.seal.keyID) <= MaxKeyIDLen {
		t.KID = s.seal.keyID
	}
	return nil
}
