// Package storetest is the conformance suite every claimcheck object store
// must pass, whatever bucket driver is behind it (file://, mem://, s3://, and
// any other gocloud.dev/blob driver), in the manner of go-cloud's drivertest:
// "works on S3" and "works on file" mean the same tests passed.
//
// A backend's test calls RunConformance (or Run, to open stores with
// options the suite chooses itself) with a function that opens a store on
// that backend:
//
//	func TestConformance(t *testing.T) {
//		storetest.RunConformance(t, func(t *testing.T) *claimcheck.Store {
//			s, err := claimcheck.OpenStore(t.Context(), "mem://", nil)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Every test works under tenants of its own, random for each run, and
// deletes their objects when it ends, so runs can share a bucket.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// DefaultLargeSize is the size in bytes of the suite's large payload: more
// than two 5 MiB parts, so S3 stores it with a multipart upload.
const DefaultLargeSize = 12 << 20

// Harness opens the stores under test.
type Harness struct {
	// Open returns a store on the backend under test, configured with opts
	// (nil: zero Options), and registers its Close with t.Cleanup. Stores
	// opened for one run may share a bucket.
	Open func(t *testing.T, opts *claimcheck.Options) *claimcheck.Store
	// LargeSize is the size in bytes of the large payload; 0 means
	// DefaultLargeSize.
	LargeSize int64
}

// RunConformance runs the suite against stores returned by open. Where the
// suite needs other options (always offload, a keeper) it wraps the bucket
// of a store from open with claimcheck.NewStore, under the same store name.
func RunConformance(t *testing.T, open func(t *testing.T) *claimcheck.Store) {
	Run(t, Harness{Open: func(t *testing.T, opts *claimcheck.Options) *claimcheck.Store {
		t.Helper()
		base := open(t)
		if opts == nil {
			return base
		}
		o := *opts
		if o.Name == "" {
			o.Name = base.Name()
		}
		s, err := claimcheck.NewStore(base.Bucket(), &o)
		if err != nil {
			t.Fatalf("NewStore over the opened bucket: %v", err)
		}
		return s
	}})
}

// URLOpener is a Harness.Open that opens stores at url(t) with
// claimcheck.OpenStore, each with its own spool directory under t.TempDir,
// closed (and the close checked) when t ends. The backend's driver package
// must be imported (gs:// needs stores/gcsstore, for example).
func URLOpener(url func(t *testing.T) string) func(t *testing.T, opts *claimcheck.Options) *claimcheck.Store {
	return func(t *testing.T, opts *claimcheck.Options) *claimcheck.Store {
		t.Helper()
		var o claimcheck.Options
		if opts != nil {
			o = *opts
		}
		o.SpoolDir = t.TempDir()
		s, err := claimcheck.OpenStore(t.Context(), url(t), &o)
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
}

// Run runs the suite with h.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	if h.LargeSize == 0 {
		h.LargeSize = DefaultLargeSize
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"RoundTripOffloaded", testRoundTripOffloaded},
		{"RoundTripEncrypted", testRoundTripEncrypted},
		{"NamedAndResultKeys", testNamedAndResultKeys},
		{"IdempotentReCheckIn", testIdempotent},
		{"ConcurrentSameContent", testConcurrentSameContent},
		{"ConcurrentNamedConflict", testConcurrentNamedConflict},
		{"Missing", testMissing},
		{"Corrupt", testCorrupt},
		{"CancelledCheckIn", testCancelled},
		{"StreamReads", testStreamReads},
		{"ListByPrefix", testListByPrefix},
		{"ErrorClasses", testErrorClasses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// NewTenant returns a tenant name unique to this run and deletes every
// object under its prefixes when t ends.
func NewTenant(t *testing.T, s *claimcheck.Store) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	tenant := "st" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, p := range []string{claimcheck.PrefixPayloads, claimcheck.PrefixResults} {
			keys, err := listKeys(ctx, s.Bucket(), p+tenant+"/", true)
			if err != nil {
				t.Logf("storetest: clean up %s%s/: %v", p, tenant, err)
				continue
			}
			for _, k := range keys {
				if err := s.Bucket().Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
					t.Logf("storetest: clean up: delete: %v", err)
				}
			}
		}
	})
	return tenant
}

// Payload returns n deterministic pseudo-random bytes for seed.
func Payload(seed uint64, n int64) []byte {
	b := make([]byte, n)
	r := mathrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24), byte(seed >> 32)})
	_, _ = r.Read(b)
	return b
}

// Keys lists the keys under prefix in s's bucket, sorted, skipping
// in-flight temporary files (claimcheck.IsTempKey).
func Keys(t *testing.T, s *claimcheck.Store, prefix string) []string {
	t.Helper()
	keys, err := listKeys(t.Context(), s.Bucket(), prefix, false)
	if err != nil {
		t.Fatalf("list %s: %v", prefix, err)
	}
	return keys
}

func listKeys(ctx context.Context, b *blob.Bucket, prefix string, withTemp bool) ([]string, error) {
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if obj.IsDir || (!withTemp && claimcheck.IsTempKey(obj.Key)) {
			continue
		}
		keys = append(keys, obj.Key)
	}
	slices.Sort(keys)
	return keys, nil
}

// DeleteObject deletes the object at key through the store's bucket.
func DeleteObject(ctx context.Context, s *claimcheck.Store, key string) error {
	return s.Bucket().Delete(ctx, key)
}

// RewriteObject replaces the object at key with edit applied to its bytes,
// keeping its metadata and content type: what a corrupted disk, a bad
// copy or a tampering operator leaves behind.
func RewriteObject(ctx context.Context, s *claimcheck.Store, key string, edit func([]byte) []byte) error {
	b := s.Bucket()
	attrs, err := b.Attributes(ctx, key)
	if err != nil {
		return err
	}
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		return err
	}
	return b.WriteAll(ctx, key, edit(data), &blob.WriterOptions{
		ContentType: attrs.ContentType,
		Metadata:    attrs.Metadata,
	})
}

// FlipByte is a RewriteObject edit that inverts the byte at offset i
// (counted from the end when negative).
func FlipByte(i int) func([]byte) []byte {
	return func(b []byte) []byte {
		b = bytes.Clone(b)
		if i < 0 {
			i += len(b)
		}
		b[i] ^= 0xff
		return b
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func checkIn(t *testing.T, s *claimcheck.Store, tenant string, data []byte, opts *claimcheck.CheckInOptions) *claimcheck.Ticket {
	t.Helper()
	tk, err := s.CheckIn(t.Context(), tenant, bytes.NewReader(data), opts)
	if err != nil {
		t.Fatalf("CheckIn(%d bytes): %v", len(data), err)
	}
	if tk.Size != int64(len(data)) || tk.SHA256 != sum(data) {
		t.Fatalf("ticket says %d bytes sha256 %s, payload is %d bytes sha256 %s", tk.Size, tk.DigestPrefix(), len(data), sum(data)[:12])
	}
	return tk
}

// ClaimBytes claims tk from s and returns its bytes through Open (verified,
// read twice), after checking OpenStream yields the same.
func ClaimBytes(t *testing.T, s *claimcheck.Store, tk *claimcheck.Ticket) []byte {
	t.Helper()
	ctx := t.Context()
	p, err := s.Claim(tk)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	defer p.Close()
	// WriteFile before Open (one pass from the object) and after it
	// (from the verified copy): the same bytes, and nothing else left in
	// the file's directory.
	dir := t.TempDir()
	writeFile := func(what string) []byte {
		t.Helper()
		dst := filepath.Join(dir, "claimed")
		if err := p.WriteFile(ctx, dst); err != nil {
			t.Fatalf("WriteFile %s: %v", what, err)
		}
		b, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 1 {
			t.Fatalf("WriteFile %s left %d files in the destination's directory, want 1", what, len(left))
		}
		return b
	}
	written := writeFile("before Open")
	r, err := p.Open(ctx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatalf("read opened payload: %v", err)
	}
	r2, err := p.Open(ctx)
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	again, _ := io.ReadAll(r2)
	r2.Close()
	if !bytes.Equal(got, again) {
		t.Fatal("two Opens of one payload read different bytes")
	}
	rs, err := p.OpenStream(ctx)
	if err != nil {
		t.Fatalf("OpenStream: %v", err)
	}
	streamed, err := io.ReadAll(rs)
	rs.Close()
	if err != nil {
		t.Fatalf("read streamed payload: %v", err)
	}
	if !bytes.Equal(got, streamed) {
		t.Fatal("OpenStream and Open read different bytes")
	}
	if !bytes.Equal(got, written) || !bytes.Equal(got, writeFile("after Open")) {
		t.Fatal("WriteFile and Open read different bytes")
	}
	return got
}

func roundTrip(t *testing.T, s *claimcheck.Store, tenant string, data []byte, wantInline bool) *claimcheck.Ticket {
	t.Helper()
	tk := checkIn(t, s, tenant, data, nil)
	if tk.IsInline() != wantInline {
		t.Fatalf("%d bytes (threshold %d): inline = %v, want %v", len(data), s.InlineThreshold(), tk.IsInline(), wantInline)
	}
	if !wantInline {
		if !strings.HasPrefix(tk.Key, claimcheck.PrefixPayloads+tenant+"/") {
			t.Fatalf("key is not under payloads/<tenant>/")
		}
		if tk.Store != s.Name() {
			t.Fatalf("ticket names store %q, want %q", tk.Store, s.Name())
		}
		b, err := tk.Marshal()
		if err != nil || len(b) > claimcheck.MaxTicketBytes {
			t.Fatalf("ticket: %d bytes, %v (budget %d)", len(b), err, claimcheck.MaxTicketBytes)
		}
		info, err := s.Stat(t.Context(), tk)
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if !info.Exists || !info.MatchesTicket {
			t.Fatalf("Stat = %+v, want an existing object matching the ticket", info)
		}
	}
	if got := ClaimBytes(t, s, tk); !bytes.Equal(got, data) {
		t.Fatalf("claimed %d bytes, checked in %d (or they differ)", len(got), len(data))
	}
	return tk
}

// sizes are the payload sizes every store must round-trip: 0 and 1 byte,
// either side of the inline threshold th, and large (when not 0).
func sizes(th, large int64) []int64 {
	out := []int64{0, 1}
	if th > 1 {
		out = append(out, th-1, th, th+1)
	}
	if large > 0 {
		out = append(out, large)
	}
	return out
}

func testRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t, nil)
	tenant := NewTenant(t, s)
	th := s.InlineThreshold()
	for i, n := range sizes(th, h.LargeSize) {
		roundTrip(t, s, tenant, Payload(uint64(i+1), n), th >= 0 && n <= th)
	}
}

func testRoundTripOffloaded(t *testing.T, h Harness) {
	s := h.Open(t, &claimcheck.Options{AlwaysOffload: true})
	tenant := NewTenant(t, s)
	var keys []string
	// The sizes around the default threshold, now all objects.
	for i, n := range sizes(claimcheck.DefaultInlineThreshold, 0) {
		tk := roundTrip(t, s, tenant, Payload(uint64(100+i), n), false)
		keys = append(keys, tk.Key)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if got := Keys(t, s, claimcheck.PrefixPayloads+tenant+"/"); !slices.Equal(got, keys) {
		t.Fatalf("objects = %d keys, want the %d tickets' keys", len(got), len(keys))
	}
}

func newKeeperOptions(t *testing.T, opts claimcheck.Options) *claimcheck.Options {
	t.Helper()
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	k := localsecrets.NewKeeper(key)
	t.Cleanup(func() { k.Close() })
	opts.Keeper = k
	return &opts
}

func testRoundTripEncrypted(t *testing.T, h Harness) {
	ctx := t.Context()
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			// No NotFound grace: the deleted object below is missing at once.
			s := h.Open(t, newKeeperOptions(t, claimcheck.Options{AlwaysOffload: offload, NotFoundGrace: -1}))
			tenant := NewTenant(t, s)
			th := s.InlineThreshold()
			large := h.LargeSize
			if offload {
				th, large = claimcheck.DefaultInlineThreshold, 0 // the large one once is enough
			}
			for i, n := range sizes(th, large) {
				data := Payload(uint64(200+i), n)
				tk := roundTrip(t, s, tenant, data, !offload && n <= th)
				if tk.IsInline() {
					if n >= 16 && bytes.Contains(tk.Inline, data[:16]) {
						t.Fatal("an encrypted store's inline ticket carries the plaintext")
					}
					continue
				}
				info, err := s.Stat(ctx, tk)
				if err != nil || !info.Encrypted {
					t.Fatalf("Stat = %+v, %v: want an encrypted object", info, err)
				}
				raw, err := s.Bucket().ReadAll(ctx, tk.Key)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(raw)) <= n || (n >= 16 && bytes.Contains(raw, data[:16])) {
					t.Fatalf("object of %d bytes for %d bytes of plaintext is not ciphertext", len(raw), n)
				}
				// Re-check-in writes nothing: a rewrite would wrap a new data key.
				before, err := s.Bucket().Attributes(ctx, tk.Key)
				if err != nil {
					t.Fatal(err)
				}
				if tk2 := checkIn(t, s, tenant, data, nil); tk2.Key != tk.Key {
					t.Fatal("re-check-in of the same bytes changed the key")
				}
				after, err := s.Bucket().Attributes(ctx, tk.Key)
				if err != nil {
					t.Fatal(err)
				}
				if !maps(before.Metadata, after.Metadata) {
					t.Fatal("re-check-in of the same bytes rewrote the encrypted object")
				}
			}

			// Tampered ciphertext, missing object, and a store without
			// the keeper: never plaintext, never "transient".
			data := Payload(299, 300<<10)
			tk := checkIn(t, s, tenant, data, &claimcheck.CheckInOptions{Name: "tamper"})
			plain, err := claimcheck.NewStore(s.Bucket(), &claimcheck.Options{Name: s.Name()})
			if err != nil {
				t.Fatal(err)
			}
			expect(t, plain, tk, claimcheck.ErrConfig) // a worker missing its keeper: fix and retry
			if err := RewriteObject(ctx, s, tk.Key, FlipByte(-100)); err != nil {
				t.Fatal(err)
			}
			expect(t, s, tk, claimcheck.ErrPayloadCorrupt)
			if err := DeleteObject(ctx, s, tk.Key); err != nil {
				t.Fatal(err)
			}
			expect(t, s, tk, claimcheck.ErrPayloadMissing)
		})
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// expect claims tk and checks Verify, Open and OpenStream all fail with
// class, permanent or not as the class is.
func expect(t *testing.T, s *claimcheck.Store, tk *claimcheck.Ticket, class error) {
	t.Helper()
	ctx := t.Context()
	p, err := s.Claim(tk)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	defer p.Close()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, class) {
			t.Fatalf("%s: %v, want %v", what, err, class)
		}
		if claimcheck.IsPermanent(err) != claimcheck.IsPermanent(class) {
			t.Fatalf("%s: %v: permanent = %v, want %v", what, err, claimcheck.IsPermanent(err), claimcheck.IsPermanent(class))
		}
		if strings.Contains(err.Error(), tk.Key) {
			t.Fatalf("%s: error string reveals the object key: %v", what, err)
		}
	}
	// WriteFile first, while nothing is verified: it streams the object.
	dir := t.TempDir()
	dst := filepath.Join(dir, "claimed")
	check("WriteFile", p.WriteFile(ctx, dst))
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Fatalf("WriteFile failed and left %d files in the destination's directory (%v)", len(left), err)
	}
	check("Verify", p.Verify(ctx))
	_, err = p.Open(ctx)
	check("Open", err)
	if rs, err := p.OpenStream(ctx); err != nil {
		check("OpenStream", err)
	} else {
		_, err = io.Copy(io.Discard, rs)
		rs.Close()
		check("OpenStream read", err)
	}
}

func testNamedAndResultKeys(t *testing.T, h Harness) {
	s := h.Open(t, nil)
	tenant := NewTenant(t, s)
	data := Payload(300, 10) // named payloads never travel inline
	tk := checkIn(t, s, tenant, data, &claimcheck.CheckInOptions{Name: "orders/42", Version: "v2", ContentType: "application/json"})
	if want := claimcheck.PrefixPayloads + tenant + "/named/orders/42@v2"; tk.Key != want {
		t.Fatalf("named key = %q, want %q", tk.Key, want)
	}
	if got := ClaimBytes(t, s, tk); !bytes.Equal(got, data) {
		t.Fatal("named payload claims other bytes")
	}
	info, err := s.Stat(t.Context(), tk)
	if err != nil || info.ContentType != "application/json" {
		t.Fatalf("Stat = %+v, %v: want the content type recorded on the object", info, err)
	}
	res := Payload(301, s.InlineThreshold()+1)
	rt := checkIn(t, s, tenant, res, &claimcheck.CheckInOptions{Result: true})
	if !strings.HasPrefix(rt.Key, claimcheck.PrefixResults+tenant+"/") {
		t.Fatalf("result key is not under results/<tenant>/")
	}
	if got := ClaimBytes(t, s, rt); !bytes.Equal(got, res) {
		t.Fatal("result claims other bytes")
	}
}

func testIdempotent(t *testing.T, h Harness) {
	ctx := t.Context()
	s := h.Open(t, nil)
	tenant := NewTenant(t, s)
	data := Payload(400, s.InlineThreshold()+4096)
	tk := checkIn(t, s, tenant, data, nil)
	before, err := s.Bucket().Attributes(ctx, tk.Key)
	if err != nil {
		t.Fatal(err)
	}
	// Stores record modification times to the second (S3).
	time.Sleep(1100 * time.Millisecond)
	tk2 := checkIn(t, s, tenant, data, nil)
	if tk2.Key != tk.Key || tk2.SHA256 != tk.SHA256 {
		t.Fatal("re-check-in of the same bytes gave another key")
	}
	after, err := s.Bucket().Attributes(ctx, tk.Key)
	if err != nil {
		t.Fatal(err)
	}
	// A store may refresh a reused object's age (the file store does, so
	// expiry counts from the newest job), but never turns it back, and the
	// object keeps its bytes.
	if after.ModTime.Before(before.ModTime) || after.Size != before.Size {
		t.Fatalf("re-check-in changed the object (modified %v size %d, then %v size %d)", before.ModTime, before.Size, after.ModTime, after.Size)
	}
	if got := ClaimBytes(t, s, tk); !bytes.Equal(got, data) {
		t.Fatal("the first ticket no longer claims the same bytes")
	}
	if got := Keys(t, s, claimcheck.PrefixPayloads+tenant+"/"); len(got) != 1 || got[0] != tk.Key {
		t.Fatalf("objects = %q, want one", got)
	}
	// Named: the same bytes again are a no-op, other bytes a conflict.
	named := &claimcheck.CheckInOptions{Name: "report"}
	n1 := checkIn(t, s, tenant, data, named)
	n2 := checkIn(t, s, tenant, data, named)
	if n1.Key != n2.Key {
		t.Fatal("named re-check-in changed the key")
	}
	_, err = s.CheckIn(ctx, tenant, bytes.NewReader(Payload(401, 100)), named)
	if !errors.Is(err, claimcheck.ErrKeyConflict) || !claimcheck.IsPermanent(err) {
		t.Fatalf("other bytes under a used name: %v, want ErrKeyConflict (permanent)", err)
	}
	if got := ClaimBytes(t, s, n1); !bytes.Equal(got, data) {
		t.Fatal("a refused check-in changed the named object")
	}
}

func testConcurrentSameContent(t *testing.T, h Harness) {
	s := h.Open(t, nil)
	tenant := NewTenant(t, s)
	data := Payload(500, 200<<10)
	const n = 8
	tickets := make([]*claimcheck.Ticket, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tickets[i], errs[i] = s.CheckIn(t.Context(), tenant, bytes.NewReader(data), nil)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("check-in %d of %d of the same bytes: %v", i+1, n, errs[i])
		}
		if tickets[i].Key != tickets[0].Key {
			t.Fatal("concurrent check-ins of the same bytes gave different keys")
		}
	}
	if got := Keys(t, s, claimcheck.PrefixPayloads+tenant+"/"); len(got) != 1 {
		t.Fatalf("%d objects after %d concurrent check-ins of the same bytes, want 1", len(got), n)
	}
	if got := ClaimBytes(t, s, tickets[n-1]); !bytes.Equal(got, data) {
		t.Fatal("claimed other bytes")
	}
}

func testConcurrentNamedConflict(t *testing.T, h Harness) {
	s := h.Open(t, nil)
	tenant := NewTenant(t, s)
	const n = 6
	payloads := make([][]byte, n)
	tickets := make([]*claimcheck.Ticket, n)
	errs := make([]error, n)
	for i := range n {
		payloads[i] = Payload(uint64(600+i), 150<<10)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tickets[i], errs[i] = s.CheckIn(t.Context(), tenant, bytes.NewReader(payloads[i]), &claimcheck.CheckInOptions{Name: "race"})
		})
	}
	wg.Wait()
	winner := -1
	for i := range n {
		switch {
		case errs[i] == nil && winner >= 0:
			t.Fatalf("check-ins %d and %d of different bytes under one name both succeeded", winner, i)
		case errs[i] == nil:
			winner = i
		case !errors.Is(errs[i], claimcheck.ErrKeyConflict):
			t.Fatalf("losing check-in: %v, want ErrKeyConflict", errs[i])
		}
	}
	if winner < 0 {
		t.Fatal("no check-in under the name succeeded")
	}
	if got := ClaimBytes(t, s, tickets[winner]); !bytes.Equal(got, payloads[winner]) {
		t.Fatal("the named object does not hold the winner's bytes")
	}
}

func testMissing(t *testing.T, h Harness) {
	ctx := t.Context()
	// Within a NotFound grace, a missing object may be an eventually
	// consistent store catching up: transient.
	graced := h.Open(t, &claimcheck.Options{NotFoundGrace: time.Hour})
	gt := checkIn(t, graced, NewTenant(t, graced), Payload(701, graced.InlineThreshold()+1), nil)
	if err := DeleteObject(ctx, graced, gt.Key); err != nil {
		t.Fatal(err)
	}
	expect(t, graced, gt, claimcheck.ErrNotVisibleYet)
	if err := func() error { p, _ := graced.Claim(gt); return p.Verify(ctx) }(); claimcheck.IsPermanent(err) || !errors.Is(err, claimcheck.ErrUnavailable) || claimcheck.Reason(err) != claimcheck.ReasonNotVisibleYet {
		t.Fatalf("missing within the grace: %v (reason %s), want transient %s", err, claimcheck.Reason(err), claimcheck.ReasonNotVisibleYet)
	}

	s := h.Open(t, &claimcheck.Options{NotFoundGrace: -1})
	tenant := NewTenant(t, s)
	tk := checkIn(t, s, tenant, Payload(700, s.InlineThreshold()+1), nil)
	if err := DeleteObject(ctx, s, tk.Key); err != nil {
		t.Fatal(err)
	}
	expect(t, s, tk, claimcheck.ErrPayloadMissing)
	if r := claimcheck.Reason(func() error { p, _ := s.Claim(tk); return p.Verify(ctx) }()); r != claimcheck.ReasonPayloadMissing {
		t.Fatalf("Reason = %q, want %q", r, claimcheck.ReasonPayloadMissing)
	}
	info, err := s.Stat(ctx, tk)
	if err != nil || info.Exists {
		t.Fatalf("Stat of a deleted object = %+v, %v: want Exists false, no error", info, err)
	}
	// A ticket for a key never written.
	ghost := *tk
	ghost.Key = claimcheck.PrefixPayloads + tenant + "/named/never-written"
	expect(t, s, &ghost, claimcheck.ErrPayloadMissing)
}

func testCorrupt(t *testing.T, h Harness) {
	ctx := t.Context()
	s := h.Open(t, nil)
	tenant := NewTenant(t, s)
	small, large := s.InlineThreshold()+1000, h.LargeSize+1000
	for i, edit := range []struct {
		name string
		size int64
		fn   func([]byte) []byte
	}{
		{"flipped first byte", small, FlipByte(0)},
		{"flipped last byte", small, FlipByte(-1)},
		{"truncated", small, func(b []byte) []byte { return b[:len(b)-1] }},
		{"extended", small, func(b []byte) []byte { return append(bytes.Clone(b), 0) }},
		{"emptied", small, func([]byte) []byte { return nil }},
		// Large payloads are read, hashed and spooled in several buffers
		// (a verified claim hashes them in a goroutine of its own).
		{"large flipped middle byte", large, FlipByte(int(large / 2))},
		{"large flipped last byte", large, FlipByte(-1)},
		{"large truncated", large, func(b []byte) []byte { return b[:len(b)-1] }},
	} {
		tk := checkIn(t, s, tenant, Payload(uint64(800+i), edit.size), nil)
		if err := RewriteObject(ctx, s, tk.Key, edit.fn); err != nil {
			t.Fatalf("%s: %v", edit.name, err)
		}
		t.Run(strings.ReplaceAll(edit.name, " ", "_"), func(t *testing.T) {
			expect(t, s, tk, claimcheck.ErrPayloadCorrupt)
		})
	}
}

// cancelAtEOF reads r and, once r is exhausted, cancels after delay.
type cancelAtEOF struct {
	r      io.Reader
	delay  time.Duration
	cancel context.CancelFunc
	once   sync.Once
}

func (c *cancelAtEOF) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if errors.Is(err, io.EOF) {
		c.once.Do(func() {
			if c.delay == 0 {
				c.cancel()
			} else {
				time.AfterFunc(c.delay, c.cancel)
			}
		})
	}
	return n, err
}

// cancelAfter reads r and cancels once n bytes have been read.
type cancelAfter struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n -= int64(n); c.n <= 0 {
		c.cancel()
	}
	return n, err
}

func testCancelled(t *testing.T, h Harness) {
	s := h.Open(t, nil)
	tenant := NewTenant(t, s)
	prefix := claimcheck.PrefixPayloads + tenant + "/"
	noObjects := func(t *testing.T, what string) {
		t.Helper()
		keys, err := listKeys(t.Context(), s.Bucket(), prefix, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 {
			t.Fatalf("%s: %d objects (temporary ones included) left under the tenant's prefix", what, len(keys))
		}
	}
	classify := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, claimcheck.ErrUnavailable) || !errors.Is(err, context.Canceled) || claimcheck.IsPermanent(err) {
			t.Fatalf("%s: %v, want ErrUnavailable wrapping context.Canceled, transient", what, err)
		}
	}

	// Cancelled while the payload is read, named (stored whatever its
	// size) and not.
	for _, opts := range []*claimcheck.CheckInOptions{nil, {Name: "cancelled"}} {
		ctx, cancel := context.WithCancel(t.Context())
		_, err := s.CheckIn(ctx, tenant, &cancelAfter{r: bytes.NewReader(Payload(900, 2<<20)), n: 1 << 20, cancel: cancel}, opts)
		cancel()
		classify(t, "cancelled while reading", err)
		noObjects(t, "cancelled while reading")
	}

	// Cancelled once the payload has been read: while it is written. The
	// large payload goes up in parts where the store has them. Either the
	// check-in completes before the cancellation lands and its object
	// verifies, or it fails and leaves nothing behind; the one exception,
	// a remote store committing the object just as the cancellation
	// reaches the client, leaves the complete payload (an orphan, which
	// invariant 1 allows, never a partial object).
	data := Payload(901, h.LargeSize)
	var completed, failed int
	for _, delay := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond} {
		ctx, cancel := context.WithCancel(t.Context())
		tk, err := s.CheckIn(ctx, tenant, &cancelAtEOF{r: bytes.NewReader(data), delay: delay, cancel: cancel}, nil)
		cancel()
		if err == nil {
			completed++
			if got := ClaimBytes(t, s, tk); !bytes.Equal(got, data) {
				t.Fatalf("cancel after %v: completed check-in claims other bytes", delay)
			}
			if err := DeleteObject(t.Context(), s, tk.Key); err != nil {
				t.Fatal(err)
			}
			continue
		}
		failed++
		classify(t, fmt.Sprintf("cancel %v after reading", delay), err)
		keys, lerr := listKeys(t.Context(), s.Bucket(), prefix, true)
		if lerr != nil {
			t.Fatal(lerr)
		}
		for _, k := range keys {
			orphan := &claimcheck.Ticket{Version: claimcheck.TicketVersion, Tenant: tenant, Store: s.Name(), Key: k,
				SHA256: sum(data), Size: int64(len(data)), Created: time.Now()}
			p, err := s.Claim(orphan)
			if err == nil {
				err = p.Verify(t.Context())
				p.Close()
			}
			if err != nil {
				t.Fatalf("cancel %v after reading: the failed check-in left an object that is not the whole payload: %v", delay, err)
			}
			t.Logf("cancel %v after reading: the store committed the whole payload as the cancellation landed (an orphan)", delay)
			if err := DeleteObject(t.Context(), s, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no cancellation after reading failed a check-in")
	}
	t.Logf("cancelled after reading: %d failed, %d completed first", failed, completed)
}

func testListByPrefix(t *testing.T, h Harness) {
	s := h.Open(t, nil)
	a, b := NewTenant(t, s), NewTenant(t, s)
	big := s.InlineThreshold() + 1
	var wantA, wantResA, wantB []string
	for i := range 3 {
		wantA = append(wantA, checkIn(t, s, a, Payload(uint64(1000+i), big), nil).Key)
	}
	wantA = append(wantA, checkIn(t, s, a, Payload(1003, 10), &claimcheck.CheckInOptions{Name: "x/y"}).Key)
	wantResA = append(wantResA, checkIn(t, s, a, Payload(1004, big), &claimcheck.CheckInOptions{Result: true}).Key)
	for i := range 2 {
		wantB = append(wantB, checkIn(t, s, b, Payload(uint64(1010+i), big), nil).Key)
	}
	checkIn(t, s, a, Payload(1020, 10), nil) // inline: no object
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{claimcheck.PrefixPayloads + a + "/", wantA},
		{claimcheck.PrefixResults + a + "/", wantResA},
		{claimcheck.PrefixPayloads + b + "/", wantB},
		{claimcheck.PrefixResults + b + "/", nil},
	} {
		slices.Sort(c.want)
		if got := Keys(t, s, c.prefix); !slices.Equal(got, c.want) {
			t.Fatalf("list %s…: %d keys %q, want %d %q", c.prefix[:9], len(got), got, len(c.want), c.want)
		}
	}
}

func testErrorClasses(t *testing.T, h Harness) {
	ctx := t.Context()
	s := h.Open(t, &claimcheck.Options{MaxPayloadSize: 1 << 20})
	tenant := NewTenant(t, s)
	tk := checkIn(t, s, tenant, Payload(1100, 100<<10), nil)

	for _, c := range []struct {
		name      string
		err       error
		class     error
		permanent bool
		reason    string
	}{
		{"ticket for another store", func() error {
			other := *tk
			other.Store = "elsewhere"
			_, err := s.Claim(&other)
			return err
		}(), claimcheck.ErrTicketInvalid, true, claimcheck.ReasonTicketInvalid},
		{"key outside the tenant's prefix", func() error {
			other := *tk
			other.Tenant = "someone-else"
			_, err := s.Claim(&other)
			return err
		}(), claimcheck.ErrTicketInvalid, true, claimcheck.ReasonTicketInvalid},
		{"payload too large", func() error {
			_, err := s.CheckIn(ctx, tenant, bytes.NewReader(Payload(1101, 1<<20+1)), nil)
			return err
		}(), claimcheck.ErrPayloadTooLarge, true, claimcheck.ReasonPayloadTooLarge},
		{"check-in with a cancelled context", func() error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			_, err := s.CheckIn(c, tenant, bytes.NewReader(Payload(1102, 100<<10)), nil)
			return err
		}(), claimcheck.ErrUnavailable, false, claimcheck.ReasonUnavailable},
		{"claim with a cancelled context", func() error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			p, err := s.Claim(tk)
			if err != nil {
				return err
			}
			defer p.Close()
			return p.Verify(c)
		}(), claimcheck.ErrUnavailable, false, claimcheck.ReasonUnavailable},
	} {
		if !errors.Is(c.err, c.class) || claimcheck.IsPermanent(c.err) != c.permanent || claimcheck.Reason(c.err) != c.reason {
			t.Errorf("%s: %v (permanent %v, reason %q), want %v (permanent %v, reason %q)",
				c.name, c.err, claimcheck.IsPermanent(c.err), claimcheck.Reason(c.err), c.class, c.permanent, c.reason)
		}
		if errors.Is(c.err, claimcheck.ErrPayloadMissing) {
			t.Errorf("%s: reported as missing: %v", c.name, c.err)
		}
	}
	if got := Keys(t, s, claimcheck.PrefixPayloads+tenant+"/"); len(got) != 1 {
		t.Fatalf("refused check-ins left objects: %d keys, want 1", len(got))
	}
}

// testStreamReads claims a large payload, plain and encrypted: OpenStream
// read in small pieces delivers the bytes and io.EOF; an OpenStream
// closed after its first bytes stops (an encrypted one's decrypting
// goroutine too: no read after Close, -race) and then fails its reads,
// never io.EOF; a Verify whose context is cancelled is ErrUnavailable,
// never corrupt, and a later Open still verifies.
func testStreamReads(t *testing.T, h Harness) {
	for _, enc := range []bool{false, true} {
		t.Run(fmt.Sprintf("encrypted=%v", enc), func(t *testing.T) {
			opts := &claimcheck.Options{AlwaysOffload: true}
			if enc {
				opts = newKeeperOptions(t, *opts)
			}
			s := h.Open(t, opts)
			tenant := NewTenant(t, s)
			data := Payload(900, h.LargeSize+12345)
			tk := checkIn(t, s, tenant, data, nil)
			p, err := s.Claim(tk)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()

			r, err := p.OpenStream(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			buf := make([]byte, 7000) // smaller than, and not dividing, a 1 MiB ciphertext segment
			for {
				n, err := r.Read(buf)
				got.Write(buf[:n])
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("OpenStream read after %d bytes: %v", got.Len(), err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), data) {
				t.Fatalf("OpenStream in 7000-byte reads: %d bytes, not the payload", got.Len())
			}

			r, err = p.OpenStream(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(r, buf); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatalf("Close after %d bytes: %v", len(buf), err)
			}
			if n, err := r.Read(buf); err == nil || err == io.EOF {
				t.Fatalf("Read after Close = %d, %v; want an error", n, err)
			}

			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if err := p.Verify(ctx); !errors.Is(err, claimcheck.ErrUnavailable) || errors.Is(err, claimcheck.ErrPayloadCorrupt) {
				t.Fatalf("Verify with its context cancelled: %v, want ErrUnavailable", err)
			}
			if got := ClaimBytes(t, s, tk); !bytes.Equal(got, data) {
				t.Fatal("Open after a cancelled Verify: not the payload")
			}
		})
	}
}
