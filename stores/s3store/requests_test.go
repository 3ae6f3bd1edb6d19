package s3store

// The requests a check-in and a claim make, on a real S3 server
// (SeaweedFS), counted with the probe of sse_test.go: no HEAD before a
// small write, a reused object refreshed, no HEAD before an encrypted
// claim.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// TestS3ReuseWithoutLookingFirst: a payload of at most 5 MiB is written
// without a HEAD of its key first; written again (the same bytes, the same
// key), its PutObject is refused (If-None-Match: *), the object is found
// to hold those bytes and is reused, its age refreshed (CopyObject onto
// itself), not rewritten. A larger payload's key is looked at first and
// nothing is uploaded the second time.
func TestS3ReuseWithoutLookingFirst(t *testing.T) {
	t.Parallel()
	var rec sseHeaders
	b := setupSSE(t, withParams(t, sseBaseURL(t)), rec.record)
	// As OpenStore opens it: hooks that know the bucket's name refresh a
	// reused object (those of a bucket given to NewStore cannot).
	b.store.Hooks().(*hooks).name = b.bucket
	count := func() map[string]int {
		m := map[string]int{}
		for _, op := range []string{"HeadObject", "PutObject", "CopyObject", "CreateMultipartUpload"} {
			m[op] = len(rec.ops(op))
		}
		return m
	}
	for _, tc := range []struct {
		n                int
		firstHeads, puts int // the first check-in's HEADs, and PutObjects (or multipart uploads) of each
		againUploads     int // the second check-in's PutObjects and multipart uploads
	}{
		{sseSmallPayload, 0, 1, 1},
		{sseLargePayload, 1, 1, 0},
	} {
		data := ssePayload(byte(tc.n>>10), tc.n)
		c0 := count()
		tk, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(data), nil)
		if err != nil {
			t.Fatalf("%d bytes: %v", tc.n, err)
		}
		c1 := count()
		if heads := c1["HeadObject"] - c0["HeadObject"]; heads != tc.firstHeads {
			t.Errorf("%d bytes, first check-in: %d HeadObject requests, want %d", tc.n, heads, tc.firstHeads)
		}
		if ups := c1["PutObject"] - c0["PutObject"] + c1["CreateMultipartUpload"] - c0["CreateMultipartUpload"]; ups != tc.puts {
			t.Errorf("%d bytes, first check-in: %d uploads, want %d", tc.n, ups, tc.puts)
		}
		again, err := b.store.CheckIn(b.ctx, b.tenant, bytes.NewReader(data), nil)
		if err != nil {
			t.Fatalf("%d bytes, again: %v", tc.n, err)
		}
		c2 := count()
		if again.Key != tk.Key || again.SHA256 != tk.SHA256 {
			t.Fatalf("%d bytes, again: ticket %v, want the first's key %v", tc.n, again, tk)
		}
		if ups := c2["PutObject"] - c1["PutObject"] + c2["CreateMultipartUpload"] - c1["CreateMultipartUpload"]; ups != tc.againUploads {
			t.Errorf("%d bytes, again: %d uploads, want %d", tc.n, ups, tc.againUploads)
		}
		if copies := c2["CopyObject"] - c1["CopyObject"]; copies != 1 {
			t.Errorf("%d bytes, again: %d CopyObject requests, want 1 (the reused object's age refreshed)", tc.n, copies)
		}
		if got := b.claim(t, again); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: the reused object claims other bytes", tc.n)
		}
	}
	if objects, uploads := b.leftovers(t); objects != 2 || uploads != 0 {
		t.Fatalf("%d objects and %d open uploads, want 2 and 0", objects, uploads)
	}
}

// TestS3ClaimEncryptedOneRequest: a verified claim of an encrypted object
// reads its wrapped data key from the GetObject response's metadata
// (hooks.ReaderMetadata): one GetObject and no HeadObject, and the payload
// claims back; an object stored unencrypted is still refused with ErrConfig
// by a store that encrypts.
func TestS3ClaimEncryptedOneRequest(t *testing.T) {
	t.Parallel()
	var rec sseHeaders
	u := withParams(t, sseBaseURL(t))
	bucket, err := openS3BucketWith(t.Context(), u, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	keeper := localsecrets.NewKeeper(key)
	t.Cleanup(func() { keeper.Close() })
	sealed, err := claimcheck.NewStore(bucket, &claimcheck.Options{SpoolDir: t.TempDir(), Keeper: keeper, KeeperID: claimcheck.LocalKeyID(key[:])})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := claimcheck.NewStore(bucket, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var id [6]byte
	rand.Read(id[:])
	tenant := "claim-" + hex.EncodeToString(id[:])
	for _, n := range []int{sseSmallPayload, 3 << 20} { // in memory, and spooled
		data := ssePayload(byte(n>>10), n)
		tk, err := sealed.CheckIn(t.Context(), tenant, bytes.NewReader(data), nil)
		if err != nil {
			t.Fatal(err)
		}
		heads, gets := len(rec.ops("HeadObject")), len(rec.ops("GetObject"))
		p, err := sealed.Claim(tk)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Open(t.Context())
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := io.ReadAll(r)
		p.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: claimed %d bytes (%v), not the payload", n, len(got), err)
		}
		if h, g := len(rec.ops("HeadObject"))-heads, len(rec.ops("GetObject"))-gets; h != 0 || g != 1 {
			t.Errorf("%d bytes: the claim made %d HeadObject and %d GetObject requests, want 0 and 1", n, h, g)
		}
	}
	tk, err := plain.CheckIn(t.Context(), tenant, bytes.NewReader(ssePayload(7, sseSmallPayload)), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sealed.Claim(tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(t.Context()); !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "stored unencrypted") {
		t.Fatalf("claim of an unencrypted object by a store that encrypts: %v, want ErrConfig saying it was stored unencrypted", err)
	}
}
