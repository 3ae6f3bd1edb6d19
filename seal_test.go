package claimcheck_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/secrets"
	_ "gocloud.dev/secrets/awskms" // awskms:// URLs: a real keeper that can be unreachable
	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// Object metadata names, as seal.go and checkin.go write them (fileblob keeps
// them in the "user.metadata" map of the object's .attrs sidecar).
const (
	metaDEK    = "claimcheck-dek"
	metaSHA256 = "claimcheck-sha256"
)

// newKeeper is a real keeper (gocloud's localsecrets: NaCl secretbox) under
// a fresh random key-encryption key.
func newKeeper(t testing.TB) *secrets.Keeper {
	t.Helper()
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	k := localsecrets.NewKeeper(key)
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// corpusPDF reads one file of testdata/pdf.
func corpusPDF(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "pdf", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// sealedSize is the ciphertext size of n plaintext bytes under Tink's
// AES256-GCM-HKDF-1MB streaming AEAD: a 40-byte header (length byte, 32-byte
// salt, 7-byte nonce prefix), then 1 MiB ciphertext segments each ending in
// a 16-byte tag, the first one sharing its space with the header.
func sealedSize(n int) int {
	const seg, header, tag = 1 << 20, 40, 16
	segments := 1
	if first := seg - header - tag; n > first {
		segments += (n - first + seg - tag - 1) / (seg - tag)
	}
	return header + n + tag*segments
}

// sealedInlineSize is the ciphertext size of an n-byte inline payload:
// Tink's AEAD (AES256-GCM) output prefix (5 bytes), 12-byte nonce,
// the bytes and a 16-byte tag.
func sealedInlineSize(n int) int { return 5 + 12 + n + 16 }

// plaintextRuns samples 32-byte windows of plain (every 512th offset, plus
// the first and the last window; the whole of plain when it is shorter) and
// counts how many occur anywhere in stored. It slides over stored once,
// looking each position's first 8 bytes up among the samples', so that
// multi-megabyte checks stay fast under the race detector.
func plaintextRuns(stored, plain []byte) (found, sampled int) {
	const window, stride = 32, 512
	if len(plain) < window {
		if bytes.Contains(stored, plain) {
			return 1, 1
		}
		return 0, 1
	}
	offsets := []int{}
	for off := 0; off+window <= len(plain); off += stride {
		offsets = append(offsets, off)
	}
	if last := len(plain) - window; offsets[len(offsets)-1] != last {
		offsets = append(offsets, last)
	}
	byPrefix := map[uint64][]int{}
	for _, off := range offsets {
		k := binary.LittleEndian.Uint64(plain[off:])
		byPrefix[k] = append(byPrefix[k], off)
	}
	seen := map[int]bool{}
	for i := 0; i+window <= len(stored); i++ {
		for _, off := range byPrefix[binary.LittleEndian.Uint64(stored[i:])] {
			if bytes.Equal(stored[i:i+window], plain[off:off+window]) {
				seen[off] = true
			}
		}
	}
	return len(seen), len(offsets)
}

// assertNoPlaintext fails if stored equals plain or holds any sampled run
// of it.
func assertNoPlaintext(t *testing.T, what string, stored, plain []byte) {
	t.Helper()
	if bytes.Equal(stored, plain) {
		t.Fatalf("%s: stored bytes equal the plaintext", what)
	}
	if found, sampled := plaintextRuns(stored, plain); found != 0 {
		t.Fatalf("%s: %d of %d sampled 32-byte plaintext windows occur in the stored bytes", what, found, sampled)
	}
}

// readAllOpen claims tk on s and reads it with Open (verified).
func readAllOpen(ctx context.Context, s *claimcheck.Store, tk *claimcheck.Ticket) ([]byte, error) {
	p, err := s.Claim(tk)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	r, err := p.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// readAllStream claims tk on s and reads OpenStream to its end, returning
// what was delivered and the error that ended the stream (nil at io.EOF).
func readAllStream(ctx context.Context, s *claimcheck.Store, tk *claimcheck.Ticket) ([]byte, error) {
	p, err := s.Claim(tk)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	r, err := p.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// assertRefusedAllWays claims tk on s through Verify, Open and OpenStream and
// checks each fails with class want, delivering no plaintext.
func assertRefusedAllWays(t *testing.T, s *claimcheck.Store, tk *claimcheck.Ticket, plain []byte, want error) {
	t.Helper()
	ctx := t.Context()
	p, err := s.Claim(tk)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	verr := p.Verify(ctx)
	p.Close()
	got, oerr := readAllOpen(ctx, s, tk)
	if len(got) != 0 {
		t.Fatalf("Open delivered %d bytes", len(got))
	}
	sgot, serr := readAllStream(ctx, s, tk)
	if found, _ := plaintextRuns(sgot, plain); found != 0 && len(plain) <= 1<<20 {
		// One-segment payloads: nothing of a segment that fails to
		// authenticate is ever delivered.
		t.Fatalf("OpenStream delivered plaintext (%d bytes) before failing", len(sgot))
	}
	for what, err := range map[string]error{"Verify": verr, "Open": oerr, "OpenStream": serr} {
		if err == nil {
			t.Fatalf("%s succeeded", what)
		}
		if !errors.Is(err, want) {
			t.Fatalf("%s: error = %v, want class %q", what, err, want)
		}
		if errors.Is(err, claimcheck.ErrPayloadMissing) {
			t.Fatalf("%s: %v is treated as missing", what, err)
		}
		if tk.Key != "" {
			assertRedacted(t, err, tk)
		}
		assertNoMarker(t, what+" error", err.Error())
	}
}

// TestSealEncryptsAtRest checks docs/invariants.md, invariant 9 on disk: with a
// keeper, neither the object file nor its sidecar nor an inline ticket holds
// any run of the plaintext, and claims return the exact original bytes.
func TestSealEncryptsAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t, &claimcheck.Options{Keeper: newKeeper(t)})
	pdf := corpusPDF(t, "bash.pdf")
	small := []byte(strings.Repeat("inline payload, encrypted in its ticket: "+payloadMarker+"\n", 40))

	tk := b.checkIn(t, "acme", pdf, &claimcheck.CheckInOptions{ContentType: "application/pdf"})
	if tk.IsInline() || tk.DEK != "" || tk.Size != int64(len(pdf)) || tk.SHA256 != sha256Hex(pdf) {
		t.Fatalf("offloaded ticket: inline=%v dek=%q size=%d sha256=%s", tk.IsInline(), tk.DEK, tk.Size, tk.SHA256)
	}
	assertContentKey(t, tk.Key, "acme")
	if got, want := b.files(t), []string{tk.Key, tk.Key + ".attrs"}; !slices.Equal(got, want) {
		t.Fatalf("bucket files = %q, want %q", got, want)
	}
	stored, err := os.ReadFile(b.objectPath(tk.Key))
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != sealedSize(len(pdf)) {
		t.Errorf("object is %d bytes, want %d (plaintext %d + Tink header and tag)", len(stored), sealedSize(len(pdf)), len(pdf))
	}
	assertNoPlaintext(t, "object file", stored, pdf)
	sidecar, err := os.ReadFile(b.objectPath(tk.Key) + ".attrs")
	if err != nil {
		t.Fatal(err)
	}
	assertNoPlaintext(t, ".attrs sidecar", sidecar, pdf)
	attrs, err := b.store.Bucket().Attributes(b.ctx, tk.Key)
	if err != nil {
		t.Fatal(err)
	}
	if attrs.Metadata[metaDEK] == "" || attrs.Metadata[metaSHA256] != tk.SHA256 {
		t.Fatalf("object metadata = %q: want a wrapped data key and the plaintext digest", attrs.Metadata)
	}
	wire := mustMarshal(t, tk)
	assertNoPlaintext(t, "offloaded ticket", wire, pdf)

	// The control: the same detector finds every window in a plaintext store.
	plain := setup(t, nil)
	ptk := plain.checkIn(t, "acme", pdf, nil)
	pstored, err := os.ReadFile(plain.objectPath(ptk.Key))
	if err != nil {
		t.Fatal(err)
	}
	if found, sampled := plaintextRuns(pstored, pdf); found != sampled || sampled < len(pdf)/512 {
		t.Fatalf("control: %d of %d windows found in an unencrypted object", found, sampled)
	}

	// Inline: the broker carries ciphertext and the wrapped key, not the bytes.
	itk := b.checkIn(t, "acme", small, nil)
	if !itk.IsInline() || itk.DEK == "" || itk.Size != int64(len(small)) || itk.SHA256 != sha256Hex(small) {
		t.Fatalf("inline ticket: inline=%v dek set=%v size=%d", itk.IsInline(), itk.DEK != "", itk.Size)
	}
	if len(itk.Inline) != sealedInlineSize(len(small)) {
		t.Errorf("inline ciphertext is %d bytes, want %d", len(itk.Inline), sealedInlineSize(len(small)))
	}
	assertNoPlaintext(t, "inline bytes", itk.Inline, small)
	iwire := mustMarshal(t, itk)
	assertNoMarker(t, "encoded inline ticket", string(iwire))
	if got := b.files(t); len(got) != 2 {
		t.Fatalf("inline check-in wrote to the bucket: %q", got)
	}

	// Claims return the exact bytes, after the ticket crossed the wire.
	for _, c := range []struct {
		name string
		wire []byte
		want []byte
	}{{"offloaded", wire, pdf}, {"inline", iwire, small}} {
		parsed, err := claimcheck.ParseTicket(c.wire)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAllOpen(b.ctx, b.store, parsed)
		if err != nil || sha256Hex(got) != sha256Hex(c.want) {
			t.Fatalf("%s: Open: %d bytes sha256 %s, %v; want %d bytes %s", c.name, len(got), sha256Hex(got), err, len(c.want), sha256Hex(c.want))
		}
		got, err = readAllStream(b.ctx, b.store, parsed)
		if err != nil || sha256Hex(got) != sha256Hex(c.want) {
			t.Fatalf("%s: OpenStream: %d bytes sha256 %s, %v", c.name, len(got), sha256Hex(got), err)
		}
	}
	b.assertSpoolEmpty(t)

	// Stat reports an encrypted object and the ciphertext's size.
	info, err := b.store.Stat(b.ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Exists || !info.Encrypted || !info.MatchesTicket || info.Size != int64(len(stored)) || info.SHA256Prefix != tk.SHA256[:12] {
		t.Fatalf("Stat = %+v", info)
	}

	// The same bytes again: the same key, no second object, the object not
	// rewritten (its ciphertext, under a fresh data key each write, would
	// differ), and the first ticket still claims.
	again := b.checkIn(t, "acme", pdf, &claimcheck.CheckInOptions{ContentType: "application/pdf"})
	if again.Key != tk.Key {
		t.Fatalf("second check-in key %q, first %q", again.Key, tk.Key)
	}
	if got, want := b.files(t), []string{tk.Key, tk.Key + ".attrs"}; !slices.Equal(got, want) {
		t.Fatalf("after the second check-in, bucket files = %q, want %q", got, want)
	}
	if now, _ := os.ReadFile(b.objectPath(tk.Key)); !bytes.Equal(now, stored) {
		t.Fatal("the second check-in rewrote the object")
	}
	if got, err := readAllOpen(b.ctx, b.store, tk); err != nil || !bytes.Equal(got, pdf) {
		t.Fatalf("first ticket after the second check-in: %d bytes, %v", len(got), err)
	}
	// An inline check-in of the same bytes encrypts anew (its own nonce),
	// under the tenant's inline data key (TestInlineDataKeyReuse).
	if itk2 := b.checkIn(t, "acme", small, nil); bytes.Equal(itk2.Inline, itk.Inline) {
		t.Fatal("two inline check-ins share a ciphertext")
	}
}

// TestSealEmptyAndMultiSegment covers the edges of the streaming AEAD: an
// empty payload (inline and offloaded) and a payload of several 1 MiB
// segments, each claimed back exactly.
func TestSealEmptyAndMultiSegment(t *testing.T) {
	t.Parallel()
	keeper := newKeeper(t)
	octave := corpusPDF(t, "octave.pdf") // 4.5 MiB: five segments
	for _, tc := range []struct {
		name string
		opts *claimcheck.Options
		data []byte
	}{
		{"EmptyInline", &claimcheck.Options{Keeper: keeper}, nil},
		{"EmptyOffloaded", &claimcheck.Options{Keeper: keeper, AlwaysOffload: true}, nil},
		{"OneByteOffloaded", &claimcheck.Options{Keeper: keeper, AlwaysOffload: true}, []byte{'%'}},
		{"FiveSegments", &claimcheck.Options{Keeper: keeper}, octave},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.opts)
			tk := b.checkIn(t, "acme", tc.data, nil)
			if tk.IsInline() {
				if tk.DEK == "" || len(tk.Inline) != sealedInlineSize(len(tc.data)) {
					t.Fatalf("inline: dek set=%v, %d ciphertext bytes, want %d", tk.DEK != "", len(tk.Inline), sealedInlineSize(len(tc.data)))
				}
			} else {
				stored, err := os.ReadFile(b.objectPath(tk.Key))
				if err != nil {
					t.Fatal(err)
				}
				if len(stored) != sealedSize(len(tc.data)) {
					t.Fatalf("object is %d bytes, want %d", len(stored), sealedSize(len(tc.data)))
				}
				if len(tc.data) >= 32 { // a shorter run may occur by chance
					assertNoPlaintext(t, "object", stored, tc.data)
				}
			}
			parsed, err := claimcheck.ParseTicket(mustMarshal(t, tk))
			if err != nil {
				t.Fatal(err)
			}
			for what, read := range map[string]func(context.Context, *claimcheck.Store, *claimcheck.Ticket) ([]byte, error){
				"Open": readAllOpen, "OpenStream": readAllStream,
			} {
				got, err := read(b.ctx, b.store, parsed)
				if err != nil || len(got) != len(tc.data) || sha256Hex(got) != sha256Hex(tc.data) {
					t.Fatalf("%s: %d bytes, %v; want %d bytes", what, len(got), err, len(tc.data))
				}
			}
		})
	}
}

// TestSealTamperedCiphertext changes the stored ciphertext in place: every
// change is ErrPayloadCorrupt (permanent), never plaintext, never "missing".
func TestSealTamperedCiphertext(t *testing.T) {
	t.Parallel()
	const seg = 1 << 20
	for _, tc := range []struct {
		name string
		file string
		f    func([]byte) []byte
	}{
		{"FlipHeaderLength", "bash.pdf", func(d []byte) []byte { d[0] ^= 0x01; return d }},
		{"FlipSalt", "bash.pdf", func(d []byte) []byte { d[10] ^= 0x80; return d }},
		{"FlipNoncePrefix", "bash.pdf", func(d []byte) []byte { d[36] ^= 0x01; return d }},
		{"FlipMiddle", "bash.pdf", func(d []byte) []byte { d[len(d)/2] ^= 0x01; return d }},
		{"FlipTag", "bash.pdf", func(d []byte) []byte { d[len(d)-1] ^= 0x01; return d }},
		{"TruncateTag", "bash.pdf", func(d []byte) []byte { return d[:len(d)-16] }},
		{"HeaderOnly", "bash.pdf", func(d []byte) []byte { return d[:40] }},
		{"Empty", "bash.pdf", func(d []byte) []byte { return nil }},
		{"Appended", "bash.pdf", func(d []byte) []byte { return append(d, d[40:80]...) }},
		// Several segments: dropping whole trailing segments, or reordering
		// them, is detected (the last segment is marked, and each nonce
		// carries its segment's index).
		{"DropLastSegment", "octave.pdf", func(d []byte) []byte { return d[:4*seg] }},
		{"CutAtFirstSegment", "octave.pdf", func(d []byte) []byte { return d[:seg] }},
		{"SwapSegments", "octave.pdf", func(d []byte) []byte {
			out := slices.Clone(d[:seg])
			out = append(out, d[2*seg:3*seg]...)
			out = append(out, d[seg:2*seg]...)
			return append(out, d[3*seg:]...)
		}},
		{"FlipLastSegment", "octave.pdf", func(d []byte) []byte { d[4*seg+100] ^= 0x01; return d }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &claimcheck.Options{Keeper: newKeeper(t)})
			data := corpusPDF(t, tc.file)
			tk := b.checkIn(t, "acme", data, nil)
			corruptFile(t, b, tk, tc.f)
			assertRefusedAllWays(t, b.store, tk, data, claimcheck.ErrPayloadCorrupt)
			_, err := readAllOpen(b.ctx, b.store, tk)
			if !claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonPayloadCorrupt {
				t.Fatalf("IsPermanent=%v Reason=%q (%v)", claimcheck.IsPermanent(err), claimcheck.Reason(err), err)
			}
			b.assertSpoolEmpty(t)
		})
	}
}

// editSidecar rewrites the "user.metadata" map of key's .attrs sidecar.
func editSidecar(t *testing.T, b *testBundle, key string, f func(meta map[string]string)) {
	t.Helper()
	path := b.objectPath(key) + ".attrs"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	if err := json.Unmarshal(doc["user.metadata"], &meta); err != nil || meta == nil {
		t.Fatalf("sidecar metadata: %v", err)
	}
	f(meta)
	if doc["user.metadata"], err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	if raw, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSealSwappedDataKey moves wrapped data keys between objects, as
// someone with write access to the store (but not the keeper) could: the
// associated data binds each wrapped key to its tenant and object key, so
// nothing decrypts.
func TestSealSwappedDataKey(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		swap func(t *testing.T, b *testBundle, victim, donor *claimcheck.Ticket)
	}{
		{"WholeSidecar", func(t *testing.T, b *testBundle, victim, donor *claimcheck.Ticket) {
			copyFile(t, b.objectPath(donor.Key)+".attrs", b.objectPath(victim.Key)+".attrs")
		}},
		{"DataKeyOnly", func(t *testing.T, b *testBundle, victim, donor *claimcheck.Ticket) {
			a, err := b.store.Bucket().Attributes(b.ctx, donor.Key)
			if err != nil {
				t.Fatal(err)
			}
			editSidecar(t, b, victim.Key, func(m map[string]string) { m[metaDEK] = a.Metadata[metaDEK] })
		}},
		{"ObjectAndSidecar", func(t *testing.T, b *testBundle, victim, donor *claimcheck.Ticket) {
			// The donor's whole object under the victim's key: its data key
			// is bound to the donor's key.
			copyFile(t, b.objectPath(donor.Key), b.objectPath(victim.Key))
			copyFile(t, b.objectPath(donor.Key)+".attrs", b.objectPath(victim.Key)+".attrs")
		}},
		{"ObjectOnly", func(t *testing.T, b *testBundle, victim, donor *claimcheck.Ticket) {
			// The victim's data key opens, but the ciphertext is another's.
			copyFile(t, b.objectPath(donor.Key), b.objectPath(victim.Key))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &claimcheck.Options{Keeper: newKeeper(t)})
			victimData := randomBytes(200_000, 1)
			donorData := randomBytes(200_000, 2)
			victim := b.checkIn(t, "acme", victimData, nil)
			donor := b.checkIn(t, "acme", donorData, nil)
			tc.swap(t, b, victim, donor)

			for _, plain := range [][]byte{victimData, donorData} {
				if got, err := readAllOpen(b.ctx, b.store, victim); err == nil || len(got) != 0 {
					t.Fatalf("Open after the swap: %d bytes, %v", len(got), err)
				}
				got, err := readAllStream(b.ctx, b.store, victim)
				if err == nil {
					t.Fatalf("OpenStream after the swap read %d bytes to io.EOF", len(got))
				}
				if found, _ := plaintextRuns(got, plain); found != 0 {
					t.Fatalf("OpenStream delivered plaintext before failing")
				}
			}
			// Corrupt or denied, never missing, never plaintext.
			_, err := readAllOpen(b.ctx, b.store, victim)
			if !errors.Is(err, claimcheck.ErrPayloadCorrupt) && !errors.Is(err, claimcheck.ErrAccessDenied) {
				t.Fatalf("error = %v, want corrupt or access denied", err)
			}
			assertRedacted(t, err, victim)
			// The donor is untouched and still claims.
			if got, err := readAllOpen(b.ctx, b.store, donor); err != nil || !bytes.Equal(got, donorData) {
				t.Fatalf("donor after the swap: %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestSealTamperedDataKey alters the wrapped data key itself. The keeper
// cannot tell that from a wrong key-encryption key, so it is not proven
// corrupt (seal.go retries it as a keeper failure); what matters is that no
// byte comes out and that it is never "missing".
func TestSealTamperedDataKey(t *testing.T) {
	t.Parallel()
	b := setup(t, &claimcheck.Options{Keeper: newKeeper(t)})
	data := randomBytes(150_000, 3)
	tk := b.checkIn(t, "acme", data, nil)
	editSidecar(t, b, tk.Key, func(m map[string]string) {
		dek := []byte(m[metaDEK])
		i := len(dek) / 2
		if dek[i] == 'A' {
			dek[i] = 'B'
		} else {
			dek[i] = 'A'
		}
		m[metaDEK] = string(dek)
	})
	got, err := readAllOpen(b.ctx, b.store, tk)
	if err == nil || len(got) != 0 || errors.Is(err, claimcheck.ErrPayloadMissing) {
		t.Fatalf("Open with an altered wrapped key: %d bytes, %v", len(got), err)
	}
	t.Logf("altered wrapped key: Reason=%s permanent=%v", claimcheck.Reason(err), claimcheck.IsPermanent(err))

	editSidecar(t, b, tk.Key, func(m map[string]string) { m[metaDEK] = "not base64!" })
	_, err = readAllOpen(b.ctx, b.store, tk)
	assertIs(t, err, claimcheck.ErrPayloadCorrupt)

	// No sidecar at all: the object reads as unencrypted, which an
	// encrypting store refuses as a configuration mismatch.
	if err := os.Remove(b.objectPath(tk.Key) + ".attrs"); err != nil {
		t.Fatal(err)
	}
	assertRefusedAllWays(t, b.store, tk, data, claimcheck.ErrConfig)
}

// TestSealBoundToTenant copies one tenant's object, ciphertext and sidecar,
// onto another tenant's key for the same bytes (with unsalted keys the two
// differ only in the tenant): the associated data binds it to its tenant.
func TestSealBoundToTenant(t *testing.T) {
	t.Parallel()

	for _, withSidecar := range []bool{true, false} {
		t.Run(fmt.Sprintf("sidecar=%v", withSidecar), func(t *testing.T) {
			t.Parallel()
			b := setup(t, &claimcheck.Options{Keeper: newKeeper(t)})
			data := corpusPDF(t, "refcard-a4.pdf")
			alpha := b.checkIn(t, "alpha", data, nil)
			beta := b.checkIn(t, "beta", data, nil)
			if alpha.Key == beta.Key || strings.TrimPrefix(alpha.Key, "payloads/alpha/") != strings.TrimPrefix(beta.Key, "payloads/beta/") {
				t.Fatalf("keys %q and %q", alpha.Key, beta.Key)
			}
			copyFile(t, b.objectPath(alpha.Key), b.objectPath(beta.Key))
			if withSidecar {
				copyFile(t, b.objectPath(alpha.Key)+".attrs", b.objectPath(beta.Key)+".attrs")
			}
			assertRefusedAllWays(t, b.store, beta, data, claimcheck.ErrPayloadCorrupt)
			if got, err := readAllOpen(b.ctx, b.store, alpha); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("alpha's own ticket: %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestSealWrongKeeper claims with a worker whose keeper holds another key:
// a configuration problem, retried (transient) and never "missing" or
// "corrupt" (which would dead-letter good payloads).
func TestSealWrongKeeper(t *testing.T) {
	t.Parallel()
	b := setup(t, &claimcheck.Options{Keeper: newKeeper(t)})
	data := corpusPDF(t, "bash.pdf")
	small := []byte("small and inline " + payloadMarker)
	tk := b.checkIn(t, "acme", data, nil)
	itk := b.checkIn(t, "acme", small, nil)

	worker := open(t, "file://"+b.root, &claimcheck.Options{Keeper: newKeeper(t)})
	for _, c := range []struct {
		name  string
		tk    *claimcheck.Ticket
		plain []byte
	}{{"offloaded", tk, data}, {"inline", itk, small}} {
		p, err := worker.store.Claim(c.tk)
		if err != nil {
			t.Fatal(err)
		}
		verr := p.Verify(worker.ctx)
		p.Close()
		got, oerr := readAllOpen(worker.ctx, worker.store, c.tk)
		sgot, serr := readAllStream(worker.ctx, worker.store, c.tk)
		if len(got) != 0 || len(sgot) != 0 {
			t.Fatalf("%s: delivered %d / %d bytes", c.name, len(got), len(sgot))
		}
		for what, err := range map[string]error{"Verify": verr, "Open": oerr, "OpenStream": serr} {
			if err == nil {
				t.Fatalf("%s %s succeeded with the wrong key", c.name, what)
			}
			reason := claimcheck.Reason(err)
			if claimcheck.IsPermanent(err) || (reason != claimcheck.ReasonAccessDenied && reason != claimcheck.ReasonKeeper) {
				t.Errorf("%s %s: IsPermanent=%v Reason=%q (%v); want transient access-denied or keeper-failed",
					c.name, what, claimcheck.IsPermanent(err), reason, err)
			}
			if errors.Is(err, claimcheck.ErrPayloadMissing) || errors.Is(err, claimcheck.ErrPayloadCorrupt) {
				t.Errorf("%s %s: %v", c.name, what, err)
			}
			if c.tk.Key != "" {
				assertRedacted(t, err, c.tk)
			}
		}
	}
	worker.assertSpoolEmpty(t)
	// The payload is intact: the right keeper still claims it.
	if got, err := readAllOpen(b.ctx, b.store, tk); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("right keeper after the failures: %d bytes, %v", len(got), err)
	}
}

// TestSealConfigMismatch pairs stores that disagree about encryption.
func TestSealConfigMismatch(t *testing.T) {
	t.Parallel()
	enc := setup(t, &claimcheck.Options{Keeper: newKeeper(t)})
	noKeeper := open(t, "file://"+enc.root, nil)
	data := corpusPDF(t, "TeXShopAndAsymptote.pdf")
	small := []byte("inline " + payloadMarker)

	// A worker without a keeper given an encrypted inline ticket: a
	// configuration error, retried, never dead-lettered.
	itk := enc.checkIn(t, "acme", small, nil)
	_, err := readAllOpen(noKeeper.ctx, noKeeper.store, itk)
	assertIs(t, err, claimcheck.ErrConfig)
	if claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonConfig {
		t.Fatalf("inline, no keeper: IsPermanent=%v Reason=%q", claimcheck.IsPermanent(err), claimcheck.Reason(err))
	}
	assertNoMarker(t, "error", err.Error())

	// The same for an encrypted object: the worker's missing keeper is the
	// problem, not the payload, which must not be dead-lettered as corrupt.
	tk := enc.checkIn(t, "acme", data, nil)
	for what, read := range map[string]func(context.Context, *claimcheck.Store, *claimcheck.Ticket) ([]byte, error){
		"Open": readAllOpen, "OpenStream": readAllStream,
	} {
		_, err := read(noKeeper.ctx, noKeeper.store, tk)
		if !errors.Is(err, claimcheck.ErrConfig) || claimcheck.IsPermanent(err) {
			t.Errorf("offloaded, no keeper, %s: error = %v (IsPermanent=%v Reason=%q); want a transient ErrConfig",
				what, err, claimcheck.IsPermanent(err), claimcheck.Reason(err))
		}
	}
	if got, err := readAllOpen(enc.ctx, enc.store, tk); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the encrypting store still claims it: %d bytes, %v", len(got), err)
	}

	// A store with a keeper refuses an unencrypted object: a producer and
	// worker configuration mismatch (retried, naming the fix), never a
	// corrupt payload.
	other := setup(t, nil)
	ptk := other.checkIn(t, "acme", data, nil)
	reader := open(t, "file://"+other.root, &claimcheck.Options{Keeper: newKeeper(t)})
	assertRefusedAllWays(t, reader.store, ptk, data, claimcheck.ErrConfig)
	_, err = readAllOpen(reader.ctx, reader.store, ptk)
	if claimcheck.IsPermanent(err) || !strings.Contains(err.Error(), "stored unencrypted") || !strings.Contains(err.Error(), "--keeper") {
		t.Fatalf("unencrypted object on an encrypting store: %v", err)
	}

	// And an encrypting store does not take over an unencrypted object of
	// the same bytes: it writes its own, sealed, under another key.
	encOther := open(t, "file://"+other.root, &claimcheck.Options{Keeper: newKeeper(t)})
	etk, err := encOther.store.CheckIn(encOther.ctx, "acme", bytes.NewReader(data), nil)
	if err != nil || etk.Key == ptk.Key {
		t.Fatalf("sealed check-in of bytes stored plain: %v, key reused: %v", err, err == nil && etk.Key == ptk.Key)
	}
}

// closedPort returns a local TCP address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// assertFailedClosed checks a check-in that the keeper could not serve:
// transient, and nothing at all under the bucket (no plaintext, no
// ciphertext, no sidecar, no temporary file) nor in the spool.
func assertFailedClosed(t *testing.T, b *testBundle, what string, tk *claimcheck.Ticket, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: check-in succeeded without a keeper: %+v", what, tk)
	}
	if tk != nil {
		t.Fatalf("%s: a ticket came back with the error", what)
	}
	if claimcheck.IsPermanent(err) || (!errors.Is(err, claimcheck.ErrKeeper) && !errors.Is(err, claimcheck.ErrAccessDenied)) {
		t.Fatalf("%s: error = %v (IsPermanent=%v Reason=%q); want transient keeper-failed or denied", what, err, claimcheck.IsPermanent(err), claimcheck.Reason(err))
	}
	assertNoMarker(t, what+" error", err.Error())
	if files := b.files(t); len(files) != 0 {
		t.Fatalf("%s: files left under the bucket: %q", what, files)
	}
	b.assertSpoolEmpty(t)
}

// TestSealKeeperUnreachable opens a real AWS KMS keeper (gocloud's awskms
// driver) whose endpoint is a closed local port: check-in fails closed.
// Credentials are anonymous (a URL parameter), so no environment is read
// and no metadata service is asked; the SDK's own retries (three attempts,
// not settable by URL) are bounded by the context.
func TestSealKeeperUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	q := url.Values{"region": {"us-east-1"}, "anonymous": {"true"}, "endpoint": {"http://" + closedPort(t)}}
	keeper, err := secrets.OpenKeeper(ctx, "awskms://alias/claimcheck-test?"+q.Encode())
	if err != nil {
		t.Fatalf("OpenKeeper: %v", err)
	}
	t.Cleanup(func() { _ = keeper.Close() })
	b := setup(t, &claimcheck.Options{Keeper: keeper})

	for _, c := range []struct {
		name string
		data []byte
		opts *claimcheck.CheckInOptions
	}{
		{"offloaded", corpusPDF(t, "bash.pdf"), nil},
		{"inline", []byte("inline " + payloadMarker), nil},
	} {
		start := time.Now()
		tk, err := b.store.CheckIn(ctx, "acme", bytes.NewReader(c.data), c.opts)
		t.Logf("%s: failed after %v: %v", c.name, time.Since(start).Round(time.Millisecond), err)
		assertFailedClosed(t, b, c.name, tk, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the check-ins only failed because the test's deadline passed")
	}
}

// TestSealKeeperClosed checks in through a keeper that has been closed.
func TestSealKeeperClosed(t *testing.T) {
	t.Parallel()
	keeper := newKeeper(t)
	b := setup(t, &claimcheck.Options{Keeper: keeper})
	data := corpusPDF(t, "bash.pdf")
	tk := b.checkIn(t, "acme", data, nil) // works while open
	if err := keeper.Close(); err != nil {
		t.Fatal(err)
	}
	// Claims fail transiently; the object is not "missing".
	_, err := readAllOpen(b.ctx, b.store, tk)
	if err == nil || claimcheck.IsPermanent(err) || errors.Is(err, claimcheck.ErrPayloadMissing) {
		t.Fatalf("claim through a closed keeper: %v", err)
	}
	if err := os.RemoveAll(b.root); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(b.root, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"offloaded", data}, {"inline", []byte("inline " + payloadMarker)}} {
		tk, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(c.data), nil)
		assertFailedClosed(t, b, c.name, tk, err)
	}
}

// stubKMS is a local endpoint speaking enough of the AWS KMS JSON protocol
// (Encrypt, Decrypt) for gocloud's real awskms driver and the AWS SDK. Its
// "ciphertext" is the plaintext behind a marker: it stands in for KMS's
// answers, not its cryptography. While refusal is set it answers every
// request with that KMS exception: DisabledException for a disabled key,
// AccessDeniedException for a key whose policy refuses the caller (which
// local-kms, having no IAM, cannot answer: see keeper_kms_test.go).
type stubKMS struct {
	refusal atomic.Value // string: "" or the exception's name
	calls   atomic.Int64
}

func (s *stubKMS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if r, _ := s.refusal.Load().(string); r != "" {
		w.Header().Set("X-Amzn-ErrorType", r)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"__type":%q,"message":"refused: arn:aws:kms:us-east-1:000000000000:key/stub"}`, r)
		return
	}
	// Blob fields are base64 strings in requests; []byte encodes as such.
	var in struct{ Plaintext, CiphertextBlob []byte }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	const marker = "stub-kms:"
	out := map[string]any{"KeyId": "arn:aws:kms:us-east-1:000000000000:key/stub"}
	switch target := r.Header.Get("X-Amz-Target"); target {
	case "TrentService.Encrypt":
		out["CiphertextBlob"] = append([]byte(marker), in.Plaintext...)
	case "TrentService.Decrypt":
		pt, ok := bytes.CutPrefix(in.CiphertextBlob, []byte(marker))
		if !ok {
			w.Header().Set("X-Amzn-ErrorType", "InvalidCiphertextException")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"InvalidCiphertextException","message":"bad ciphertext"}`)
			return
		}
		out["Plaintext"] = pt
	default:
		http.Error(w, "unexpected target "+target, http.StatusBadRequest)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// TestSealKeeperDenied runs gocloud's awskms keeper against a stub KMS whose
// key is disabled, or refuses the caller, after the payloads were checked
// in: an operator's error to fix while jobs wait. Claims and check-ins fail
// as keeper-failed (transient), never as corrupt or missing, and succeed
// again once the key is usable. TestKeeperLocalKMS does the same against a
// real KMS emulator.
func TestSealKeeperDenied(t *testing.T) {
	for _, refusal := range []string{"DisabledException", "AccessDeniedException"} {
		t.Run(refusal, func(t *testing.T) { testSealKeeperRefused(t, refusal) })
	}
}

func testSealKeeperRefused(t *testing.T, refusal string) {
	t.Parallel()
	kms := &stubKMS{}
	srv := httptest.NewServer(kms)
	t.Cleanup(srv.Close)
	q := url.Values{"region": {"us-east-1"}, "anonymous": {"true"}, "endpoint": {srv.URL}}
	keeper, err := secrets.OpenKeeper(t.Context(), "awskms://alias/claimcheck-test?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keeper.Close() })
	b := setup(t, &claimcheck.Options{Keeper: keeper})
	data := corpusPDF(t, "bash.pdf")
	small := []byte("inline " + payloadMarker)
	tk := b.checkIn(t, "acme", data, nil)
	itk := b.checkIn(t, "acme", small, nil)
	if kms.calls.Load() != 2 {
		t.Fatalf("KMS saw %d calls for two check-ins", kms.calls.Load())
	}
	files := b.files(t)

	kms.refusal.Store(refusal)
	for _, c := range []struct {
		name string
		tk   *claimcheck.Ticket
	}{{"offloaded", tk}, {"inline", itk}} {
		for what, read := range map[string]func(context.Context, *claimcheck.Store, *claimcheck.Ticket) ([]byte, error){
			"Open": readAllOpen, "OpenStream": readAllStream,
		} {
			got, err := read(b.ctx, b.store, c.tk)
			if len(got) != 0 || !errors.Is(err, claimcheck.ErrKeeper) || claimcheck.IsPermanent(err) ||
				claimcheck.Reason(err) != claimcheck.ReasonKeeper || !strings.Contains(err.Error(), "key/stub") {
				t.Errorf("%s %s with the key refused: %d bytes, %v (IsPermanent=%v Reason=%q); want transient keeper-failed naming the key",
					c.name, what, len(got), err, claimcheck.IsPermanent(err), claimcheck.Reason(err))
			}
		}
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"offloaded", randomBytes(100_000, 7)}, {"inline", []byte("another " + payloadMarker)}} {
		// globex: acme's inline data key, made before the refusal, still
		// seals for up to a minute (TestInlineDataKeyAfterKeeperRefuses).
		tk, err := b.store.CheckIn(b.ctx, "globex", bytes.NewReader(c.data), nil)
		if tk != nil || !errors.Is(err, claimcheck.ErrKeeper) || claimcheck.IsPermanent(err) {
			t.Errorf("%s check-in with the key refused: %v, %v; want transient keeper-failed", c.name, tk, err)
		}
	}
	if got := b.files(t); !slices.Equal(got, files) {
		t.Fatalf("files after denied check-ins = %q, want %q", got, files)
	}
	b.assertSpoolEmpty(t)

	kms.refusal.Store("")
	for _, c := range []struct {
		tk   *claimcheck.Ticket
		want []byte
	}{{tk, data}, {itk, small}} {
		if got, err := readAllOpen(b.ctx, b.store, c.tk); err != nil || !bytes.Equal(got, c.want) {
			t.Fatalf("claim after the key is enabled again: %d bytes, %v", len(got), err)
		}
	}
}

// TestSealInlineStreamingFormat: an inline ticket sealed with Tink's
// streaming AEAD, as inline tickets were before they were sealed with
// one-shot AES256-GCM (testdata/seal/inline-streaming.json, under the key
// below), is still claimed and verified; a flipped ciphertext byte is
// still corrupt; and a new inline check-in is sealed in the one-shot
// form, which the same store reads.
func TestSealInlineStreamingFormat(t *testing.T) {
	var key [32]byte
	copy(key[:], "claimcheck-fixture-streaming-key")
	keeper := localsecrets.NewKeeper(key)
	t.Cleanup(func() { _ = keeper.Close() })
	ctx := context.Background()
	s, err := claimcheck.OpenStore(ctx, "mem://", &claimcheck.Options{Keeper: keeper})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	raw, err := os.ReadFile(filepath.Join("testdata", "seal", "inline-streaming.json"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := claimcheck.ParseTicket(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := "an inline payload sealed with Tink's streaming AEAD, before one-shot AES-GCM"
	if len(old.Inline) != sealedSize(len(want)) {
		t.Fatalf("fixture: %d ciphertext bytes, want the streaming AEAD's %d", len(old.Inline), sealedSize(len(want)))
	}
	if got := claimAll(t, s, old); got != want {
		t.Fatalf("old-format inline payload reads %q", got)
	}
	bad := *old
	bad.Inline = bytes.Clone(old.Inline)
	bad.Inline[len(bad.Inline)/2] ^= 1
	if _, err := openAll(s, &bad); !errors.Is(err, claimcheck.ErrPayloadCorrupt) {
		t.Fatalf("tampered old-format inline payload: %v, want ErrPayloadCorrupt", err)
	}

	tk, err := s.CheckIn(ctx, "acme", strings.NewReader(want), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !tk.IsInline() || tk.DEK == "" || len(tk.Inline) != sealedInlineSize(len(want)) {
		t.Fatalf("new inline ticket: inline=%v dek set=%v, %d ciphertext bytes, want %d", tk.IsInline(), tk.DEK != "", len(tk.Inline), sealedInlineSize(len(want)))
	}
	if got := claimAll(t, s, tk); got != want {
		t.Fatalf("one-shot inline payload reads %q", got)
	}
	bad = *tk
	bad.Inline = bytes.Clone(tk.Inline)
	bad.Inline[len(bad.Inline)-1] ^= 1
	if _, err := openAll(s, &bad); !errors.Is(err, claimcheck.ErrPayloadCorrupt) {
		t.Fatalf("tampered one-shot inline payload: %v, want ErrPayloadCorrupt", err)
	}
}

func openAll(s *claimcheck.Store, tk *claimcheck.Ticket) ([]byte, error) {
	p, err := s.Claim(tk)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	r, err := p.Open(context.Background())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func claimAll(t *testing.T, s *claimcheck.Store, tk *claimcheck.Ticket) string {
	t.Helper()
	b, err := openAll(s, tk)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sealedSizeSegments is sealedSize for Tink's AES256-GCM-HKDF streaming
// AEAD with seg-byte ciphertext segments.
func sealedSizeSegments(n, seg int) int {
	const header, tag = 40, 16
	segments := 1
	if first := seg - header - tag; n > first {
		segments += (n - first + seg - tag - 1) / (seg - tag)
	}
	return header + n + tag*segments
}

// TestSealSegmentSize: on the file store, a payload known to be at most
// 1 MiB before it is encrypted (a regular file) is sealed with 4 KiB
// segments, so that its check-in and claims do not allocate Tink's two
// 1 MiB segment buffers; a larger one, and a stream (encrypted as it is
// read, its size unknown), with 1 MiB segments. Each is claimed back
// exactly. (Stores written through a bucket writer encrypt once the
// payload is hashed, its size known: TestS3SealSegmentSize.)
func TestSealSegmentSize(t *testing.T) {
	t.Parallel()
	b := setup(t, &claimcheck.Options{Keeper: newKeeper(t), AlwaysOffload: true})
	for i, tc := range []struct {
		name   string
		size   int
		asFile bool
		seg    int
	}{
		{"File100KiB", 100 << 10, true, 4 << 10},
		{"File1MiB", 1 << 20, true, 4 << 10},
		{"File1MiBPlus1", 1<<20 + 1, true, 1 << 20},
		{"Stream100KiB", 100 << 10, false, 1 << 20},
		{"Stream1MiBPlus1", 1<<20 + 1, false, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randomBytes(tc.size, uint64(i)) // distinct bytes: no case reuses another's object
			var tk *claimcheck.Ticket
			if tc.asFile {
				var err error
				if tk, err = b.store.CheckIn(b.ctx, "acme", payloadFile(t, nil, data), nil); err != nil {
					t.Fatal(err)
				}
			} else {
				tk = b.checkIn(t, "acme", data, nil)
			}
			stored, err := os.ReadFile(b.objectPath(tk.Key))
			if err != nil {
				t.Fatal(err)
			}
			if want := sealedSizeSegments(tc.size, tc.seg); len(stored) != want {
				t.Fatalf("object is %d bytes, want %d (%d-byte segments)", len(stored), want, tc.seg)
			}
			got, err := readAllOpen(b.ctx, b.store, tk)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("claimed %d bytes, %v; want the %d checked in", len(got), err, len(data))
			}
		})
	}
}
