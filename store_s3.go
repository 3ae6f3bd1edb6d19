package claimcheck

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/dustin/go-humanize"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob" // s3:// URLs
	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck/internal/ctxio"
)

// S3 and S3-compatible stores (SeaweedFS, MinIO, Ceph, R2...):
//
//	s3://BUCKET?region=REGION[&endpoint=http://host:port&use_path_style=true]
//
// takes every query parameter of gocloud.dev/blob/s3blob and gocloud.dev/aws
// (region, endpoint, use_path_style, disable_https, profile, ...).
// Credentials come only from the AWS SDK's default chain (AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared files, web identity,
// container and instance roles), never from the URL and never from a ticket,
// which names only the store's logical name.
//
// Server-side encryption is requested with s3blob's own parameters:
//
//	ssetype=AES256                               SSE-S3
//	ssetype=aws:kms[&kmskeyid=KEY-ID|ARN|alias]  SSE-KMS (or aws:kms:dsse)
//
// and, when requested, is verified (sseCheck): every request that creates
// an object asks for it, and once the object exists a HEAD must report the
// type asked for (and the KMS key, when kmskeyid names one by id or ARN);
// if it does not, the object is deleted and the check-in fails. A server
// that cannot apply it (SeaweedFS without a KMS refuses aws:kms with a 500)
// fails the check-in the same way: nothing is left stored without it.
//
// What claimcheck adds over a plain s3blob bucket:
//
//   - Every upload request carries a SHA-256 checksum the server verifies
//     before it stores anything (x-amz-checksum-sha256 on PutObject and on
//     each UploadPart; a header, or over TLS, where the SDK computes it as
//     it streams, an aws-chunked trailer): bytes corrupted between the spool and the server are refused
//     (BadDigest), not stored. A payload stored in one request and not
//     encrypted carries the ticket's own digest, so the server checks the
//     bytes against the ticket; otherwise the SDK hashes each request's body
//     as it sends it. A multipart object's stored checksum is then a
//     checksum of its parts' checksums ("...-N"), not the payload's: the
//     ticket's digest, verified at every claim, remains the end-to-end check.
//     ETags are never read as hashes.
//   - Objects are created with If-None-Match: * (blob.WriterOptions.IfNotExist),
//     on PutObject and CompleteMultipartUpload, so two check-ins racing for a
//     key cannot both commit.
//   - Large payloads go up in parts of s3PartSize (5 MiB, S3's minimum, until
//     the 10,000-part limit needs more), s3UploadConcurrency at a time: memory
//     per check-in is about (s3UploadConcurrency+2) parts whatever the size.
//   - A failed or cancelled multipart upload is aborted with a fresh context
//     (s3AbortTimeout), so it leaves no incomplete upload behind.
//   - Every connection is bounded in time (bounds.go): connect_timeout=D
//     (default DefaultConnectTimeout, 10 s) for each connection attempt and
//     TLS handshake, and stall_timeout=D (default DefaultStallTimeout, 20 s)
//     of no progress at all on an established connection, D a Go duration
//     from 100ms to 1h; both are claimcheck's URL parameters.
//
// and, for buckets OpenStore opens (openBucket; not for a bucket given to
// NewStore):
//
//   - InvalidAccessKeyId, SignatureDoesNotMatch, ExpiredToken and their kin
//     are permission errors (ErrAccessDenied), as AccessDenied already is.
//   - The SDK does not validate response checksums by default
//     (response_checksum_validation=when_required unless the URL says
//     otherwise): a claim verifies the payload's SHA-256 itself, and an SDK
//     validation failure would surface as a read error (transient) instead
//     of ErrPayloadCorrupt.
const (
	s3MinPartSize = 5 << 20 // S3's minimum part size, but for the last part
	s3MaxParts    = 10000
	// One part in flight while the next is read. Against SeaweedFS on
	// this 2-core machine, 1, 2 and 4 upload at the same 55-75 MiB/s, with
	// a 1 GiB check-in peaking at 60, 68 and 81 MiB of RSS.
	s3UploadConcurrency = 1
	s3AbortTimeout      = 30 * time.Second
)

// s3Upload is the multipart configuration of an s3:// store, from its URL's
// part_size and upload_concurrency parameters.
type s3Upload struct {
	partSize    int64 // bytes; 0: s3MinPartSize
	concurrency int   // 0: s3UploadConcurrency
}

// s3UploadFromURL takes claimcheck's own parameters out of an s3:// URL
// (s3blob refuses parameters it does not know): part_size, in bytes (5 MiB,
// S3's minimum, to 5 GiB; suffixes KiB, MiB, GiB), and upload_concurrency,
// the parts in flight (1 to 16).
func s3UploadFromURL(u *url.URL) (s3Upload, error) {
	var up s3Upload
	if u.Scheme != s3blob.Scheme {
		return up, nil
	}
	q := u.Query()
	if v := q.Get("part_size"); v != "" {
		n, err := humanize.ParseBytes(v)
		if err != nil || n < s3MinPartSize || n > 5<<30 {
			return up, fmt.Errorf("part_size=%q: use 5MiB to 5GiB (S3's limits)", v)
		}
		up.partSize = int64(n)
	}
	if v := q.Get("upload_concurrency"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 16 {
			return up, fmt.Errorf("upload_concurrency=%q: use 1 to 16", v)
		}
		up.concurrency = n
	}
	q.Del("part_size")
	q.Del("upload_concurrency")
	u.RawQuery = q.Encode()
	return up, nil
}

// S3UploadConcurrency is how many parts of one check-in to this s3:// store
// are uploaded at once (the URL's upload_concurrency; default 1). With
// S3PartSize, it bounds a check-in's part buffers: about S3PartSize ×
// S3UploadConcurrency bytes in flight, whatever the payload's size.
func (s *Store) S3UploadConcurrency() int {
	if s.s3up.concurrency > 0 {
		return s.s3up.concurrency
	}
	return s3UploadConcurrency
}

// S3PartSize is the part size, in bytes, of the multipart upload of a
// payload of payloadSize bytes to this s3:// store: the URL's part_size
// (default 5 MiB, S3's minimum), raised in whole MiB where S3's 10,000-part
// limit needs more. A payload smaller than one part goes up in a single
// PutObject.
func (s *Store) S3PartSize(payloadSize int64) int64 {
	return max(s3PartSize(payloadSize), s.s3up.partSize)
}

// openBucket opens the bucket at u, a URL OpenStore has checked. It is
// blob.OpenBucket but for s3:// URLs, which openS3Bucket opens.
func openBucket(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	if u.Scheme == s3blob.Scheme {
		return openS3Bucket(ctx, u)
	}
	return blob.OpenBucket(ctx, u.String())
}

// openS3Bucket opens an s3:// URL through s3blob's own URL opener (so it
// takes the same parameters), then rebuilds the bucket on a copy of its
// client with s3ErrorCodes added.
func openS3Bucket(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	return openS3BucketWith(ctx, u)
}

// openS3BucketWith is openS3Bucket with more client options, added after
// claimcheck's own (tests put probes on the wire with them).
func openS3BucketWith(ctx context.Context, u *url.URL, apiOptions ...func(*middleware.Stack) error) (*blob.Bucket, error) {
	if u.Host == "" {
		return nil, errors.New("s3 store URL needs a bucket: s3://BUCKET?region=...")
	}
	v := *u
	bounds, err := netBoundsFromURL(&v)
	if err != nil {
		return nil, err
	}
	q := v.Query()
	if q.Get("response_checksum_validation") == "" {
		q.Set("response_checksum_validation", "when_required")
	}
	v.RawQuery = q.Encode()
	var opener s3blob.URLOpener
	b, err := opener.OpenBucketURL(ctx, &v)
	if err != nil {
		return nil, err
	}
	var c *s3.Client
	ok := b.As(&c)
	_ = b.Close()
	if !ok {
		return nil, errors.New("s3blob bucket exposes no *s3.Client")
	}
	o := c.Options()
	if o.Region == "" {
		return nil, errors.New("s3 store needs a region: add region=... to the URL or set AWS_REGION")
	}
	// opener.Options now holds what the URL set (server-side encryption,
	// checksum calculation mode).
	sse, err := newSSECheck(opener.Options.EncryptionType, opener.Options.KMSEncryptionID)
	if err != nil {
		return nil, err
	}
	client := s3.New(o, func(o *s3.Options) {
		o.HTTPClient = boundedHTTPClient(o.HTTPClient, bounds)
		o.APIOptions = append(o.APIOptions, s3ErrorCodes)
		if sse != nil {
			o.APIOptions = append(o.APIOptions, sse.middleware)
		}
		o.APIOptions = append(o.APIOptions, apiOptions...)
	})
	if sse != nil {
		sse.client = client
		registerSSE(client, sse)
	}
	return s3blob.OpenBucket(ctx, client, u.Host, &opener.Options)
}

// boundedHTTPClient is c, an SDK HTTP client, with b's bounds on its
// connections (bounds.go): the connect timeout on dialling and on the TLS
// handshake, and the stall watchdog of ctxio.Dialer on every connection.
// Idle pooled connections are closed before the watchdog would close them.
// A client that is not the SDK's buildable one is replaced by one.
func boundedHTTPClient(c aws.HTTPClient, b netBounds) aws.HTTPClient {
	bc, ok := c.(*awshttp.BuildableClient)
	if !ok || bc == nil {
		bc = awshttp.NewBuildableClient()
	}
	d := ctxio.Dialer{Connect: b.connect, Stall: b.stall, KeepAlive: awshttp.DefaultDialKeepAliveTimeout}
	return bc.WithTransportOptions(func(tr *http.Transport) {
		tr.DialContext = d.DialContext
		tr.TLSHandshakeTimeout = b.connect
		if tr.IdleConnTimeout == 0 || tr.IdleConnTimeout > b.stall/2 {
			tr.IdleConnTimeout = b.stall / 2
		}
	})
}

// s3AccessDeniedCodes are S3 error codes for credentials the store refuses.
// s3blob maps only AccessDenied and Forbidden to gcerrors.PermissionDenied:
// the rest would be Unknown, which claimcheck reports as ErrUnavailable.
var s3AccessDeniedCodes = map[string]bool{
	"InvalidAccessKeyId":    true,
	"SignatureDoesNotMatch": true,
	"ExpiredToken":          true,
	"InvalidToken":          true,
	"TokenRefreshRequired":  true,
	"AllAccessDisabled":     true,
	"AccountProblem":        true,
	"InvalidSecurity":       true,
	"RequestTimeTooSkewed":  true,
}

// s3ErrorCodes is an S3 client middleware that presents the errors of
// s3AccessDeniedCodes with the code AccessDenied, so that gcerrors.Code
// (and so storeError, and any tool using Store.Bucket) sees PermissionDenied.
// The original error stays in the chain (errors.As) and in the message.
func s3ErrorCodes(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("claimcheck.S3ErrorCodes",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			var ae smithy.APIError
			if err != nil && errors.As(err, &ae) && s3AccessDeniedCodes[ae.ErrorCode()] {
				err = &s3AccessDenied{err: err, api: ae}
			}
			return out, md, err
		}), middleware.Before)
}

// s3AccessDenied is a smithy.APIError with the code AccessDenied wrapping
// the store's own error.
type s3AccessDenied struct {
	err error
	api smithy.APIError
}

func (e *s3AccessDenied) Error() string     { return e.err.Error() }
func (e *s3AccessDenied) Unwrap() error     { return e.err }
func (e *s3AccessDenied) ErrorCode() string { return "AccessDenied" }
func (e *s3AccessDenied) ErrorMessage() string {
	return e.api.ErrorCode() + ": " + e.api.ErrorMessage()
}
func (e *s3AccessDenied) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }

// s3PartSize is the part size for an upload of a payload of size bytes:
// s3MinPartSize until the payload (with room for encryption's overhead)
// would need more than s3MaxParts parts, then whole MiB above that.
func s3PartSize(size int64) int64 {
	est := size + size>>16 + 1<<20 // Tink: 16-byte tag per 1 MiB segment, a header
	part := int64(s3MinPartSize)
	if need := (est + s3MaxParts - 1) / s3MaxParts; need > part {
		part = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return part
}

// s3BeforeWrite prepares the upload of t's object when the bucket is
// s3blob's (it is a no-op for other drivers): it is called from put's
// BeforeWrite with the writer's As function. sealed means the bytes sent are
// ciphertext, whose digest is not known before they are sent.
//
// s3blob exposes the transfer manager client of this one upload; its
// options are not exported, so it is replaced whole by one configured here.
func (s *Store) s3BeforeWrite(as func(any) bool, t *Ticket, sealed bool) error {
	var in *transfermanager.UploadObjectInput
	if !as(&in) || in == nil {
		return nil // not s3blob
	}
	var tm *transfermanager.Client
	if !as(&tm) || tm == nil {
		// Refuse rather than upload without checksums, bounded parts or
		// an abort that works (a gocloud upgrade changed s3blob's As).
		return errors.New("s3blob no longer exposes its *transfermanager.Client to BeforeWrite")
	}
	var client *s3.Client
	if !s.bucket.As(&client) {
		return errors.New("s3blob bucket exposes no *s3.Client")
	}
	part := s.S3PartSize(t.Size)
	*tm = *transfermanager.New(client, func(o *transfermanager.Options) {
		o.PartSizeBytes = part
		// Also the most buffered before the first request: the default
		// (16 MiB) would hold more than a part in memory.
		o.MultipartUploadThreshold = part
		o.Concurrency = s.S3UploadConcurrency()
		o.ChecksumAlgorithm = tmtypes.ChecksumAlgorithmSha256
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
		// AbortMultipartUpload gets a fresh context: with the default (0) it
		// would reuse the cancelled one and fail, leaving the parts behind.
		o.FailTimeout = s3AbortTimeout
	})
	in.ChecksumAlgorithm = tmtypes.ChecksumAlgorithmSha256
	if !sealed && t.Size < part {
		// One PutObject (the body is under the multipart threshold) of the
		// plaintext: the server checks the bytes against the ticket itself.
		sum, err := hex.DecodeString(t.SHA256)
		if err != nil {
			return fmt.Errorf("ticket digest: %v", err)
		}
		in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(sum))
	}
	return nil
}

// sseCheck requests server-side encryption on every request of its client
// that creates an object, and verifies it once the object exists: a HEAD
// must report the type requested (and the KMS key, when one is named by id
// or ARN). Otherwise the object is deleted and the request fails with an
// *sseError, so no object is left, and no ticket made, without the
// encryption asked for. It is a client middleware so that every write
// through the store's client, not only check-ins, is held to it.
type sseCheck struct {
	typ    types.ServerSideEncryption
	kmsKey string     // "" lets the store choose (AWS: the aws/s3 key)
	client *s3.Client // for HEAD and DELETE; set once the client exists
}

// newSSECheck returns the check for what s3blob's ssetype and kmskeyid
// parameters asked, or nil when they asked for nothing.
func newSSECheck(typ types.ServerSideEncryption, kmsKey string) (*sseCheck, error) {
	if typ == "" {
		if kmsKey != "" {
			return nil, errors.New("kmskeyid needs ssetype=aws:kms (or aws:kms:dsse)")
		}
		return nil, nil
	}
	if kmsKey != "" && !strings.HasPrefix(string(typ), "aws:kms") {
		return nil, fmt.Errorf("kmskeyid is for ssetype=aws:kms, not %s", typ)
	}
	return &sseCheck{typ: typ, kmsKey: kmsKey}, nil
}

// sseError is the failure of an object to report the server-side
// encryption requested. Its message names no object key.
type sseError struct {
	want, got       string // type and key requested; type and key reported
	existing        bool   // the object was there before: nothing was written or deleted
	deleted         bool
	deleteErr, head error
}

func (e *sseError) Error() string {
	if e.existing {
		got := e.got
		if got == "" {
			got = "none"
		}
		return "server-side encryption " + e.want + " is required and the object already at this key reports " + got +
			" (stored before it was required?); nothing was written: re-encrypt the object in place (copy it onto itself) or delete it"
	}
	msg := "server-side encryption " + e.want + " was requested and the store did not apply it"
	switch {
	case e.head != nil:
		msg += " (the object could not be checked: " + e.head.Error() + ")"
	case e.got == "":
		msg += " (the object reports none)"
	default:
		msg += " (the object reports " + e.got + ")"
	}
	if e.deleted {
		return msg + "; the object was deleted"
	}
	return msg + "; deleting the object failed: " + e.deleteErr.Error()
}

func (e *sseError) Unwrap() error { return e.head }

func (c *sseCheck) describe(typ types.ServerSideEncryption, key string) string {
	if key == "" {
		return string(typ)
	}
	return string(typ) + " with KMS key " + key
}

func (c *sseCheck) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("claimcheck.SSECheck",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			var bucket, key *string
			switch p := in.Parameters.(type) {
			case *s3.PutObjectInput:
				p.ServerSideEncryption, p.SSEKMSKeyId = c.typ, c.keyParam()
				bucket, key = p.Bucket, p.Key
			case *s3.CreateMultipartUploadInput:
				p.ServerSideEncryption, p.SSEKMSKeyId = c.typ, c.keyParam()
			case *s3.CopyObjectInput:
				p.ServerSideEncryption, p.SSEKMSKeyId = c.typ, c.keyParam()
				bucket, key = p.Bucket, p.Key
			case *s3.CompleteMultipartUploadInput:
				bucket, key = p.Bucket, p.Key
			}
			out, md, err := next.HandleInitialize(ctx, in)
			if err != nil || key == nil {
				return out, md, err
			}
			var version *string
			switch r := out.Result.(type) {
			case *s3.PutObjectOutput:
				version = r.VersionId
			case *s3.CopyObjectOutput:
				version = r.VersionId
			case *s3.CompleteMultipartUploadOutput:
				version = r.VersionId
			}
			if err := c.verify(ctx, bucket, key, version); err != nil {
				return out, md, err
			}
			return out, md, nil
		}), middleware.After)
}

func (c *sseCheck) keyParam() *string {
	if c.kmsKey == "" {
		return nil
	}
	return aws.String(c.kmsKey)
}

// verify HEADs the object just created and deletes it if it does not
// report the encryption requested.
func (c *sseCheck) verify(ctx context.Context, bucket, key, version *string) error {
	head, err := c.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: key, VersionId: version})
	e := &sseError{want: c.describe(c.typ, c.kmsKey), head: err}
	if err == nil {
		if head.ServerSideEncryption == c.typ && c.keyMatches(aws.ToString(head.SSEKMSKeyId)) {
			return nil
		}
		e.got = c.describe(head.ServerSideEncryption, aws.ToString(head.SSEKMSKeyId))
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s3AbortTimeout)
	defer cancel()
	_, e.deleteErr = c.client.DeleteObject(dctx, &s3.DeleteObjectInput{Bucket: bucket, Key: key, VersionId: version})
	e.deleted = e.deleteErr == nil
	return e
}

// keyMatches reports whether the KMS key an object reports is the one
// requested. A key requested by alias cannot be compared (S3 reports the
// key's ARN), so only the type is checked then.
func (c *sseCheck) keyMatches(got string) bool {
	if c.kmsKey == "" || strings.HasPrefix(c.kmsKey, "alias/") || strings.Contains(c.kmsKey, ":alias/") {
		return true
	}
	keyID := func(s string) string {
		if i := strings.LastIndex(s, ":key/"); i >= 0 && strings.HasPrefix(s, "arn:") {
			return s[i+len(":key/"):]
		}
		return s
	}
	return got != "" && keyID(got) == keyID(c.kmsKey)
}

// sseByClient remembers the sseCheck of each client openS3BucketWith made,
// for checkSSE; an entry goes when its client is collected.
var sseByClient sync.Map // weak.Pointer[s3.Client] → sseWant

type sseWant struct {
	typ    types.ServerSideEncryption
	kmsKey string
}

func registerSSE(client *s3.Client, c *sseCheck) {
	k := weak.Make(client)
	sseByClient.Store(k, sseWant{typ: c.typ, kmsKey: c.kmsKey})
	runtime.AddCleanup(client, func(k weak.Pointer[s3.Client]) { sseByClient.Delete(k) }, k)
}

// checkSSE returns an error when the store requires server-side encryption
// (ssetype) and attrs, of an object already at a key, do not report it: a
// check-in must not take such an object for its own (put's holds), since
// the payload would then be stored without the encryption requested. It is
// nil for other stores and drivers.
func (s *Store) checkSSE(attrs *blob.Attributes) error {
	var client *s3.Client
	if !s.bucket.As(&client) {
		return nil
	}
	v, ok := sseByClient.Load(weak.Make(client))
	if !ok {
		return nil
	}
	want := v.(sseWant)
	c := &sseCheck{typ: want.typ, kmsKey: want.kmsKey}
	var head s3.HeadObjectOutput
	if !attrs.As(&head) {
		return &sseError{want: c.describe(c.typ, c.kmsKey), existing: true, got: "nothing readable"}
	}
	if head.ServerSideEncryption == c.typ && c.keyMatches(aws.ToString(head.SSEKMSKeyId)) {
		return nil
	}
	return &sseError{want: c.describe(c.typ, c.kmsKey), existing: true, got: c.describe(head.ServerSideEncryption, aws.ToString(head.SSEKMSKeyId))}
}

// ErrNoPresignedURL is returned (wrapped) by Store.PresignedURL for a
// payload the store cannot hand out through a presigned URL: an inline
// payload (no object), an encrypted one (the URL would serve ciphertext),
// or a store whose driver cannot presign (file://, mem://).
var ErrNoPresignedURL = errors.New("no presigned URL for this payload")

// MaxPresignTTL is the longest lifetime of a presigned URL: SigV4's limit.
const MaxPresignTTL = 7 * 24 * time.Hour

// PresignedURL returns a URL that GETs the object behind t straight from
// the store (an S3 presigned URL, SigV4 in its query) for ttl (1 s to
// MaxPresignTTL), made now and stored nowhere: never put it in a ticket or
// a message. Whoever holds it reads the object without any credential,
// and the store, not claimcheck, answers it: the bytes are not verified
// against the ticket on the way (hand out t's SHA-256 with it), and the
// URL shows the object's full key. The URL is valid only as long as the
// credentials that signed it (temporary credentials end it sooner).
//
// The ticket is checked as Claim checks it, and the object must exist and
// record t's digest and size (a HEAD; nothing is downloaded).
//
// Errors: ErrNoPresignedURL when the store encrypts payloads (the object
// holds ciphertext: serve it through claimcheck, which decrypts and
// verifies), t is inline, or the driver cannot presign; ErrConfig for a
// ttl out of range; ErrPayloadMissing; ErrPayloadCorrupt when the object
// records another digest; Claim's and the store's errors.
func (s *Store) PresignedURL(ctx context.Context, t *Ticket, ttl time.Duration) (string, error) {
	if ttl < time.Second || ttl > MaxPresignTTL {
		return "", fmt.Errorf("claimcheck: presign: lifetime %s is outside 1s to %s: %w", ttl, MaxPresignTTL, ErrConfig)
	}
	if _, err := s.Claim(t); err != nil {
		return "", err
	}
	switch {
	case t.IsInline():
		return "", fmt.Errorf("claimcheck: presign %s: the payload travels inline in its ticket, there is no object: %w", t, ErrNoPresignedURL)
	case s.seal != nil:
		return "", fmt.Errorf("claimcheck: presign %s: this store encrypts payloads, so a presigned URL would serve ciphertext: %w", t, ErrNoPresignedURL)
	}
	info, err := s.Stat(ctx, t)
	switch {
	case err != nil:
		return "", err
	case !info.Exists:
		return "", fmt.Errorf("claimcheck: presign %s: %w", t, ErrPayloadMissing)
	case info.Encrypted:
		return "", fmt.Errorf("claimcheck: presign %s: the object is encrypted, so a presigned URL would serve ciphertext: %w", t, ErrNoPresignedURL)
	case !info.MatchesTicket:
		return "", fmt.Errorf("claimcheck: presign %s: the object records another digest or size than the ticket: %w", t, ErrPayloadCorrupt)
	}
	u, err := s.bucket.SignedURL(ctx, t.Key, &blob.SignedURLOptions{Method: http.MethodGet, Expiry: ttl})
	if gcerrors.Code(err) == gcerrors.Unimplemented {
		return "", fmt.Errorf("claimcheck: presign %s: the store cannot presign URLs: %w", t, ErrNoPresignedURL)
	}
	if err != nil {
		return "", storeError("claimcheck: presign "+t.String(), err, false)
	}
	return u, nil
}
