package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/gcerrors"
)

// What the sweeper and reuse need from a store beyond gocloud.dev/blob:
// the store's own clock, refreshing a reused object's age, and the litter
// of check-ins that never finished (temporary files, incomplete multipart
// uploads).

// refresh restarts the age of an object a new check-in reuses, so that
// lifecycle expiry and the sweeper count from the newest job that needs it,
// not from its first upload (a retention of 22 days must hold for a job
// enqueued on day 21). It reports gone when the object turned out not to
// exist any more, so the caller writes it again.
//
// On the file store it sets the modification time of the object and of
// its attribute file; other stores ask their driver (StoreHooks.Refresh).
// On S3 it copies the object onto itself (CopyObject
// with its metadata replaced by the same metadata), which gives it a new
// LastModified; objects above 5 GiB, which one CopyObject cannot copy, and
// other drivers keep their first write time: their lifecycle must then
// allow for reuse (ComputeRetention's ResultsExtra).
func (s *Store) refresh(ctx context.Context, t *Ticket) (gone bool, err error) {
	if s.fileRoot != "" {
		now := time.Now()
		path := filepath.Join(s.fileRoot, filepath.FromSlash(s.rawKey(t.Key)))
		if err := os.Chtimes(path, now, now); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return true, nil
			}
			return false, fileError("claimcheck: check in "+t.String()+": refresh the reused object's age", err)
		}
		_ = os.Chtimes(path+".attrs", now, now) // fileblob's sidecar, if any
		return false, nil
	}
	if s.hooks == nil {
		return false, nil
	}
	gone, err = s.hooks.Refresh(ctx, s.rawKey(t.Key)) // e.g. S3's copy onto itself
	if err != nil {
		return false, storeError("claimcheck: check in "+t.String()+": refresh the reused object's age", err, false)
	}
	return gone, nil
}

// rawKey is key (relative to the store's namespace, as tickets and
// listings have it) as the bucket itself names it, for calls made on the
// store's driver or the file system rather than through the prefixed
// bucket.
func (s *Store) rawKey(key string) string { return s.namespace + key }

// Clock reads the store's own clock: the time against which the
// modification times it reports are measured. ok is false when the store
// cannot tell (drivers other than file://, mem:// and s3://); callers then
// use another clock that is not their own (the sweeper: the job
// database's).
//
// file:// and mem://: this host's clock, which stamps the files. s3://: the
// Date header of a HeadBucket response (one-second resolution), the
// server's clock that also stamps LastModified and multipart uploads.
//
// Errors: the store's, classified (ErrUnavailable, ErrAccessDenied).
func (s *Store) Clock(ctx context.Context) (now time.Time, ok bool, err error) {
	if s.hostClock {
		return time.Now(), true, nil
	}
	if s.hooks == nil {
		return time.Time{}, false, nil
	}
	now, ok, err = s.hooks.Clock(ctx)
	if err != nil {
		return time.Time{}, false, storeError("claimcheck: read the store's clock", err, false)
	}
	return now, ok, nil
}

// IncompleteUpload is a multipart upload the store holds that was never
// completed nor aborted: what a check-in killed mid-upload leaves (its
// parts take space and cost money until aborted).
type IncompleteUpload struct {
	// Key is the object key the upload would have created.
	Key string
	// ID is the store's upload id.
	ID string
	// Initiated is when the upload began, by the store's clock.
	Initiated time.Time
	// Size is the bytes of the parts uploaded so far (0 when unknown).
	Size int64
}

// IncompleteUploads calls fn for each incomplete multipart upload whose key
// starts with prefix, a page at a time (constant memory). Stores without
// multipart uploads (file://, mem://) have none: it returns nil at once.
// Errors: the store's, classified; fn's, as they are.
func (s *Store) IncompleteUploads(ctx context.Context, prefix string, fn func(IncompleteUpload) error) error {
	if s.hooks == nil {
		return nil
	}
	var fnErr error
	err := s.hooks.IncompleteUploads(ctx, s.rawKey(prefix), func(u IncompleteUpload) error {
		u.Key = strings.TrimPrefix(u.Key, s.namespace)
		fnErr = fn(u)
		return fnErr
	})
	if err != nil && fnErr != nil && errors.Is(err, fnErr) {
		return err
	}
	if err != nil {
		return storeError("claimcheck: list incomplete uploads under "+prefix, err, false)
	}
	return nil
}

// AbortUpload aborts an incomplete multipart upload, freeing its parts. An
// upload already gone is not an error. Errors: the store's, classified.
func (s *Store) AbortUpload(ctx context.Context, u IncompleteUpload) error {
	if s.hooks == nil {
		return nil
	}
	u.Key = s.rawKey(u.Key)
	if err := s.hooks.AbortUpload(ctx, u); err != nil {
		return storeError("claimcheck: abort an incomplete upload", err, false)
	}
	return nil
}

// RemoveTempFile deletes a listed temporary file of a file:// store (a
// key for which IsTempKey is true: fileblob's "<key>.<hex>.tmp" beside its
// final path) and, when the object it was writing does not exist, the
// attribute file fileblob writes just before its final rename (a write
// killed between the two leaves both). A file already gone is not an
// error. Errors: ErrConfig for a key that is not a temporary file or a
// store that is not file://; ErrUnavailable from the filesystem.
func (s *Store) RemoveTempFile(key string) error {
	if s.fileRoot == "" || !IsTempKey(key) {
		return fmt.Errorf("claimcheck: remove temporary file: not a file store's temporary file: %w", ErrConfig)
	}
	path := filepath.Join(s.fileRoot, filepath.FromSlash(s.rawKey(key)))
	if rel, err := filepath.Rel(s.fileRoot, path); err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("claimcheck: remove temporary file: outside the store: %w", ErrConfig)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fileError("claimcheck: remove temporary file", err)
	}
	final := strings.TrimSuffix(path, ".tmp")
	if i := strings.LastIndexByte(final, '.'); i > 0 {
		final = final[:i] // drop fileblob's ".<hex>" of the write's start time
	}
	if _, err := os.Stat(final); errors.Is(err, os.ErrNotExist) {
		if err := os.Remove(final + ".attrs"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fileError("claimcheck: remove a dead write's attribute file", err)
		}
	}
	return nil
}

// DefaultNotFoundGrace is Options.NotFoundGrace's default: 2 minutes.
const DefaultNotFoundGrace = 2 * time.Minute

// notFoundGraceFromURL takes notfound_grace=D (a duration such as 30s, 2m
// or 0 for none; ParseDuration's units) out of a store URL.
func notFoundGraceFromURL(u *url.URL) (time.Duration, error) {
	q := u.Query()
	v, ok := q["notfound_grace"]
	if !ok {
		return 0, nil
	}
	q.Del("notfound_grace")
	u.RawQuery = q.Encode()
	d, err := ParseDuration(v[0])
	if err != nil || d < 0 {
		return 0, fmt.Errorf("notfound_grace=%q: give a duration such as 2m, or 0 for none", v[0])
	}
	if d == 0 {
		return -1, nil
	}
	return d, nil
}

// claimError classifies a store error of a claim of t: NotFound within the
// store's NotFoundGrace of the ticket's creation is ErrNotVisibleYet
// (transient), later ErrPayloadMissing (permanent).
func (s *Store) claimError(ctx context.Context, what string, t *Ticket, err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		// No object, or no bucket? A HEAD cannot tell them apart (S3
		// answers both with a bare 404): ask the driver before "missing".
		if bc, ok := s.hooks.(BucketChecker); ok {
			if berr := bc.CheckBucket(ctx); berr != nil {
				return storeError(what, berr, false)
			}
		}
	}
	if gcerrors.Code(err) == gcerrors.NotFound && s.notFoundGrace > 0 {
		if since := time.Since(t.Created); since < s.notFoundGrace {
			return fmt.Errorf("%w: %s %s after its check-in, within the store's %s consistency grace (retried; missing after it): %w",
				ErrNotVisibleYet, what, FormatDuration(max(since, 0).Round(time.Millisecond)), FormatDuration(s.notFoundGrace), storeError(what, err, false))
		}
	}
	return storeError(what, err, true)
}

// NotFoundGrace is how long after a ticket's creation a missing object is
// ErrNotVisibleYet rather than ErrPayloadMissing (0: never).
func (s *Store) NotFoundGrace() time.Duration { return s.notFoundGrace }
