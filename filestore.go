package claimcheck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"

	"github.com/claimcheck/claimcheck/internal/ctxio"
)

// Check-ins into a file:// store write the object themselves, in the
// layout gocloud's fileblob reads (the object file at its key, its
// attributes in a "<key>.attrs" JSON sidecar), rather than through
// fileblob's writer, which computes an MD5 of every byte for the sidecar
// (read by nothing here) and, the key being a content address known only at
// the end of the stream, would make the payload be written twice. Instead
// the payload is hashed as it is written, in 1 MiB pieces written by a
// goroutine of their own (so that hashing and writing overlap), into a file
// of the store's file system that has no name yet (O_TMPFILE: createAnon),
// so that no listing and no sweeper sees it while it is written, its
// writeback to disk started every 8 MiB (writebackFile: the final fsync
// then waits for little, not the whole payload); once the key is known
// the file is fsynced, its sidecar written and fsynced, and the file is
// linked to its key (never over an existing name), whose directories
// are then fsynced up to the store's root: the object is durable before its
// ticket exists (docs/invariants.md, invariant 1). An encrypted payload is
// encrypted into that file as it is hashed, in the same pass (sealed format
// v2, whose ciphertext is not bound to the key: seal.go), and its data key
// wrapped into the sidecar once the key is known.
//
// Keys whose fileblob path is not the key itself (escaped characters),
// stores opened with fileblob's metadata= or dir_file_mode= parameters, and
// file systems without O_TMPFILE (or systems other than Linux) go through
// fileblob's writer as before.

// fileAttrs is fileblob's sidecar as claimcheck writes it: its JSON field
// names, without the MD5 (an absent MD5 is what fileblob reads for objects
// whose writer computed none).
type fileAttrs struct {
	ContentType string            `json:"user.content_type"`
	Metadata    map[string]string `json:"user.metadata,omitempty"`
}

// filePath is the file of key (relative to the namespace) in a file://
// store whose check-ins claimcheck writes itself, and whether there is one:
// the store must allow it (fileDirect) and fileblob's escaping must leave
// the key as it is (no "__0x", "//", "../" or trailing '/'; only
// characters claimcheck's keys use).
func (s *Store) filePath(key string) (string, bool) {
	if !s.fileDirect {
		return "", false
	}
	raw := s.rawKey(key)
	if raw == "" || raw[0] == '/' || strings.HasSuffix(raw, "/") || strings.Contains(raw, "//") ||
		strings.Contains(raw, "../") || strings.Contains(raw, "__0x") || strings.HasSuffix(raw, ".attrs") {
		return "", false
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == '/' || c == '@':
		default:
			return "", false
		}
	}
	return filepath.Join(s.fileRoot, filepath.FromSlash(raw)), true
}

// fileDirectURL reports whether a file:// URL's query leaves claimcheck to
// write check-ins itself: fileblob's metadata= and dir_file_mode= change the
// layout or modes fileblob would write.
func fileDirectURL(q map[string][]string) bool {
	_, meta := q["metadata"]
	_, mode := q["dir_file_mode"]
	return !meta && !mode
}

// synced reports one step of a file:// check-in's commit to the test
// seam (export_test.go); a no-op otherwise.
func (s *Store) synced(op, path string) {
	if s.syncHook != nil {
		s.syncHook(op, path)
	}
}

// createStoreTemp creates the object's file in dir, a directory of the
// store (created if missing, mode 0777 less the umask, as fileblob does),
// on the object's file system, without a name (createAnon): the payload is
// written once, into what becomes the object when putFile links it to its
// key. Nothing lists it meanwhile, so no sweeper can take it for the litter
// of a dead write, whatever its clock; a check-in that dies leaves nothing.
func (s *Store) createStoreTemp(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fileError("claimcheck: create a directory in the file store", err)
	}
	f, err := createAnon(dir)
	if err != nil {
		return nil, fileError("claimcheck: create the object's file in the file store", err)
	}
	return f, nil
}

// removeTemp closes an object's file that never got its name (nil:
// none): the file system frees it.
func removeTemp(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}

// writebackFile writes an object's file, starting the kernel's writeback
// of each writebackEvery bytes as they are written (startWriteback), so
// that the disk works while the rest of the payload is read and hashed,
// not only once the final fsync waits for all of it.
type writebackFile struct {
	f            *os.File
	off, started int64 // bytes written; of those, bytes whose writeback was started
}

// writebackEvery is how many bytes of an object's file are written
// between two starts of their writeback (8 MiB).
const writebackEvery = 8 << 20

func (w *writebackFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.started >= writebackEvery {
		startWriteback(w.f, w.started, w.off-w.started)
		w.started = w.off
	}
	return n, err
}

// spoolHashed reads src to its end and writes head and then it to dst,
// hashing with h as it reads, in fileBuf pieces written ahead (copyAhead),
// failing with ErrPayloadTooLarge past the store's maximum payload size
// (Options.MaxPayloadSize, when set). what names dst in
// errors ("spool file in data directory"). The errors are CheckIn's:
// ErrPayloadTooLarge, the context's (ErrUnavailable), dst's (ErrUnavailable,
// a full disk), the reader's ("read payload").
func (s *Store) spoolHashed(ctx context.Context, tenant string, dst io.Writer, what string, head []byte, src io.Reader, h *digester) (int64, error) {
	var total int64
	_, rerr, werr := copyAhead(ctx, dst, io.MultiReader(bytes.NewReader(head), src), func(p []byte) error {
		if s.maxSize > 0 && total+int64(len(p)) > s.maxSize {
			return ErrPayloadTooLarge
		}
		total += int64(len(p))
		h.Write(p)
		return nil
	})
	switch {
	case errors.Is(rerr, ErrPayloadTooLarge):
		return 0, s.tooLarge(tenant, rerr)
	case ctx.Err() != nil:
		return 0, fmt.Errorf("claimcheck: check in tenant=%s: %w: %w", tenant, ErrUnavailable, ctx.Err())
	case werr != nil:
		return 0, fmt.Errorf("claimcheck: check in tenant=%s: %w", tenant, fileError("claimcheck: write "+what, werr))
	case rerr != nil:
		return 0, fmt.Errorf("claimcheck: check in tenant=%s: read payload: %w", tenant, pathErrNoName(rerr))
	}
	return total, nil
}

// putFile commits a check-in into a file:// store at path, t.Key's file
// (filePath): tmp is the object's file, written in the store (spoolHashed
// into createStoreTemp's file), through sealed (v2) when the store
// encrypts, whose data key is then wrapped into the object's metadata. An
// object already at the key with the same digest and size is reused
// (refreshed) and nothing is written. tmp is closed on every return but
// success, leaving nothing (it has no name).
func (s *Store) putFile(ctx context.Context, t *Ticket, path string, tmp *os.File, sealed *sealWriter) (err error) {
	defer func() { removeTemp(tmp) }() // nil once it is the object
	mu := fileKeyLock(s.fileRoot, t.Key)
	mu.Lock()
	defer mu.Unlock()
	if reused, err := s.reuse(ctx, t); err != nil || reused {
		return err // tmp is removed: nothing written
	}
	meta, _, err := s.objectMeta(ctx, t, sealed)
	if err != nil {
		return err // a keeper that cannot wrap: tmp is removed
	}
	dir := filepath.Dir(path)
	if err := ctx.Err(); err != nil { // cancelled: nothing committed
		return fmt.Errorf("claimcheck: check in %s: %w: %w", t, ErrUnavailable, err)
	}
	// Durable before the rename is relied on (docs/invariants.md, invariant 1).
	if err := tmp.Sync(); err != nil {
		return fileError("claimcheck: check in "+t.String()+": fsync", err)
	}
	s.synced("fsync file", tmp.Name())
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fileError("claimcheck: check in "+t.String()+": create the object's directory", err)
	}
	// As fileblob's IfNotExist: a stat before writing the sidecar
	// (fileKeyLock serializes this process's check-ins of one key), and
	// the link, which never replaces a name, for another process's.
	conflict := func() error {
		if same, herr := s.holds(ctx, t); herr != nil || same {
			return herr
		}
		return fmt.Errorf("claimcheck: check in %s: %w", t, ErrKeyConflict)
	}
	if _, err := os.Lstat(path); err == nil {
		return conflict()
	}
	if err := writeAttrs(path+".attrs", t.ContentType, meta); err != nil {
		return fileError("claimcheck: check in "+t.String()+": write the object's attributes", err)
	}
	s.synced("fsync attrs", path+".attrs")
	if err := linkAnon(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return conflict()
		}
		_ = os.Remove(path + ".attrs")
		return fileError("claimcheck: check in "+t.String()+": link into place", err)
	}
	s.synced("link", path)
	if err := tmp.Close(); err != nil {
		return fileError("claimcheck: check in "+t.String()+": close", err)
	}
	tmp = nil // it is the object now
	if err := s.syncDirs(dir); err != nil {
		return fileError("claimcheck: check in "+t.String()+": fsync directory", err)
	}
	return nil
}

// writeAttrs writes and fsyncs fileblob's sidecar of an object.
func writeAttrs(path, contentType string, meta map[string]string) error {
	if contentType != "" {
		if mt, p, err := mime.ParseMediaType(contentType); err == nil {
			contentType = mime.FormatMediaType(mt, p) // as blob.NewWriter normalizes it
		}
	}
	b, err := json.Marshal(fileAttrs{ContentType: contentType, Metadata: meta})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	if _, err = f.Write(append(b, '\n')); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// verifyFile verifies an unencrypted payload of a file:// store where it
// lies: the object file is hashed through one descriptor, which then
// serves the verified reads (the object is never rewritten in place: a
// check-in renames a new file over nothing, a sweep unlinks, and either
// leaves an open descriptor's bytes as they were). ok is false when the
// payload cannot be verified so (not such a store, no file, another size
// or digest): the caller then takes the general path, which names the
// cause (missing, corrupt, encrypted without a keeper).
func (p *Payload) verifyFile(ctx context.Context) (f *os.File, ok bool, err error) {
	s, t := p.store, p.ticket
	if s.seal != nil {
		return nil, false, nil
	}
	path, direct := s.filePath(t.Key)
	if !direct {
		return nil, false, nil
	}
	f, err = os.Open(path)
	if err != nil {
		return nil, false, nil
	}
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != t.Size {
		return f, false, nil
	}
	v := &verifyingReader{r: io.NopCloser(nil), src: io.NewSectionReader(f, 0, t.Size+1), t: t, sum: sha256.New()}
	buf := getFileBuf()
	defer putFileBuf(buf)
	if _, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{ctxio.Reader(ctx, v)}, buf); err != nil {
		if ctx.Err() != nil {
			return f, false, fmt.Errorf("claimcheck: claim %s: %w: %w", t, ErrUnavailable, ctx.Err())
		}
		return f, false, nil
	}
	return f, true, nil
}
