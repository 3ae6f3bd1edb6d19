package s3store

// Server-side encryption on a real S3 server (SeaweedFS: see
// scripts/seaweedfs.sh), skipped when CLAIMCHECK_TEST_S3_URL is unset:
// requested with s3blob's ssetype/kmskeyid parameters, verified by sseCheck
// after every object is created. Internal tests, so that a probe can be put
// on the store's own client (openS3BucketWith).
//
// SSE-KMS needs a KMS behind the server. SeaweedFS has one only when its
// S3 config has a "kms" block; set CLAIMCHECK_TEST_S3_SSE_KMS_KEY to a key
// id (and CLAIMCHECK_TEST_S3_SSE_KMS_URL to that server's store URL, if it
// is not CLAIMCHECK_TEST_S3_URL) to run the SSE-KMS tests.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"gocloud.dev/blob"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

const (
	sseS3URLEnv     = "CLAIMCHECK_TEST_S3_URL"
	sseKMSKeyEnv    = "CLAIMCHECK_TEST_S3_SSE_KMS_KEY"
	sseKMSURLEnv    = "CLAIMCHECK_TEST_S3_SSE_KMS_URL"
	hdrSSE          = "X-Amz-Server-Side-Encryption"
	hdrSSEKMSKeyID  = "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"
	sseSmallPayload = 200 << 10 // one PutObject
	sseLargePayload = 12 << 20  // multipart: three parts
)

func sseBaseURL(t *testing.T) string {
	t.Helper()
	return testenv.Require(t, sseS3URLEnv, `scripts/seaweedfs.sh build && scripts/seaweedfs.sh start && eval "$(scripts/seaweedfs.sh env)"`)
}

// withParams returns raw with query parameters added.
func withParams(t *testing.T, raw string, kv ...string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u
}

// sseBundle is a store opened like claimcheck.OpenStore opens it (openS3BucketWith),
// with probes on its client, and a plain client of the same bucket for
// looking at what was stored.
type sseBundle struct {
	ctx    context.Context
	store  *claimcheck.Store
	client *s3.Client
	bucket string
	tenant string
}

func setupSSE(t *testing.T, u *url.URL, apiOptions ...func(*middleware.Stack) error) *sseBundle {
	t.Helper()
	b, err := openS3BucketWith(t.Context(), u, apiOptions...)
	if err != nil {
		t.Fatalf("open %s with ssetype=%q: %v", u.Host, u.Query().Get("ssetype"), err)
	}
	t.Cleanup(func() { b.Close() })
	s, err := claimcheck.NewStore(b, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("no *s3.Client")
	}
	var id [6]byte
	rand.Read(id[:])
	return &sseBundle{ctx: t.Context(), store: s, client: c, bucket: u.Host, tenant: "sse-" + hex.EncodeToString(id[:])}
}

func ssePayload(seed byte, n int) []byte {
	out := make([]byte, 0, n)
	block := sha256.Sum256([]byte{seed})
	for len(out) < n {
		out = append(out, block[:]...)
		block = sha256.Sum256(block[:])
	}
	return out[:n]
}

// head returns the object's HEAD, or nil when it does not exist.
func (b *sseBundle) head(t *testing.T, key string) *s3.HeadObjectOutput {
	t.Helper()
	h, err := b.client.HeadObject(b.ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		var nf *types.NotFound
		if errors.As(err, &nf) || strings.Contains(err.Error(), "NotFound") {
			return nil
		}
		t.Fatalf("HeadObject: %v", err)
	}
	return h
}

// leftovers lists the objects and open multipart uploads under the
// bundle's tenant.
func (b *sseBundle) leftovers(t *testing.T) (objects, uploads int) {
	t.Helper()
	prefix := claimcheck.PrefixPayloads + b.tenant + "/"
	it := b.store.Bucket().List(&blob.ListOptions{Prefix: prefix})
	for {
		_, err := it.Next(b.ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		objects++
	}
	out, err := b.client.ListMultipartUploads(b.ctx, &s3.ListMultipartUploadsInput{Bucket: &b.bucket, Prefix: &prefix})
	if err != nil {
		t.Fatal(err)
	}
	return objects, len(out.Uploads)
}

func (b *sseBundle) claim(t *testing.T, tk *claimcheck.Ticket) []byte {
	t.Helper()
	p, err := b.store.Claim(tk)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, err := p.Open(b.ctx)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// sseHeaders records the SSE headers of each request as signed and sent.
type sseHeaders struct {
	mu   sync.Mutex
	seen map[string][]string // operation → x-amz-server-side-encryption values
}

func (h *sseHeaders) record(stack *middleware.Stack) error {
	op := stack.ID()
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("test.SSEHeaders",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok {
				h.mu.Lock()
				if h.seen == nil {
					h.seen = map[string][]string{}
				}
				h.seen[op] = append(h.seen[op], req.Header.Get(hdrSSE))
				h.mu.Unlock()
			}
			return next.HandleDeserialize(ctx, in)
		}), middleware.After)
}

func (h *sseHeaders) ops(op string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[op]
}

// rewriteHeader is a client option that sets (or, with value "", removes)
// a header of every request before it is signed: a store, or a proxy in
// front of it, that does not pass the encryption requested on.
func rewriteHeader(name, value string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Build.Add(middleware.BuildMiddlewareFunc("test.RewriteHeader",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok && req.Header.Get(name) != "" {
					if value == "" {
						req.Header.Del(name)
					} else {
						req.Header.Set(name, value)
					}
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	}
}

// TestS3SSES3Applied: with ssetype=AES256 every object-creating request
// carries the header, the server (SeaweedFS applies SSE-S3) reports it on
// each object, single-part and multipart, and the payload claims back.
func TestS3SSES3Applied(t *testing.T) {
	t.Parallel()
	var rec sseHeaders
	b := setupSSE(t, withParams(t, sseBaseURL(t), "ssetype", "AES256"), rec.record)
	for _, n := range []int{sseSmallPayload, sseLargePayload} {
		data := ssePayload(byte(n), n)
		heads := len(rec.ops("HeadObject"))
		tk, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(data), nil)
		if err != nil {
			t.Fatalf("check-in of %d bytes with SSE-S3: %v", n, err)
		}
		// One HEAD after the object is created (the verification); a
		// payload of more than 5 MiB one before too (holds: the key is
		// looked at before a multipart upload, not before one request).
		want := 1
		if n > 5<<20 {
			want = 2
		}
		if heads = len(rec.ops("HeadObject")) - heads; heads != want {
			t.Errorf("%d bytes: %d HeadObject requests, want %d", n, heads, want)
		}
		h := b.head(t, tk.Key)
		if h == nil || h.ServerSideEncryption != types.ServerSideEncryptionAes256 {
			t.Fatalf("%d bytes: the object reports server-side encryption %v, want AES256", n, h)
		}
		if got := b.claim(t, tk); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: claimed other bytes", n)
		}
	}
	for _, op := range []string{"PutObject", "CreateMultipartUpload"} {
		vals := rec.ops(op)
		if len(vals) != 1 || vals[0] != "AES256" {
			t.Errorf("%s requests sent %s %q, want one with AES256", op, hdrSSE, vals)
		}
	}
}

// TestS3SSENotAppliedFails: SSE-S3 requested, but the header does not
// reach the server (as with a store or proxy that ignores it): the object
// is stored unencrypted, the verification sees it, deletes it, and the
// check-in fails; nothing is left, in one PutObject or multipart.
func TestS3SSENotAppliedFails(t *testing.T) {
	t.Parallel()
	var rec sseHeaders
	b := setupSSE(t, withParams(t, sseBaseURL(t), "ssetype", "AES256"), rewriteHeader(hdrSSE, ""), rec.record)
	for _, n := range []int{sseSmallPayload, sseLargePayload} {
		tk, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(ssePayload(byte(n), n)), nil)
		if err == nil {
			t.Fatalf("check-in of %d bytes succeeded though the object is not encrypted: %s", n, tk)
		}
		t.Logf("%d bytes: %v", n, err)
		var se *sseError
		if !errors.As(err, &se) || !se.deleted || se.existing {
			t.Fatalf("%d bytes: %v, want an *sseError that deleted the object", n, err)
		}
		if se.got != "" || se.want != "AES256" {
			t.Errorf("sseError want %q got %q, want AES256 and none", se.want, se.got)
		}
		if claimcheck.IsPermanent(err) || !(errors.Is(err, claimcheck.ErrConfig) || errors.Is(err, claimcheck.ErrUnavailable)) {
			t.Errorf("%d bytes: %v (reason %s), want a transient or configuration error", n, err, claimcheck.Reason(err))
		}
		if strings.Contains(err.Error(), b.tenant+"/") {
			t.Errorf("the error names the object key: %v", err)
		}
	}
	if objects, uploads := b.leftovers(t); objects != 0 || uploads != 0 {
		t.Fatalf("failed check-ins left %d objects and %d multipart uploads", objects, uploads)
	}
	for _, op := range []string{"PutObject", "CreateMultipartUpload"} {
		if vals := rec.ops(op); len(vals) != 1 || vals[0] != "" {
			t.Fatalf("%s sent %s %q: the probe did not strip it", op, hdrSSE, vals)
		}
	}
	if n := len(rec.ops("DeleteObject")); n != 2 {
		t.Errorf("%d DeleteObject requests, want 2", n)
	}
}

// TestS3SSEKMSNeverStoredWithout requests SSE-KMS from the test server,
// whatever its configuration: either the check-in succeeds and the object
// reports aws:kms with the key, or it fails and nothing is stored (a
// SeaweedFS without a KMS answers 500 InternalError: "KMS is not
// configured").
func TestS3SSEKMSNeverStoredWithout(t *testing.T) {
	t.Parallel()
	raw, key := sseBaseURL(t), "claimcheck-test-key"
	if os.Getenv(sseKMSKeyEnv) != "" && os.Getenv(sseKMSURLEnv) == "" {
		key = os.Getenv(sseKMSKeyEnv)
	}
	b := setupSSE(t, withParams(t, raw, "ssetype", "aws:kms", "kmskeyid", key))
	for _, n := range []int{sseSmallPayload, sseLargePayload} {
		tk, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(ssePayload(byte(n), n)), nil)
		if err != nil {
			t.Logf("%d bytes: SSE-KMS not available, check-in failed: %v", n, err)
			if claimcheck.IsPermanent(err) {
				t.Errorf("%v is permanent, want transient", err)
			}
			continue
		}
		h := b.head(t, tk.Key)
		if h == nil || h.ServerSideEncryption != types.ServerSideEncryptionAwsKms || !strings.HasSuffix(aws.ToString(h.SSEKMSKeyId), key) {
			t.Fatalf("%d bytes: checked in, but the object reports %v", n, h)
		}
		t.Logf("%d bytes: stored with aws:kms, key %s", n, aws.ToString(h.SSEKMSKeyId))
	}
	if objects, uploads := b.leftovers(t); objects+uploads > 0 {
		// Only objects whose encryption was verified may remain.
		t.Logf("%d objects, %d open uploads remain (verified above)", objects, uploads)
		if uploads != 0 {
			t.Fatalf("%d multipart uploads left open", uploads)
		}
	}
}

// TestS3SSEKMS runs SSE-KMS against a server with a KMS: applied and
// verified with the key requested, single-part and multipart; and a
// different key applied (the request's key rewritten before signing)
// fails the check-in and leaves nothing.
func TestS3SSEKMS(t *testing.T) {
	t.Parallel()
	raw := sseBaseURL(t)
	key := testenv.Require(t, sseKMSKeyEnv, "a KMS key to test SSE-KMS with (SeaweedFS needs a \"kms\" block in its S3 config, as scripts/seaweedfs.sh writes)")
	if u := os.Getenv(sseKMSURLEnv); u != "" {
		raw = u
	}
	t.Run("applied", func(t *testing.T) {
		b := setupSSE(t, withParams(t, raw, "ssetype", "aws:kms", "kmskeyid", key))
		for _, n := range []int{sseSmallPayload, sseLargePayload} {
			data := ssePayload(byte(n), n)
			tk, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(data), nil)
			if err != nil {
				t.Fatalf("check-in of %d bytes with SSE-KMS: %v", n, err)
			}
			h := b.head(t, tk.Key)
			if h == nil || h.ServerSideEncryption != types.ServerSideEncryptionAwsKms || !(&sseCheck{kmsKey: key}).keyMatches(aws.ToString(h.SSEKMSKeyId)) {
				t.Fatalf("%d bytes: the object reports %v", n, h)
			}
			t.Logf("%d bytes: aws:kms, key %s", n, aws.ToString(h.SSEKMSKeyId))
			if got := b.claim(t, tk); !bytes.Equal(got, data) {
				t.Fatalf("%d bytes: claimed other bytes", n)
			}
		}
	})
	t.Run("other-key", func(t *testing.T) {
		b := setupSSE(t, withParams(t, raw, "ssetype", "aws:kms", "kmskeyid", key), rewriteHeader(hdrSSEKMSKeyID, key+"-other"))
		for _, n := range []int{sseSmallPayload, sseLargePayload} {
			_, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(ssePayload(byte(n), n)), nil)
			var se *sseError
			if !errors.As(err, &se) || !se.deleted {
				t.Fatalf("%d bytes encrypted under another key: %v, want an *sseError that deleted the object", n, err)
			}
			t.Logf("%d bytes: %v", n, err)
		}
		if objects, uploads := b.leftovers(t); objects != 0 || uploads != 0 {
			t.Fatalf("failed check-ins left %d objects and %d multipart uploads", objects, uploads)
		}
	})
}

// TestS3SSEExistingObjectWithout: an object stored before SSE was required
// holds the same bytes at the same key; checkSSE, which put's holds uses to
// decide whether that object can stand for the payload, refuses it.
func TestS3SSEExistingObjectWithout(t *testing.T) {
	t.Parallel()
	raw := sseBaseURL(t)
	plain := setupSSE(t, withParams(t, raw))
	enc := setupSSE(t, withParams(t, raw, "ssetype", "AES256"))
	data := ssePayload(7, sseSmallPayload)
	tk, err := plain.store.CheckIn(plain.ctx, plain.tenant, bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := enc.store.Bucket().Attributes(enc.ctx, tk.Key)
	if err != nil {
		t.Fatal(err)
	}
	err = enc.store.Hooks().CheckExisting(attrs)
	var se *sseError
	if !errors.As(err, &se) || !se.existing {
		t.Fatalf("checkSSE of an unencrypted object on a store requiring AES256: %v, want an *sseError", err)
	}
	t.Logf("%v", err)
	if err := plain.store.Hooks().CheckExisting(attrs); err != nil {
		t.Fatalf("checkSSE on a store requiring nothing: %v", err)
	}
	// A check-in of the same bytes must not take that object for its own:
	// put's holds refuses it once it calls checkSSE.
	if _, err := enc.store.CheckIn(enc.ctx, plain.tenant, bytes.NewReader(data), nil); err == nil {
		t.Fatal("check-in over an unencrypted object succeeded on a store requiring AES256")
	} else if !errors.As(err, &se) || !se.existing {
		t.Fatalf("check-in over an unencrypted object on a store requiring AES256: %v, want an *sseError", err)
	} else {
		t.Logf("check-in refused: %v", err)
	}
	// Once re-encrypted in place, it qualifies. (SeaweedFS refuses a copy
	// onto itself that changes only the encryption: InvalidRequest.)
	h := enc.head(t, tk.Key)
	src := url.PathEscape(enc.bucket + "/" + tk.Key)
	if _, err := enc.client.CopyObject(enc.ctx, &s3.CopyObjectInput{Bucket: &enc.bucket, Key: &tk.Key, CopySource: &src,
		MetadataDirective: types.MetadataDirectiveReplace, Metadata: h.Metadata, ContentType: h.ContentType}); err != nil {
		t.Fatalf("copy in place with SSE: %v", err)
	}
	if attrs, err = enc.store.Bucket().Attributes(enc.ctx, tk.Key); err != nil {
		t.Fatal(err)
	}
	if err := enc.store.Hooks().CheckExisting(attrs); err != nil {
		t.Fatalf("checkSSE after re-encrypting in place: %v", err)
	}
	if got := enc.claim(t, tk); !bytes.Equal(got, data) {
		t.Fatal("re-encrypted object claims other bytes")
	}
	if err := plain.store.Bucket().Delete(plain.ctx, tk.Key); err != nil {
		t.Fatal(err)
	}
}

// TestS3SSEURLParameters: bad combinations are configuration errors at
// open, before any request.
func TestS3SSEURLParameters(t *testing.T) {
	t.Parallel()
	const base = "s3://claimcheck-test?region=us-east-1&endpoint=http://127.0.0.1:1&use_path_style=true"
	for _, q := range []string{"&ssetype=bogus", "&kmskeyid=abc", "&ssetype=AES256&kmskeyid=abc"} {
		s, err := claimcheck.OpenStore(t.Context(), base+q, &claimcheck.Options{SpoolDir: t.TempDir()})
		if err == nil {
			s.Close()
			t.Errorf("claimcheck.OpenStore(...%s) accepted", q)
			continue
		}
		if !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("claimcheck.OpenStore(...%s): %v, want claimcheck.ErrConfig", q, err)
		}
	}
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"", "", true},
		{"", "arn:aws:kms:eu-west-1:1:key/abc", true},
		{"abc", "abc", true},
		{"abc", "arn:aws:kms:eu-west-1:1:key/abc", true},
		{"arn:aws:kms:eu-west-1:1:key/abc", "abc", true},
		{"arn:aws:kms:eu-west-1:1:key/abc", "arn:aws:kms:eu-west-1:1:key/abc", true},
		{"alias/mine", "arn:aws:kms:eu-west-1:1:key/abc", true},
		{"abc", "abd", false},
		{"abc", "", false},
		{"arn:aws:kms:eu-west-1:1:key/abc", "arn:aws:kms:eu-west-1:1:key/xyz", false},
	} {
		if got := (&sseCheck{kmsKey: c.want}).keyMatches(c.got); got != c.ok {
			t.Errorf("keyMatches(%q, reported %q) = %v, want %v", c.want, c.got, got, c.ok)
		}
	}
}
