package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"gocloud.dev/gcerrors"
)

// What the sweeper and reuse need from a store beyond gocloud.dev/blob:
// the store's own clock, refreshing a reused object's age, and the litter
// of check-ins that never finished (temporary files, incomplete multipart
// uploads).

// s3MaxCopySize is the largest object one CopyObject copies (5 GiB).
const s3MaxCopySize = 5 << 30

// refresh restarts the age of an object a new check-in reuses, so that
// lifecycle expiry and the sweeper count from the newest job that needs it,
// not from its first upload (a retention of 22 days must hold for a job
// enqueued on day 21). It reports gone when the object turned out not to
// exist any more, so the caller writes it again.
//
// On the file store it sets the modification time of the object and of
// its attribute file. On S3 it copies the object onto itself (CopyObject
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
	client := s.s3Client()
	if client == nil {
		return false, nil
	}
	head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.s3Bucket), Key: aws.String(s.rawKey(t.Key))})
	if err != nil {
		if isS3NotFound(err) {
			return true, nil
		}
		return false, storeError("claimcheck: check in "+t.String()+": refresh the reused object's age", err, false)
	}
	if aws.ToInt64(head.ContentLength) > s3MaxCopySize {
		return false, nil
	}
	in := &s3.CopyObjectInput{
		Bucket:            aws.String(s.s3Bucket),
		Key:               aws.String(s.rawKey(t.Key)),
		CopySource:        aws.String(s.s3Bucket + "/" + s.rawKey(t.Key)),
		MetadataDirective: types.MetadataDirectiveReplace,
		Metadata:          head.Metadata,
		ContentType:       head.ContentType,
		// Only the object this HEAD saw: if it was replaced or removed
		// since, the copy fails instead of copying something else.
		CopySourceIfMatch: head.ETag,
	}
	if head.ServerSideEncryption != "" && head.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		in.ServerSideEncryption, in.SSEKMSKeyId = head.ServerSideEncryption, head.SSEKMSKeyId
	} else if head.ServerSideEncryption != "" {
		in.ServerSideEncryption = head.ServerSideEncryption
	}
	if _, err := client.CopyObject(ctx, in); err != nil {
		if isS3NotFound(err) || isS3Code(err, "PreconditionFailed") {
			return true, nil
		}
		return false, storeError("claimcheck: check in "+t.String()+": refresh the reused object's age (copy onto itself)", err, false)
	}
	return false, nil
}

// rawKey is key (relative to the store's namespace, as tickets and
// listings have it) as the bucket itself names it, for calls made on the
// S3 client or the file system rather than through the prefixed bucket.
func (s *Store) rawKey(key string) string { return s.namespace + key }

// s3Client is the S3 client behind an s3:// store OpenStore opened, or nil.
func (s *Store) s3Client() *s3.Client {
	if s.s3Bucket == "" {
		return nil
	}
	var client *s3.Client
	if !s.bucket.As(&client) {
		return nil
	}
	return client
}

func isS3NotFound(err error) bool {
	var nf *types.NotFound
	var nk *types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nk) {
		return true
	}
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

func isS3Code(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

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
	client := s.s3Client()
	if client == nil {
		return time.Time{}, false, nil
	}
	out, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.s3Bucket)})
	if err != nil {
		return time.Time{}, false, storeError("claimcheck: read the store's clock", err, false)
	}
	raw, _ := awsmiddleware.GetRawResponse(out.ResultMetadata).(*smithyhttp.Response)
	if raw == nil {
		return time.Time{}, false, nil
	}
	date, err := http.ParseTime(raw.Header.Get("Date"))
	if err != nil {
		return time.Time{}, false, nil
	}
	return date, true, nil
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
	client := s.s3Client()
	if client == nil {
		return nil
	}
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(s.s3Bucket), Prefix: aws.String(s.rawKey(prefix))}
	for {
		out, err := client.ListMultipartUploads(ctx, in)
		if err != nil {
			return storeError("claimcheck: list incomplete uploads under "+prefix, err, false)
		}
		for _, u := range out.Uploads {
			up := IncompleteUpload{Key: strings.TrimPrefix(aws.ToString(u.Key), s.namespace), ID: aws.ToString(u.UploadId), Initiated: aws.ToTime(u.Initiated)}
			up.Size = s.uploadedBytes(ctx, client, up)
			if err := fn(up); err != nil {
				return err
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// uploadedBytes sums the sizes of an upload's parts (first 1,000 parts
// only: the figure is for the report).
func (s *Store) uploadedBytes(ctx context.Context, client *s3.Client, u IncompleteUpload) int64 {
	out, err := client.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(s.s3Bucket), Key: aws.String(s.rawKey(u.Key)), UploadId: aws.String(u.ID)})
	if err != nil {
		return 0
	}
	var n int64
	for _, p := range out.Parts {
		n += aws.ToInt64(p.Size)
	}
	return n
}

// AbortUpload aborts an incomplete multipart upload, freeing its parts. An
// upload already gone is not an error. Errors: the store's, classified.
func (s *Store) AbortUpload(ctx context.Context, u IncompleteUpload) error {
	client := s.s3Client()
	if client == nil {
		return nil
	}
	_, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.s3Bucket), Key: aws.String(s.rawKey(u.Key)), UploadId: aws.String(u.ID)})
	if err != nil && !isS3Code(err, "NoSuchUpload") && !isS3NotFound(err) {
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
func (s *Store) claimError(what string, t *Ticket, err error) error {
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
