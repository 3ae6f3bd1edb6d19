package claimcheck_test

// Tests against a real S3-compatible server (SeaweedFS in CI: see
// scripts/seaweedfs.sh), skipped when CLAIMCHECK_TEST_S3_URL is unset. The
// shared object-store conformance suite runs on S3 too (storetest); these
// are what is particular to S3: server-verified checksums, multipart
// uploads and their abort, credentials.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"gocloud.dev/blob/s3blob"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv"
	"github.com/claimcheck/claimcheck/storetest"
)

const s3URLEnv = "CLAIMCHECK_TEST_S3_URL"

// s3Bundle is an S3 store opened with OpenStore, the client behind it and
// a tenant of the test's own.
type s3Bundle struct {
	ctx    context.Context
	url    string
	bucket string
	store  *claimcheck.Store
	client *s3.Client
	tenant string
}

func s3URL(t *testing.T) string {
	t.Helper()
	return testenv.Require(t, s3URLEnv, `scripts/seaweedfs.sh build && scripts/seaweedfs.sh start && eval "$(scripts/seaweedfs.sh env)"`)
}

func setupS3(t *testing.T, opts *claimcheck.Options) *s3Bundle {
	t.Helper()
	raw := s3URL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := openS3Store(t, raw, opts)
	var c *s3.Client
	if !s.Bucket().As(&c) {
		t.Fatal("an s3:// store's bucket exposes no *s3.Client")
	}
	return &s3Bundle{ctx: t.Context(), url: raw, bucket: u.Host, store: s, client: c, tenant: storetest.NewTenant(t, s)}
}

// openS3Store opens a store at rawURL with OpenStore, closed when t ends.
func openS3Store(t *testing.T, rawURL string, opts *claimcheck.Options) *claimcheck.Store {
	t.Helper()
	var o claimcheck.Options
	if opts != nil {
		o = *opts
	}
	o.SpoolDir = t.TempDir()
	s, err := claimcheck.OpenStore(t.Context(), rawURL, &o)
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// derived returns a store over the same bucket whose client adds apiOptions
// to every request: the probes the tests below put on the wire.
func (b *s3Bundle) derived(t *testing.T, opts *claimcheck.Options, apiOptions ...func(*middleware.Stack) error) *claimcheck.Store {
	t.Helper()
	c := s3.New(b.client.Options(), func(o *s3.Options) { o.APIOptions = append(o.APIOptions, apiOptions...) })
	bk, err := s3blob.OpenBucket(b.ctx, c, b.bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bk.Close() })
	var o claimcheck.Options
	if opts != nil {
		o = *opts
	}
	o.Name = b.store.Name()
	o.SpoolDir = t.TempDir()
	s, err := claimcheck.NewStore(bk, &o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// uploads lists the incomplete multipart uploads under prefix.
func (b *s3Bundle) uploads(t *testing.T, prefix string) []types.MultipartUpload {
	t.Helper()
	out, err := b.client.ListMultipartUploads(b.ctx, &s3.ListMultipartUploadsInput{Bucket: &b.bucket, Prefix: &prefix})
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	return out.Uploads
}

func (b *s3Bundle) exists(t *testing.T, key string) bool {
	t.Helper()
	_, err := b.client.HeadObject(b.ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key})
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchKey") {
		return false
	}
	if err != nil {
		t.Fatalf("HeadObject: %v", err)
	}
	return true
}

// request is one HTTP request as sent, after signing.
type request struct {
	op     string
	query  url.Values
	header http.Header
}

type recorder struct {
	mu   sync.Mutex
	reqs []request
}

// record is a client option that records every request as it leaves.
func (r *recorder) record(stack *middleware.Stack) error {
	op := stack.ID()
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("test.Record",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok {
				r.mu.Lock()
				r.reqs = append(r.reqs, request{op: op, query: req.URL.Query(), header: req.Header.Clone()})
				r.mu.Unlock()
			}
			return next.HandleDeserialize(ctx, in)
		}), middleware.After)
}

func (r *recorder) ops(op string) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []request
	for _, q := range r.reqs {
		if q.op == op {
			out = append(out, q)
		}
	}
	return out
}

func b64sha256(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

func hexToB64(t *testing.T, h string) string {
	t.Helper()
	var raw [32]byte
	for i := range raw {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		raw[i] = byte(v)
	}
	return base64.StdEncoding.EncodeToString(raw[:])
}

// TestS3ServerRefusesWrongChecksum shows the mechanism check-ins rely on:
// the server refuses bytes that do not match the SHA-256 they are sent with,
// in one PutObject and in one part of a multipart upload, and stores
// nothing.
func TestS3ServerRefusesWrongChecksum(t *testing.T) {
	t.Parallel()
	b := setupS3(t, nil)
	body := storetest.Payload(1, 64<<10)
	wrong := b64sha256(append(bytes.Clone(body), 0))
	key := claimcheck.PrefixPayloads + b.tenant + "/wrong-checksum"

	_, err := b.client.PutObject(b.ctx, &s3.PutObjectInput{Bucket: &b.bucket, Key: &key, Body: bytes.NewReader(body), ChecksumSHA256: &wrong})
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("PutObject with a wrong x-amz-checksum-sha256: %v, want the server to refuse it", err)
	}
	t.Logf("PutObject with a wrong checksum: %s (%s)", ae.ErrorCode(), ae.ErrorMessage())
	if b.exists(t, key) {
		t.Fatal("the server stored an object whose checksum did not match")
	}
	right := b64sha256(body)
	if _, err := b.client.PutObject(b.ctx, &s3.PutObjectInput{Bucket: &b.bucket, Key: &key, Body: bytes.NewReader(body), ChecksumSHA256: &right}); err != nil {
		t.Fatalf("PutObject with the right checksum: %v", err)
	}
	if _, err := b.client.DeleteObject(b.ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key}); err != nil {
		t.Fatal(err)
	}

	mpu, err := b.client.CreateMultipartUpload(b.ctx, &s3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &key, ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	defer b.client.AbortMultipartUpload(context.WithoutCancel(b.ctx), &s3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &key, UploadId: mpu.UploadId})
	_, err = b.client.UploadPart(b.ctx, &s3.UploadPartInput{Bucket: &b.bucket, Key: &key, UploadId: mpu.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(body), ChecksumSHA256: &wrong})
	if !errors.As(err, &ae) {
		t.Fatalf("UploadPart with a wrong x-amz-checksum-sha256: %v, want the server to refuse it", err)
	}
	t.Logf("UploadPart with a wrong checksum: %s", ae.ErrorCode())

	// CRC32C, the part checksum of check-ins, is verified too: a wrong one
	// is refused, the right one taken, in one PutObject and in a part.
	wrongCRC, rightCRC := b64crc32c(append(bytes.Clone(body), 0)), b64crc32c(body)
	key2 := key + "-crc32c"
	_, err = b.client.PutObject(b.ctx, &s3.PutObjectInput{Bucket: &b.bucket, Key: &key2, Body: bytes.NewReader(body), ChecksumCRC32C: &wrongCRC})
	if !errors.As(err, &ae) {
		t.Fatalf("PutObject with a wrong x-amz-checksum-crc32c: %v, want the server to refuse it", err)
	}
	t.Logf("PutObject with a wrong CRC32C: %s (%s)", ae.ErrorCode(), ae.ErrorMessage())
	if b.exists(t, key2) {
		t.Fatal("the server stored an object whose CRC32C did not match")
	}
	mpu2, err := b.client.CreateMultipartUpload(b.ctx, &s3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &key2, ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
	if err != nil {
		t.Fatal(err)
	}
	defer b.client.AbortMultipartUpload(context.WithoutCancel(b.ctx), &s3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &key2, UploadId: mpu2.UploadId})
	_, err = b.client.UploadPart(b.ctx, &s3.UploadPartInput{Bucket: &b.bucket, Key: &key2, UploadId: mpu2.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(body), ChecksumCRC32C: &wrongCRC})
	if !errors.As(err, &ae) {
		t.Fatalf("UploadPart with a wrong x-amz-checksum-crc32c: %v, want the server to refuse it", err)
	}
	t.Logf("UploadPart with a wrong CRC32C: %s (%s)", ae.ErrorCode(), ae.ErrorMessage())
	if _, err := b.client.UploadPart(b.ctx, &s3.UploadPartInput{Bucket: &b.bucket, Key: &key2, UploadId: mpu2.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(body), ChecksumCRC32C: &rightCRC}); err != nil {
		t.Fatalf("UploadPart with the right CRC32C: %v", err)
	}
}

// b64crc32c is the base64 CRC32C (Castagnoli) of b, as x-amz-checksum-crc32c carries it.
func b64crc32c(b []byte) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// TestS3CheckInSendsChecksums shows what put sends: the ticket's own
// SHA-256 when the payload goes up in one request unencrypted, a CRC32C of
// the body on every UploadPart and encrypted PutObject, unsigned bodies (no
// second SHA-256), If-None-Match: * on the request that creates the
// object, and parts of 5 MiB; and that the server recorded the checksum it
// verified.
func TestS3CheckInSendsChecksums(t *testing.T) {
	t.Parallel()
	b := setupS3(t, nil)
	var rec recorder
	s := b.derived(t, nil, rec.record)

	// One PutObject: the checksum is the ticket's digest.
	small := storetest.Payload(2, 200<<10)
	tk, err := s.CheckIn(b.ctx, b.tenant, bytes.NewReader(small), nil)
	if err != nil {
		t.Fatal(err)
	}
	puts := rec.ops("PutObject")
	if len(puts) != 1 {
		t.Fatalf("%d PutObject requests for a 200 KiB check-in, want 1", len(puts))
	}
	h := puts[0].header
	if got, want := h.Get("X-Amz-Checksum-Sha256"), hexToB64(t, tk.SHA256); got != want {
		t.Fatalf("PutObject x-amz-checksum-sha256 = %q, want the ticket's digest %q", got, want)
	}
	if h.Get("If-None-Match") != "*" {
		t.Fatalf("PutObject If-None-Match = %q, want *", h.Get("If-None-Match"))
	}
	if got := h.Get("X-Amz-Content-Sha256"); got != "UNSIGNED-PAYLOAD" {
		t.Fatalf("PutObject x-amz-content-sha256 = %q, want UNSIGNED-PAYLOAD (the body's digest is the checksum already)", got)
	}
	head, err := b.client.HeadObject(b.ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &tk.Key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(head.ChecksumSHA256); got != hexToB64(t, tk.SHA256) {
		t.Fatalf("the server recorded checksum %q, want the ticket's digest", got)
	}

	// Multipart: every part carries the SHA-256 of its own bytes.
	large := storetest.Payload(3, 12<<20)
	tk, err = s.CheckIn(b.ctx, b.tenant, bytes.NewReader(large), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := rec.ops("CreateMultipartUpload"); len(c) != 1 || c[0].header.Get("X-Amz-Checksum-Algorithm") != "CRC32C" {
		t.Fatalf("CreateMultipartUpload requests: %d, want one with x-amz-checksum-algorithm CRC32C", len(c))
	}
	parts := rec.ops("UploadPart")
	if len(parts) != 3 {
		t.Fatalf("%d UploadPart requests for 12 MiB, want 3 parts of at most 5 MiB", len(parts))
	}
	for _, p := range parts {
		n, _ := strconv.Atoi(p.query.Get("partNumber"))
		lo, hi := (n-1)*(5<<20), min(n*(5<<20), len(large))
		if n < 1 || lo >= len(large) {
			t.Fatalf("part number %q", p.query.Get("partNumber"))
		}
		if got := p.header.Get("X-Amz-Checksum-Crc32c"); got != b64crc32c(large[lo:hi]) {
			t.Fatalf("part %d: x-amz-checksum-crc32c = %q, want the CRC32C of bytes %d-%d", n, got, lo, hi)
		}
		if got := p.header.Get("X-Amz-Content-Sha256"); got != "UNSIGNED-PAYLOAD" {
			t.Fatalf("part %d: x-amz-content-sha256 = %q, want UNSIGNED-PAYLOAD (no second SHA-256 of the body)", n, got)
		}
	}
	if c := rec.ops("CompleteMultipartUpload"); len(c) != 1 || c[0].header.Get("If-None-Match") != "*" {
		t.Fatal("CompleteMultipartUpload: want one, with If-None-Match: *")
	}
	head, err = b.client.HeadObject(b.ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &tk.Key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("12 MiB object: checksum %s (a checksum of the parts' checksums, not the payload's)", aws.ToString(head.ChecksumSHA256))
	if got := storetest.ClaimBytes(t, b.store, tk); !bytes.Equal(got, large) {
		t.Fatal("the multipart object claims other bytes")
	}

	// Encrypted: the checksum is the SHA-256 of the ciphertext sent.
	enc := b.derived(t, &claimcheck.Options{Keeper: newKeeper(t)}, rec.record)
	before := len(rec.ops("PutObject"))
	tk, err = enc.CheckIn(b.ctx, b.tenant, bytes.NewReader(storetest.Payload(8, 200<<10)), nil)
	if err != nil {
		t.Fatal(err)
	}
	puts = rec.ops("PutObject")[before:]
	raw, err := enc.Bucket().ReadAll(b.ctx, tk.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(puts) != 1 || puts[0].header.Get("X-Amz-Checksum-Crc32c") != b64crc32c(raw) {
		t.Fatal("encrypted check-in: want one PutObject carrying the CRC32C of the ciphertext stored")
	}
}

// corruptBody is a client option that flips one byte in the body of the
// first request of op once it is signed and its checksum computed: bytes
// damaged on the way to the server. The payload hash is left out of the
// signature (UNSIGNED-PAYLOAD, as over TLS), so that only the checksum
// stands between the damaged bytes and the store.
func corruptBody(op string, done *atomic.Bool) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		if stack.ID() != op {
			return nil
		}
		if err := v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware(stack); err != nil {
			return err
		}
		return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("test.Corrupt",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				req, ok := in.Request.(*smithyhttp.Request)
				if ok && req.GetStream() != nil && done.CompareAndSwap(false, true) {
					body, err := io.ReadAll(req.GetStream())
					if err != nil {
						return middleware.DeserializeOutput{}, middleware.Metadata{}, err
					}
					if len(body) > 0 {
						body[len(body)/2] ^= 0x01
					}
					if in.Request, err = req.SetStream(bytes.NewReader(body)); err != nil {
						return middleware.DeserializeOutput{}, middleware.Metadata{}, err
					}
				}
				return next.HandleDeserialize(ctx, in)
			}), middleware.After)
	}
}

// TestS3CorruptedUploadRefused damages the bytes of a check-in on their way
// to the server, in a PutObject and in one part of a multipart upload: the
// server refuses them, the check-in fails as transient (a retry sends them
// again), nothing is stored and no upload is left open; the retry succeeds.
func TestS3CorruptedUploadRefused(t *testing.T) {
	t.Parallel()
	b := setupS3(t, nil)
	for _, c := range []struct {
		op   string
		size int64
	}{{"PutObject", 300 << 10}, {"UploadPart", 12 << 20}} {
		t.Run(c.op, func(t *testing.T) {
			var corrupted atomic.Bool
			s := b.derived(t, nil, corruptBody(c.op, &corrupted))
			data := storetest.Payload(uint64(c.size), c.size)
			_, err := s.CheckIn(b.ctx, b.tenant, bytes.NewReader(data), nil)
			if !corrupted.Load() {
				t.Fatalf("no %s request was corrupted", c.op)
			}
			var ae smithy.APIError
			if err == nil || !errors.As(err, &ae) {
				t.Fatalf("check-in of bytes damaged in transit: %v, want the server to refuse them", err)
			}
			t.Logf("server refused the damaged %s: %s", c.op, ae.ErrorCode())
			if !errors.Is(err, claimcheck.ErrUnavailable) || claimcheck.IsPermanent(err) {
				t.Fatalf("refused upload: %v, want ErrUnavailable (transient)", err)
			}
			prefix := claimcheck.PrefixPayloads + b.tenant + "/"
			if keys := storetest.Keys(t, b.store, prefix); len(keys) != 0 {
				t.Fatalf("a refused upload left %d objects", len(keys))
			}
			if u := b.uploads(t, prefix); len(u) != 0 {
				t.Fatalf("a refused upload left %d multipart uploads open", len(u))
			}
			tk, err := s.CheckIn(b.ctx, b.tenant, bytes.NewReader(data), nil) // nothing corrupts the retry
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if got := storetest.ClaimBytes(t, b.store, tk); !bytes.Equal(got, data) {
				t.Fatal("retried check-in claims other bytes")
			}
			if err := storetest.DeleteObject(b.ctx, b.store, tk.Key); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// cancelOn is a client option that cancels a check-in (cancel) when the
// n-th request of op is about to be sent.
func cancelOn(op string, n int32, cancel context.CancelFunc) func(*middleware.Stack) error {
	var seen atomic.Int32
	return func(stack *middleware.Stack) error {
		if stack.ID() != op {
			return nil
		}
		return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("test.Cancel",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				if seen.Add(1) == n {
					cancel()
				}
				return next.HandleDeserialize(ctx, in)
			}), middleware.After)
	}
}

// TestS3CancelledMultipartLeavesNothing cancels a multipart check-in at
// each of its steps: no object, and no incomplete upload holding parts
// (ListMultipartUploads), whichever step the cancellation hits.
func TestS3CancelledMultipartLeavesNothing(t *testing.T) {
	t.Parallel()
	b := setupS3(t, nil)
	data := storetest.Payload(4, 12<<20)
	prefix := claimcheck.PrefixPayloads + b.tenant + "/"
	for _, c := range []struct {
		op string
		n  int32
	}{{"CreateMultipartUpload", 1}, {"UploadPart", 1}, {"UploadPart", 2}, {"UploadPart", 3}, {"CompleteMultipartUpload", 1}} {
		t.Run(c.op+"#"+strconv.Itoa(int(c.n)), func(t *testing.T) {
			ctx, cancel := context.WithCancel(b.ctx)
			defer cancel()
			var rec recorder
			s := b.derived(t, nil, cancelOn(c.op, c.n, cancel), rec.record)
			_, err := s.CheckIn(ctx, b.tenant, bytes.NewReader(data), nil)
			if !errors.Is(err, claimcheck.ErrUnavailable) || !errors.Is(err, context.Canceled) {
				t.Fatalf("check-in cancelled at %s #%d: %v, want ErrUnavailable wrapping context.Canceled", c.op, c.n, err)
			}
			if keys := storetest.Keys(t, b.store, prefix); len(keys) != 0 {
				t.Fatalf("cancelled check-in left %d objects", len(keys))
			}
			if u := b.uploads(t, prefix); len(u) != 0 {
				t.Fatalf("cancelled check-in left %d multipart uploads open", len(u))
			}
			if c.op != "CreateMultipartUpload" && len(rec.ops("AbortMultipartUpload")) != 1 {
				t.Fatalf("%d AbortMultipartUpload requests, want 1", len(rec.ops("AbortMultipartUpload")))
			}
		})
	}
}

// TestS3DeletedObjectMissing: an object deleted behind the store's back
// (lifecycle expiry, an operator) claims as ErrPayloadMissing, permanent,
// with and without encryption.
func TestS3DeletedObjectMissing(t *testing.T) {
	t.Parallel()
	for _, enc := range []bool{false, true} {
		t.Run("encrypted="+strconv.FormatBool(enc), func(t *testing.T) {
			// No NotFound grace: within it (2 minutes by default) a
			// missing object is not visible yet, not missing.
			opts := &claimcheck.Options{NotFoundGrace: -1}
			if enc {
				opts.Keeper = newKeeper(t)
			}
			b := setupS3(t, opts)
			tk, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(storetest.Payload(5, 100<<10)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.client.DeleteObject(b.ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &tk.Key}); err != nil {
				t.Fatal(err)
			}
			p, err := b.store.Claim(tk)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			err = p.Verify(b.ctx)
			if !errors.Is(err, claimcheck.ErrPayloadMissing) || !claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonPayloadMissing {
				t.Fatalf("claim of a deleted object: %v, want ErrPayloadMissing (permanent)", err)
			}
		})
	}
}

// TestS3WrongCredentials: credentials the server refuses are
// ErrAccessDenied, transient (an operator fixes them while jobs wait), on
// check-in, claim and stat, for an object that exists and one that does
// not: never ErrPayloadMissing.
func TestS3WrongCredentials(t *testing.T) {
	good := setupS3(t, nil)
	tk, err := good.store.CheckIn(good.ctx, good.tenant, bytes.NewReader(storetest.Payload(6, 100<<10)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ghost := *tk
	ghost.Key = claimcheck.PrefixPayloads + good.tenant + "/named/never-written"
	for _, creds := range []struct{ name, id, secret string }{
		{"unknown key", "claimcheck-nobody", "whatever-secret"},
		{"wrong secret", os.Getenv("AWS_ACCESS_KEY_ID"), "not-the-secret"},
	} {
		t.Run(strings.ReplaceAll(creds.name, " ", "_"), func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", creds.id)
			t.Setenv("AWS_SECRET_ACCESS_KEY", creds.secret)
			t.Setenv("AWS_SESSION_TOKEN", "")
			s := openS3Store(t, good.url, nil)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, claimcheck.ErrAccessDenied) || claimcheck.IsPermanent(err) ||
					errors.Is(err, claimcheck.ErrPayloadMissing) || claimcheck.Reason(err) != claimcheck.ReasonAccessDenied {
					var hint string
					var ae smithy.APIError
					if errors.As(err, &ae) && ae.ErrorCode() != "AccessDenied" && ae.ErrorCode() != "Forbidden" {
						hint = "; the store's S3 client reports " + ae.ErrorCode() + " as is: does OpenStore open s3:// URLs with openBucket (store_s3.go)?"
					}
					t.Errorf("%s with %s: %v (reason %q), want ErrAccessDenied, transient%s", what, creds.name, err, claimcheck.Reason(err), hint)
				}
			}
			_, err := s.CheckIn(good.ctx, good.tenant, bytes.NewReader(storetest.Payload(7, 100<<10)), nil)
			check("check-in", err)
			for _, tk := range []*claimcheck.Ticket{tk, &ghost} {
				p, err := s.Claim(tk)
				if err != nil {
					t.Fatal(err)
				}
				check("claim", p.Verify(good.ctx))
				p.Close()
				_, err = s.Stat(good.ctx, tk)
				check("stat", err)
			}
		})
	}
}

// barrier is a client option that holds each request of op until n of them
// are waiting (or a timeout passes), then lets them all go at once.
func barrier(op string, n int) func(*middleware.Stack) error {
	var mu sync.Mutex
	waiting := 0
	all := make(chan struct{})
	return func(stack *middleware.Stack) error {
		if stack.ID() != op {
			return nil
		}
		return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("test.Barrier",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				mu.Lock()
				if waiting++; waiting == n {
					close(all)
				}
				mu.Unlock()
				select {
				case <-all:
				case <-time.After(20 * time.Second):
				}
				return next.HandleDeserialize(ctx, in)
			}), middleware.After)
	}
}

// TestS3ConcurrentMultipartConflict races two multipart check-ins of
// different bytes under one name to CompleteMultipartUpload: the server's
// If-None-Match lets exactly one commit, the other is ErrKeyConflict, and
// the loser's parts are aborted.
func TestS3ConcurrentMultipartConflict(t *testing.T) {
	t.Parallel()
	b := setupS3(t, nil)
	hold := barrier("CompleteMultipartUpload", 2)
	var rec recorder
	s := b.derived(t, nil, hold, rec.record)
	payloads := [][]byte{storetest.Payload(10, 11<<20), storetest.Payload(11, 11<<20)}
	tickets := make([]*claimcheck.Ticket, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range payloads {
		wg.Go(func() {
			tickets[i], errs[i] = s.CheckIn(b.ctx, b.tenant, bytes.NewReader(payloads[i]), &claimcheck.CheckInOptions{Name: "big"})
		})
	}
	wg.Wait()
	if n := len(rec.ops("CompleteMultipartUpload")); n != 2 {
		t.Fatalf("%d CompleteMultipartUpload requests, want both check-ins to reach it", n)
	}
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatal("both multipart check-ins of different bytes under one name committed")
		case err == nil:
			winner = i
		case !errors.Is(err, claimcheck.ErrKeyConflict):
			t.Fatalf("losing check-in: %v, want ErrKeyConflict", err)
		}
	}
	if winner < 0 {
		t.Fatalf("neither check-in committed: %v; %v", errs[0], errs[1])
	}
	if got := storetest.ClaimBytes(t, b.store, tickets[winner]); !bytes.Equal(got, payloads[winner]) {
		t.Fatal("the object does not hold the winner's bytes")
	}
	if u := b.uploads(t, claimcheck.PrefixPayloads+b.tenant+"/"); len(u) != 0 {
		t.Fatalf("the losing check-in left %d multipart uploads open", len(u))
	}
}

// TestS3SealSegmentSize: on S3 a payload is encrypted once it is hashed,
// its size known: at most 1 MiB is sealed with 4 KiB segments (no 1 MiB
// segment buffers on its check-in and claims), more with 1 MiB segments.
// Each object holds the ciphertext of that segment size and is claimed
// back exactly.
func TestS3SealSegmentSize(t *testing.T) {
	t.Parallel()
	b := setupS3(t, &claimcheck.Options{Keeper: newKeeper(t), AlwaysOffload: true})
	for i, tc := range []struct {
		size, seg int
	}{{100 << 10, 4 << 10}, {1 << 20, 4 << 10}, {1<<20 + 1, 1 << 20}} {
		data := randomBytes(tc.size, uint64(1000+i))
		tk, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(data), nil)
		if err != nil {
			t.Fatal(err)
		}
		head, err := b.client.HeadObject(b.ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &tk.Key})
		if err != nil {
			t.Fatalf("HeadObject: %v", err)
		}
		if want := int64(sealedSizeSegments(tc.size, tc.seg)); aws.ToInt64(head.ContentLength) != want {
			t.Fatalf("%d bytes: object is %d bytes, want %d (%d-byte segments)", tc.size, aws.ToInt64(head.ContentLength), want, tc.seg)
		}
		got, err := readAllOpen(b.ctx, b.store, tk)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: claimed %d bytes, %v", tc.size, len(got), err)
		}
	}
}
