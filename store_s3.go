package claimcheck

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob" // s3:// URLs
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
	if u.Host == "" {
		return nil, errors.New("s3 store URL needs a bucket: s3://BUCKET?region=...")
	}
	q := u.Query()
	if q.Get("response_checksum_validation") == "" {
		q.Set("response_checksum_validation", "when_required")
	}
	v := *u
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
	client := s3.New(o, func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, s3ErrorCodes)
	})
	// opener.Options now holds what the URL set (server-side encryption,
	// checksum calculation mode).
	return s3blob.OpenBucket(ctx, client, u.Host, &opener.Options)
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
	part := s3PartSize(t.Size)
	*tm = *transfermanager.New(client, func(o *transfermanager.Options) {
		o.PartSizeBytes = part
		// Also the most buffered before the first request: the default
		// (16 MiB) would hold more than a part in memory.
		o.MultipartUploadThreshold = part
		o.Concurrency = s3UploadConcurrency
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
