package claimcheck_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
)

// TestClaimCorpusExactBytes checks in every corpus PDF and claims it back:
// Open's bytes hash to the file's own sha256.
func TestClaimCorpusExactBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, f := range corpus(t) {
		want := sha256.Sum256(f.data)
		tk := b.checkIn(t, "acme", f.data, &claimcheck.CheckInOptions{ContentType: "application/pdf"})
		if inline := len(f.data) <= threshold; tk.IsInline() != inline {
			t.Fatalf("%s (%d bytes): inline=%v", f.name, len(f.data), tk.IsInline())
		}
		if tk.SHA256 != hex.EncodeToString(want[:]) {
			t.Fatalf("%s: ticket sha256 %s", f.name, tk.SHA256)
		}
		// The ticket crosses the wire before it is claimed.
		parsed, err := claimcheck.ParseTicket(mustMarshal(t, tk))
		if err != nil {
			t.Fatal(err)
		}
		p, err := b.store.Claim(parsed)
		if err != nil {
			t.Fatal(err)
		}
		if p.Size() != int64(len(f.data)) || p.Ticket() != parsed {
			t.Fatalf("%s: payload size %d", f.name, p.Size())
		}
		r, err := p.Open(b.ctx)
		if err != nil {
			t.Fatalf("%s: Open: %v", f.name, err)
		}
		h := sha256.New()
		n, err := io.Copy(h, r)
		if err != nil {
			t.Fatalf("%s: read: %v", f.name, err)
		}
		if got := h.Sum(nil); n != int64(len(f.data)) || !bytes.Equal(got, want[:]) {
			t.Fatalf("%s: read %d bytes sha256 %x, want %d bytes %x", f.name, n, got, len(f.data), want)
		}
		// PDF readers seek: the reader starts over and reads the trailer.
		if _, err := r.Seek(-5, io.SeekEnd); err != nil {
			t.Fatal(err)
		}
		tail, _ := io.ReadAll(r)
		if !bytes.Equal(tail, f.data[len(f.data)-5:]) {
			t.Fatalf("%s: tail after Seek = %q", f.name, tail)
		}
		r.Close()
		// Verified copies are spooled to unlinked files: nothing to clean.
		b.assertSpoolEmpty(t)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b.assertNoTempFiles(t)
}

// claimed checks in a payload (offloaded) and returns it with its ticket.
func claimed(t *testing.T, b *testBundle, size int) ([]byte, *claimcheck.Ticket) {
	t.Helper()
	data := randomBytes(size, uint64(size)+100)
	tk := b.checkIn(t, "acme", data, &claimcheck.CheckInOptions{ContentType: "application/pdf"})
	if tk.IsInline() {
		t.Fatalf("%d bytes went inline", size)
	}
	return data, tk
}

// claimErr claims tk and returns Open's error (the payload must not open).
func openErr(t *testing.T, b *testBundle, tk *claimcheck.Ticket) error {
	t.Helper()
	p, err := b.store.Claim(tk)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	defer p.Close()
	r, err := p.Open(b.ctx)
	if err == nil {
		r.Close()
		t.Fatal("Open succeeded")
	}
	return err
}

func TestClaimMissing(t *testing.T) {
	t.Parallel()

	for _, backend := range []string{"file", "mem"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var b *testBundle
			if backend == "file" {
				b = setup(t, nil)
			} else {
				b = setupMem(t, nil)
			}
			_, tk := claimed(t, b, 100_000)
			if err := b.store.Bucket().Delete(b.ctx, tk.Key); err != nil {
				t.Fatal(err)
			}

			check := func(what string, err error) {
				t.Helper()
				assertIs(t, err, claimcheck.ErrPayloadMissing)
				if !claimcheck.IsPermanent(err) {
					t.Errorf("%s: IsPermanent = false", what)
				}
				if r := claimcheck.Reason(err); r != "payload-missing" {
					t.Errorf("%s: Reason = %q", what, r)
				}
				if errors.Is(err, claimcheck.ErrPayloadCorrupt) || errors.Is(err, claimcheck.ErrAccessDenied) {
					t.Errorf("%s: error has two classes: %v", what, err)
				}
				assertRedacted(t, err, tk)
			}
			check("Open", openErr(t, b, tk))

			p, err := b.store.Claim(tk)
			if err != nil {
				t.Fatal(err)
			}
			check("Verify", p.Verify(b.ctx))
			_, err = p.OpenStream(b.ctx)
			check("OpenStream", err)
			b.assertSpoolEmpty(t)

			info, err := b.store.Stat(b.ctx, tk)
			if err != nil || info.Exists {
				t.Fatalf("Stat of a missing object = %+v, %v", info, err)
			}
		})
	}
}

// corruptFile rewrites the object file behind tk with f's result.
func corruptFile(t *testing.T, b *testBundle, tk *claimcheck.Ticket, f func([]byte) []byte) {
	t.Helper()
	path := b.objectPath(tk.Key)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestClaimCorrupt(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		f    func([]byte) []byte
		msg  string
	}{
		{"FlipFirstByte", func(d []byte) []byte { d[0] ^= 0x01; return d }, "sha256 mismatch"},
		{"FlipMiddleByte", func(d []byte) []byte { d[len(d)/2] ^= 0x80; return d }, "sha256 mismatch"},
		{"FlipLastByte", func(d []byte) []byte { d[len(d)-1] ^= 0xff; return d }, "sha256 mismatch"},
		{"TruncatedByOne", func(d []byte) []byte { return d[:len(d)-1] }, "object has 199999 bytes, ticket says 200000"},
		{"TruncatedToHalf", func(d []byte) []byte { return d[:len(d)/2] }, "object has 100000 bytes, ticket says 200000"},
		{"Empty", func(d []byte) []byte { return nil }, "object has 0 bytes, ticket says 200000"},
		{"ExtendedByOne", func(d []byte) []byte { return append(d, 0) }, "longer than the ticket's size"},
		{"Doubled", func(d []byte) []byte { return append(d, d...) }, "longer than the ticket's size"},
		{"Replaced", func(d []byte) []byte { return randomBytes(len(d), 999) }, "sha256 mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			_, tk := claimed(t, b, 200_000)
			corruptFile(t, b, tk, tc.f)

			check := func(what string, err error) {
				t.Helper()
				assertIs(t, err, claimcheck.ErrPayloadCorrupt)
				if !claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonPayloadCorrupt {
					t.Errorf("%s: IsPermanent=%v Reason=%q", what, claimcheck.IsPermanent(err), claimcheck.Reason(err))
				}
				if !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("%s: error %q does not say %q", what, err, tc.msg)
				}
				assertRedacted(t, err, tk)
			}
			check("Open", openErr(t, b, tk))

			p, err := b.store.Claim(tk)
			if err != nil {
				t.Fatal(err)
			}
			check("Verify", p.Verify(b.ctx))
			check("Verify again", p.Verify(b.ctx)) // a failed verification is not remembered as a success
			p.Close()
			b.assertSpoolEmpty(t)

			// Streaming: the end of the stream is an error, never io.EOF.
			p, _ = b.store.Claim(tk)
			rs, err := p.OpenStream(b.ctx)
			if err != nil {
				t.Fatalf("OpenStream: %v", err)
			}
			defer rs.Close()
			var readErr error
			total := 0
			buf := make([]byte, 32<<10)
			for readErr == nil {
				var n int
				n, readErr = rs.Read(buf)
				total += n
			}
			if readErr == io.EOF {
				t.Fatalf("OpenStream read %d bytes to io.EOF from a corrupt object", total)
			}
			check("OpenStream read", readErr)
			if total > int(tk.Size) {
				t.Fatalf("OpenStream delivered %d bytes, more than the ticket's %d", total, tk.Size)
			}
			// The error sticks.
			if _, err := rs.Read(buf); !errors.Is(err, claimcheck.ErrPayloadCorrupt) {
				t.Fatalf("second Read after corruption: %v", err)
			}
		})
	}
}

func TestClaimOpenStreamGood(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	data, tk := claimed(t, b, 300_000)
	p, err := b.store.Claim(tk)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := p.OpenStream(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	got, err := io.ReadAll(rs) // ReadAll hides io.EOF
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("OpenStream: %d bytes, %v", len(got), err)
	}
	if n, err := rs.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the end = %d, %v; want 0, io.EOF", n, err)
	}
}

func TestClaimOpenReaders(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	data, tk := claimed(t, b, 150_000)
	p, err := b.store.Claim(tk)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Verify(b.ctx); err != nil {
		t.Fatal(err)
	}

	// Verified bytes are held: the object can go away meanwhile.
	if err := b.store.Bucket().Delete(b.ctx, tk.Key); err != nil {
		t.Fatal(err)
	}
	r1, err := p.Open(b.ctx)
	if err != nil {
		t.Fatalf("Open after Verify: %v", err)
	}
	r2, err := p.Open(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Independent readers.
	head := make([]byte, 1000)
	if _, err := io.ReadFull(r1, head); err != nil || !bytes.Equal(head, data[:1000]) {
		t.Fatalf("r1 head: %v", err)
	}
	all, err := io.ReadAll(r2)
	if err != nil || !bytes.Equal(all, data) {
		t.Fatalf("r2: %d bytes, %v", len(all), err)
	}
	if _, err := r1.Seek(100_000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r1)
	if err != nil || !bytes.Equal(rest, data[100_000:]) {
		t.Fatalf("r1 after Seek: %d bytes, %v", len(rest), err)
	}
	r1.Close()
	r2.Close()

	// Close drops the verified copy: the next Open fetches again, and the
	// object is gone.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = p.Open(b.ctx)
	assertIs(t, err, claimcheck.ErrPayloadMissing)
}

func TestClaimInline(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	payload := []byte("inline " + payloadMarker)
	tk := b.checkIn(t, "acme", payload, nil)
	if !tk.IsInline() {
		t.Fatal("small payload offloaded")
	}
	if got := b.claimBytes(t, tk); !bytes.Equal(got, payload) {
		t.Fatalf("claimed %q", got)
	}
	p, _ := b.store.Claim(tk)
	rs, err := p.OpenStream(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(rs); !bytes.Equal(got, payload) {
		t.Fatalf("OpenStream %q", got)
	}

	// Inline bytes that do not match their digest are corrupt, and the
	// error does not echo them.
	bad := *tk
	bad.Inline = bytes.Clone(tk.Inline)
	bad.Inline[0] ^= 1
	p, err = b.store.Claim(&bad)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	for what, err := range map[string]error{
		"Verify": p.Verify(b.ctx),
		"Open":   func() error { _, err := p.Open(b.ctx); return err }(),
		"Stream": func() error { _, err := p.OpenStream(b.ctx); return err }(),
	} {
		assertIs(t, err, claimcheck.ErrPayloadCorrupt)
		assertNoMarker(t, what+" error", err.Error())
	}

	// A store never sees an inline ticket's store name: Claim accepts it
	// from any store.
	if _, err := setupMem(t, &claimcheck.Options{Name: "other"}).store.Claim(tk); err != nil {
		t.Fatalf("inline ticket on another store: %v", err)
	}
}

func TestClaimInvalidTicket(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, tk := claimed(t, b, 100_000)

	for name, f := range map[string]func(tk *claimcheck.Ticket){
		"OtherStore":       func(tk *claimcheck.Ticket) { tk.Store = "archive" },
		"KeyOfOtherTenant": func(tk *claimcheck.Ticket) { tk.Tenant = "beta" },
		"Traversal":        func(tk *claimcheck.Ticket) { tk.Key = "payloads/acme/../beta/x" },
		"BadDigest":        func(tk *claimcheck.Ticket) { tk.SHA256 = "abc" },
		"FutureVersion":    func(tk *claimcheck.Ticket) { tk.Version = 2 },
	} {
		bad := *tk
		f(&bad)
		p, err := b.store.Claim(&bad)
		if p != nil || !errors.Is(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("%s: Claim = %v, %v; want ErrTicketInvalid", name, p, err)
			continue
		}
		if name == "OtherStore" && !strings.Contains(err.Error(), `ticket is for store "archive", this is "default"`) {
			t.Errorf("OtherStore: error %q", err)
		}
		assertRedacted(t, err, tk)
	}
	if _, err := b.store.Claim(nil); !errors.Is(err, claimcheck.ErrTicketInvalid) {
		t.Errorf("Claim(nil) = %v", err)
	}

	// The same key, named by a store with another name, is refused.
	other := open(t, "file://"+b.root, &claimcheck.Options{Name: "archive"})
	_, err := other.store.Claim(tk)
	assertIs(t, err, claimcheck.ErrTicketInvalid)
}

func TestTicketRedactedKeyAndStat(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	data, tk := claimed(t, b, 100_000)
	if got := tk.RedactedKey(); got != "payloads/acme/…" {
		t.Fatalf("RedactedKey = %q", got)
	}
	if got := inlineTicket([]byte("x")).RedactedKey(); got != "" {
		t.Fatalf("inline RedactedKey = %q", got)
	}
	info, err := b.store.Stat(b.ctx, tk)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Exists || info.Size != int64(len(data)) || !info.MatchesTicket || info.SHA256Prefix != tk.SHA256[:12] || info.ContentType != "application/pdf" {
		t.Fatalf("Stat = %+v", info)
	}
	// Stat reads metadata only: a corrupted body still "matches".
	corruptFile(t, b, tk, func(d []byte) []byte { d[0] ^= 1; return d })
	if info, err := b.store.Stat(b.ctx, tk); err != nil || !info.MatchesTicket {
		t.Fatalf("Stat after corruption = %+v, %v", info, err)
	}
	corruptFile(t, b, tk, func(d []byte) []byte { return d[:10] })
	if info, err := b.store.Stat(b.ctx, tk); err != nil || info.MatchesTicket || info.Size != 10 {
		t.Fatalf("Stat after truncation = %+v, %v", info, err)
	}
}

// TestClaimUpTo1MiBInMemory: Verify keeps a payload of at most 1 MiB in
// memory (no spool file: with the spool directory broken, it is claimed
// and read back, from the mem store plain and encrypted and from an
// encrypted file store); one byte more needs the spool. A reader of Open
// fails once the payload is closed, even after its buffer has gone to
// another claim: it never reads another payload's bytes.
func TestClaimUpTo1MiBInMemory(t *testing.T) {
	t.Parallel()
	for _, tc := range []localStore{storeMem, storeMemEncrypted, storeFileEncrypted} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := tc.bundle(t)
			breakSpool(t, b.spool)
			checkIn := func(data []byte) *claimcheck.Ticket {
				t.Helper()
				// From a regular file: no spool needed whatever the size.
				tk, err := b.store.CheckIn(b.ctx, "acme", payloadFile(t, nil, data), nil)
				if err != nil {
					t.Fatalf("check in %d bytes: %v", len(data), err)
				}
				return tk
			}
			for _, n := range []int{threshold + 1, 200 << 10, 1 << 20} {
				data := randomBytes(n, uint64(n))
				p, err := b.store.Claim(checkIn(data))
				if err != nil {
					t.Fatal(err)
				}
				r, err := p.Open(b.ctx)
				if err != nil {
					t.Fatalf("%d bytes: Open with the spool directory broken: %v", n, err)
				}
				if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%d bytes: read %d bytes (%v), not the payload", n, len(got), err)
				}
				stale, err := p.Open(b.ctx)
				if err != nil {
					t.Fatal(err)
				}
				p.Close()
				// The buffer goes to the next claim, of other bytes.
				other := randomBytes(n, uint64(n)+1)
				p2, err := b.store.Claim(checkIn(other))
				if err != nil {
					t.Fatal(err)
				}
				if err := p2.Verify(b.ctx); err != nil {
					t.Fatal(err)
				}
				if got, err := io.ReadAll(stale); err == nil || bytes.Contains(other, got[:min(len(got), 64)]) && len(got) > 0 {
					t.Fatalf("%d bytes: a reader of a closed payload read %d bytes (%v), want an error and nothing of another payload", n, len(got), err)
				}
				p2.Close()
			}
			p, err := b.store.Claim(checkIn(randomBytes(1<<20+1, 9)))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Verify(b.ctx); err == nil {
				t.Fatal("1 MiB + 1 byte verified with the spool directory broken: kept in memory")
			}
		})
	}
}

// claimVerifyRead is a worker's claim of tk: Claim, Verify (decrypt,
// check size and SHA-256), then Open read to the end, as Store.Run and a
// handler do.
func (s *testBundle) claimVerifyRead(b testing.TB, tk *claimcheck.Ticket) {
	b.Helper()
	p, err := s.store.Claim(tk)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.Verify(s.ctx); err != nil {
		b.Fatal(err)
	}
	r, err := p.Open(s.ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if _, err := io.Copy(io.Discard, r); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimInline is a worker's claim of a sealed inline payload:
// Claim, Verify (decrypt, check size and SHA-256), then Open read to the
// end, as Store.Run and a handler do.
func BenchmarkClaimInline(b *testing.B) {
	for _, size := range []int{4 << 10, 40 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			s := setup(b, &claimcheck.Options{Keeper: newKeeper(b)})
			data := make([]byte, size)
			if _, err := rand.Read(data); err != nil {
				b.Fatal(err)
			}
			tk := s.checkIn(b, "acme", data, nil)
			if !tk.IsInline() {
				b.Fatalf("a %d-byte payload was offloaded; want an inline ticket", size)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				s.claimVerifyRead(b, tk)
			}
		})
	}
}

// BenchmarkSealedObject is a small sealed payload stored as an object:
// its check-in from a regular file (as claimcheck submit FILE does), then
// a worker's claim (Claim, Verify, Open read to the end), as a handler
// does.
func BenchmarkSealedObject(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10, 512 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			s := setup(b, &claimcheck.Options{Keeper: newKeeper(b), AlwaysOffload: true})
			f := payloadFile(b, nil, randomBytes(size, 7))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					b.Fatal(err)
				}
				tk, err := s.store.CheckIn(s.ctx, "acme", f, nil)
				if err != nil {
					b.Fatal(err)
				}
				s.claimVerifyRead(b, tk)
			}
		})
	}
}
