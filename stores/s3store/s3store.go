// Package s3store adds S3 and S3-compatible stores (SeaweedFS, MinIO, Ceph,
// R2...) to claimcheck: importing it (the claimcheck command does) makes
// claimcheck.OpenStore open
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
//   - Every upload request carries a checksum the server verifies before it
//     stores anything: bytes corrupted between the spool (or the payload
//     file, read a second time: claimcheck.Store.CheckIn) and the server
//     are refused (BadDigest), not stored. A payload stored in one request
//     and not encrypted carries the ticket's own SHA-256
//     (x-amz-checksum-sha256), so the server checks the bytes against the
//     ticket; every other request (each UploadPart, an encrypted PutObject)
//     a CRC32C of its body (x-amz-checksum-crc32c), which the SDK computes
//     as it sends (a header, or over TLS an aws-chunked trailer): a cheap
//     check against transmission errors where the payload's SHA-256, already
//     computed by the check-in and verified by every claim, protects the
//     bytes end to end. For the same reason upload bodies are not signed
//     (UNSIGNED-PAYLOAD, unsignedUploads): no SHA-256 of each body for
//     SigV4 over plain HTTP. A multipart object's stored checksum is then a
//     checksum of its parts' checksums ("...-N"), not the payload's.
//     ETags are never read as hashes.
//   - Objects are created with If-None-Match: * (blob.WriterOptions.IfNotExist),
//     on PutObject and CompleteMultipartUpload, so two check-ins racing for a
//     key cannot both commit. A payload of at most 5 MiB (one PutObject) is
//     written without a HEAD of its key first: a 412 tells a key already
//     taken, which the check-in then looks at (claimcheck.Store.CheckIn). A
//     server that ignores If-None-Match is not supported.
//   - Large payloads go up in parts of s3PartSize (5 MiB, S3's minimum, until
//     the 10,000-part limit needs more), s3UploadConcurrency at a time (the
//     next part read from the spool, or from the payload file itself, while
//     the others upload): memory per check-in is about
//     (s3UploadConcurrency+2) parts whatever the size (the transfer
//     manager's pool of s3UploadConcurrency+1 part buffers, and the first
//     part, which it reads whole to tell a single PutObject from a
//     multipart upload).
//   - A failed or cancelled multipart upload is aborted with a fresh context
//     (s3AbortTimeout), so it leaves no incomplete upload behind.
//   - Every connection is bounded in time (claimcheck.NetBoundsFromURL): connect_timeout=D
//     (default claimcheck.DefaultConnectTimeout, 10 s) for each connection attempt and
//     TLS handshake, and stall_timeout=D (default claimcheck.DefaultStallTimeout, 20 s)
//     of no progress at all on an established connection, D a Go duration
//     from 100ms to 1h; both are claimcheck's URL parameters.
//
// and, for buckets OpenStore opens (not for a bucket given to NewStore):
//
//   - InvalidAccessKeyId, SignatureDoesNotMatch, ExpiredToken and their kin
//     are permission errors (claimcheck.ErrAccessDenied), as AccessDenied already is.
//   - Errors whose cause is the store's state or the URL name it
//     (claimcheck.StoreCauseError), and are never read as a missing
//     object (gcerrors.NotFound): NoSuchBucket, and a HEAD's bare 404 when
//     HeadBucket then finds no bucket (claimcheck.ErrNoBucket, with a hint
//     about use_path_style when a custom endpoint is addressed
//     virtual-host style); PermanentRedirect, a 301, AuthorizationHeaderMalformed
//     and IllegalLocationConstraintException (claimcheck.ErrWrongRegion,
//     naming the region the server reports); InvalidObjectState and
//     ObjectNotInActiveTierError (claimcheck.ErrArchived: restore the
//     object); a DNS failure for BUCKET.HOST of a custom endpoint without
//     use_path_style (claimcheck.ErrDNS, saying to add use_path_style=true).
//   - The SDK does not validate response checksums by default
//     (response_checksum_validation=when_required unless the URL says
//     otherwise): a claim verifies the payload's SHA-256 itself, and an SDK
//     validation failure would surface as a read error (transient) instead
//     of ErrPayloadCorrupt.
package s3store

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
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/dustin/go-humanize"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob" // s3:// URLs

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/ctxio"
	"github.com/claimcheck/claimcheck/lifecycle"
)

func init() { claimcheck.RegisterStoreDriver(s3blob.Scheme, driver{}) }

// driver is the claimcheck.StoreDriver of s3:// URLs.
type driver struct{}

// OpenBucket takes claimcheck's parameters (part_size, upload_concurrency,
// connect_timeout, stall_timeout) out of u and opens the bucket on a client
// of its own (openS3BucketWith).
func (driver) OpenBucket(ctx context.Context, u *url.URL) (*blob.Bucket, claimcheck.StoreHooks, error) {
	up, err := s3UploadFromURL(u)
	if err != nil {
		return nil, nil, err
	}
	b, err := openS3BucketWith(ctx, u)
	if err != nil {
		return nil, nil, err
	}
	h := &hooks{bucket: b, name: u.Host, up: up}
	var c *s3.Client
	if b.As(&c) {
		// Made now, before the client is used: s3.New writes into the
		// options' shared credentials provider (a data race with requests
		// in flight on the original client).
		h.upClient = newUploadClient(c)
		h.lifecycle = NewLifecycleManager(c, u.Host)
	}
	return b, h, nil
}

// Hooks serves any s3blob bucket (one given to claimcheck.NewStore) with
// the default part size and concurrency.
func (driver) Hooks(b *blob.Bucket) claimcheck.StoreHooks {
	var c *s3.Client
	if !b.As(&c) {
		return nil
	}
	return &hooks{bucket: b, upClient: newUploadClient(c)}
}

// hooks are the claimcheck.StoreHooks of one s3blob bucket.
type hooks struct {
	bucket *blob.Bucket
	name   string // the bucket's name, for calls s3blob does not make; "" for a bucket given to NewStore
	up     s3Upload

	upClient *s3.Client // check-ins' uploads (uploadClient); nil: the bucket's client

	lifecycle lifecycle.Manager // the bucket's (LifecycleManager); nil for a bucket given to NewStore
}

const (
	s3MinPartSize = 5 << 20 // S3's minimum part size, but for the last part
	s3MaxParts    = 10000
	// Two parts in flight while the next is read (spool or file): the
	// client is not idle while a part's request is answered (one at a
	// time left it busy about a quarter of the time).
	s3UploadConcurrency = 2
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

// UploadConcurrency is how many parts of one check-in to s, an s3:// store,
// are uploaded at once (the URL's upload_concurrency; default 2; also for
// a store that is not S3's). With PartSize, it bounds a check-in's part
// buffers: about PartSize × UploadConcurrency bytes in flight, whatever the
// payload's size.
func UploadConcurrency(s *claimcheck.Store) int { return hooksOf(s).concurrency() }

// PartSize is the part size, in bytes, of the multipart upload of a
// payload of payloadSize bytes to s, an s3:// store: the URL's part_size
// (default 5 MiB, S3's minimum), raised in whole MiB where S3's 10,000-part
// limit needs more. A payload smaller than one part goes up in a single
// PutObject.
func PartSize(s *claimcheck.Store, payloadSize int64) int64 { return hooksOf(s).partSize(payloadSize) }

// hooksOf returns s's S3 hooks, or defaults for a store that is not S3's.
func hooksOf(s *claimcheck.Store) *hooks {
	if h, ok := s.Hooks().(*hooks); ok {
		return h
	}
	return &hooks{}
}

func (h *hooks) concurrency() int {
	if h.up.concurrency > 0 {
		return h.up.concurrency
	}
	return s3UploadConcurrency
}

func (h *hooks) partSize(payloadSize int64) int64 {
	return max(s3PartSize(payloadSize), h.up.partSize)
}

// openS3BucketWith opens an s3:// URL through s3blob's own URL opener (so
// it takes the same parameters), then rebuilds the bucket on a copy of its
// client with s3ErrorCodes, the connection bounds and the SSE check added;
// apiOptions come after claimcheck's own (tests put probes on the wire
// with them).
func openS3BucketWith(ctx context.Context, u *url.URL, apiOptions ...func(*middleware.Stack) error) (*blob.Bucket, error) {
	if u.Host == "" {
		return nil, errors.New("s3 store URL needs a bucket (s3://BUCKET?region=REGION)")
	}
	v := *u
	connect, stall, err := claimcheck.NetBoundsFromURL(&v)
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
	causes := &s3Causes{bucket: u.Host, region: o.Region, pathStyle: o.UsePathStyle, endpoint: aws.ToString(o.BaseEndpoint)}
	if ep := q.Get("endpoint"); ep != "" {
		causes.endpoint = ep // s3blob sets it with a resolver, not BaseEndpoint
	}
	if ps, err := strconv.ParseBool(q.Get("use_path_style")); err == nil {
		causes.pathStyle = causes.pathStyle || ps
	}
	client := s3.New(o, func(o *s3.Options) {
		o.HTTPClient = boundedHTTPClient(o.HTTPClient, connect, stall)
		o.APIOptions = append(o.APIOptions, s3ErrorCodes, causes.middleware)
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

// boundedHTTPClient is c, an SDK HTTP client, with bounds on its
// connections (claimcheck.NetBoundsFromURL): the connect timeout on
// dialling and on the TLS handshake, and the stall watchdog of
// ctxio.Dialer on every connection.
// Idle pooled connections are closed before the watchdog would close them.
// A client that is not the SDK's buildable one is replaced by one.
func boundedHTTPClient(c aws.HTTPClient, connect, stall time.Duration) aws.HTTPClient {
	bc, ok := c.(*awshttp.BuildableClient)
	if !ok || bc == nil {
		bc = awshttp.NewBuildableClient()
	}
	d := ctxio.Dialer{Connect: connect, Stall: stall, KeepAlive: awshttp.DefaultDialKeepAliveTimeout}
	return bc.WithTransportOptions(func(tr *http.Transport) {
		tr.DialContext = d.DialContext
		tr.TLSHandshakeTimeout = connect
		if tr.IdleConnTimeout == 0 || tr.IdleConnTimeout > stall/2 {
			tr.IdleConnTimeout = stall / 2
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

// BeforeWrite implements claimcheck.StoreHooks: it prepares the upload of a
// check-in's object (a no-op when the writer is not s3blob's). up.Sealed
// means the bytes sent are ciphertext, whose digest is not known before they
// are sent.
//
// s3blob exposes the transfer manager client of this one upload; its
// options are not exported, so it is replaced whole by one configured here.
func (h *hooks) BeforeWrite(as func(any) bool, up claimcheck.Upload) error {
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
	if !h.bucket.As(&client) {
		return errors.New("s3blob bucket exposes no *s3.Client")
	}
	part := h.partSize(up.Size)
	*tm = *transfermanager.New(h.uploadClient(client), func(o *transfermanager.Options) {
		o.PartSizeBytes = part
		// Also the most buffered before the first request: the default
		// (16 MiB) would hold more than a part in memory.
		o.MultipartUploadThreshold = part
		o.Concurrency = h.concurrency()
		o.ChecksumAlgorithm = tmtypes.ChecksumAlgorithmCrc32c
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
		// AbortMultipartUpload gets a fresh context: with the default (0) it
		// would reuse the cancelled one and fail, leaving the parts behind.
		o.FailTimeout = s3AbortTimeout
	})
	in.ChecksumAlgorithm = tmtypes.ChecksumAlgorithmCrc32c
	if !up.Sealed && up.Size < part {
		// One PutObject (the body is under the multipart threshold) of the
		// plaintext: the server checks the bytes against the ticket itself,
		// and the digest is known already (nothing is hashed again).
		sum, err := hex.DecodeString(up.SHA256)
		if err != nil {
			return fmt.Errorf("ticket digest: %v", err)
		}
		in.ChecksumAlgorithm = tmtypes.ChecksumAlgorithmSha256
		in.ChecksumSHA256 = aws.String(base64.StdEncoding.EncodeToString(sum))
	}
	return nil
}

// newUploadClient is c with unsignedUploads, for check-ins' uploads. It is
// made when the hooks are (OpenBucket, Hooks: as the store is opened):
// s3.New writes into the options' shared credentials provider, a data race
// with requests in flight on c.
func newUploadClient(c *s3.Client) *s3.Client {
	return s3.New(c.Options(), func(o *s3.Options) { o.APIOptions = append(o.APIOptions, unsignedUploads) })
}

// uploadClient is the client of check-ins' uploads (newUploadClient), or
// client when there is none.
func (h *hooks) uploadClient(client *s3.Client) *s3.Client {
	if h.upClient != nil {
		return h.upClient
	}
	return client
}

// unsignedUploads is an S3 client middleware that leaves the bodies of
// PutObject and UploadPart out of the SigV4 signature (x-amz-content-sha256:
// UNSIGNED-PAYLOAD, as the SDK itself sends over TLS): the signature
// otherwise needs a SHA-256 of every body, over plain HTTP, on top of the
// payload's own digest (CheckIn) and the part's checksum. The body is still
// checked: the server verifies its CRC32C (x-amz-checksum-crc32c, a signed
// header) or, for a payload in one request, the ticket's SHA-256, against
// transmission errors; and every claim verifies the payload's SHA-256
// against the ticket, end to end, so bytes altered on the way are never
// handed to a handler (ErrPayloadCorrupt).
func unsignedUploads(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("claimcheck.UnsignedUploads",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			switch in.Parameters.(type) {
			case *s3.PutObjectInput, *s3.UploadPartInput:
				ctx = v4.SetPayloadHash(ctx, "UNSIGNED-PAYLOAD")
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
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

// StoreConfigError implements claimcheck.StoreConfigError: the store's
// configuration, not the payload, is at fault (its text names no key).
func (e *sseError) StoreConfigError() string { return e.Error() }

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
// for CheckExisting; an entry goes when its client is collected.
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

// CheckExisting implements claimcheck.StoreHooks: an error when the store
// requires server-side encryption (ssetype) and attrs, of an object already
// at a key, do not report it: a check-in must not take such an object for
// its own, since the payload would then be stored without the encryption
// requested.
func (h *hooks) CheckExisting(attrs *blob.Attributes) error {
	var client *s3.Client
	if !h.bucket.As(&client) {
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

// ReaderMetadata implements claimcheck.ReaderMetadata: the x-amz-meta-*
// headers of the read's GetObject response (blob.Reader.As gives
// *s3.GetObjectOutput), unescaped as s3blob unescapes a HEAD's for
// blob.Attributes (keys and values url.PathUnescape'd, see s3blob's
// package comment). A key s3blob would also hex-unescape (one holding
// "__0x") gives ok false: the claim then asks for the attributes, and
// s3blob unescapes them itself.
func (h *hooks) ReaderMetadata(as func(any) bool) (map[string]string, bool) {
	var out s3.GetObjectOutput
	if !as(&out) {
		return nil, false
	}
	md := make(map[string]string, len(out.Metadata))
	for k, v := range out.Metadata {
		if strings.Contains(k, "__0x") {
			return nil, false
		}
		if u, err := url.PathUnescape(k); err == nil {
			k = u
		}
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		md[k] = v
	}
	return md, true
}

// Housekeeping: what the sweeper and reuse need beyond gocloud.dev/blob.

// s3MaxCopySize is the largest object one CopyObject copies (5 GiB).
const s3MaxCopySize = 5 << 30

// client is the S3 client behind a bucket OpenStore opened, or nil.
func (h *hooks) client() *s3.Client {
	if h.name == "" {
		return nil
	}
	var client *s3.Client
	if !h.bucket.As(&client) {
		return nil
	}
	return client
}

// Refresh implements claimcheck.StoreHooks: it copies the object onto
// itself (CopyObject with its metadata replaced by the same metadata),
// which gives it a new LastModified. Objects above 5 GiB, which one
// CopyObject cannot copy, keep their first write time.
func (h *hooks) Refresh(ctx context.Context, key string) (gone bool, err error) {
	client := h.client()
	if client == nil {
		return false, nil
	}
	head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(h.name), Key: aws.String(key)})
	if err != nil {
		if isS3NotFound(err) {
			return true, nil
		}
		return false, err
	}
	if aws.ToInt64(head.ContentLength) > s3MaxCopySize {
		return false, nil
	}
	in := &s3.CopyObjectInput{
		Bucket:            aws.String(h.name),
		Key:               aws.String(key),
		CopySource:        aws.String(h.name + "/" + key),
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
		return false, fmt.Errorf("copy onto itself: %w", err)
	}
	return false, nil
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

// Clock implements claimcheck.StoreHooks: the Date header of a HeadBucket
// response (one-second resolution), the server's clock that also stamps
// LastModified and multipart uploads.
func (h *hooks) Clock(ctx context.Context) (time.Time, bool, error) {
	client := h.client()
	if client == nil {
		return time.Time{}, false, nil
	}
	out, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(h.name)})
	if err != nil {
		return time.Time{}, false, err
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

// IncompleteUploads implements claimcheck.StoreHooks, a page at a time
// (constant memory).
func (h *hooks) IncompleteUploads(ctx context.Context, prefix string, fn func(claimcheck.IncompleteUpload) error) error {
	client := h.client()
	if client == nil {
		return nil
	}
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(h.name), Prefix: aws.String(prefix)}
	for {
		out, err := client.ListMultipartUploads(ctx, in)
		if err != nil {
			return err
		}
		for _, u := range out.Uploads {
			up := claimcheck.IncompleteUpload{Key: aws.ToString(u.Key), ID: aws.ToString(u.UploadId), Initiated: aws.ToTime(u.Initiated)}
			up.Size = h.uploadedBytes(ctx, client, up)
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
func (h *hooks) uploadedBytes(ctx context.Context, client *s3.Client, u claimcheck.IncompleteUpload) int64 {
	out, err := client.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(h.name), Key: aws.String(u.Key), UploadId: aws.String(u.ID)})
	if err != nil {
		return 0
	}
	var n int64
	for _, p := range out.Parts {
		n += aws.ToInt64(p.Size)
	}
	return n
}

// AbortUpload implements claimcheck.StoreHooks.
func (h *hooks) AbortUpload(ctx context.Context, u claimcheck.IncompleteUpload) error {
	client := h.client()
	if client == nil {
		return nil
	}
	_, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(h.name), Key: aws.String(u.Key), UploadId: aws.String(u.ID)})
	if err != nil && !isS3Code(err, "NoSuchUpload") && !isS3NotFound(err) {
		return err
	}
	return nil
}
