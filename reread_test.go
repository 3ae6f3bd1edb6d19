package claimcheck_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
)

// breakSpool replaces the store's spool directory with a regular file, so
// that a check-in that spools fails (ENOTDIR): what still checks in never
// touched the spool.
func breakSpool(t *testing.T, spool string) {
	t.Helper()
	if err := os.RemoveAll(spool); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spool, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// payloadFile writes prefix+data to a file of its own and returns it
// open for reading at len(prefix), where the payload starts.
func payloadFile(t testing.TB, prefix, data []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(path, append(append([]byte(nil), prefix...), data...), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Seek(int64(len(prefix)), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkInFileReread checks a payload given as a regular file into s, whose
// spool is broken (breakSpool): it checks in from the file's offset to its
// end without a spool, leaves the file at its end, and claims back the
// same bytes (OpenStream, to its end: verified). Then the same, with the file written to (same size) and
// truncated between the two reads (in BeforeStore, which runs between
// them): ErrPayloadCorrupt saying the file changed, and nothing at the key
// (exists). once: s writes the object as it hashes it (a file:// store,
// plain or encrypted: format v2), so the file is read once and a later change is no change to
// what is stored: those check-ins succeed.
func checkInFileReread(t *testing.T, s *claimcheck.Store, tenant string, once bool, exists func(t *testing.T, key string) bool) {
	t.Helper()
	ctx := t.Context()
	prefix := randomBytes(4321, 61)
	data := randomBytes(6<<20+777, 62) // over a 5 MiB part: S3's multipart upload too

	f := payloadFile(t, prefix, data)
	tk, err := s.CheckIn(ctx, tenant, f, nil)
	if err != nil {
		t.Fatalf("CheckIn of a file without a spool: %v", err)
	}
	if tk.Size != int64(len(data)) || tk.SHA256 != sha256Hex(data) {
		t.Fatalf("ticket size %d sha256 %s, want the payload after the file's offset (%d, %s)", tk.Size, tk.SHA256, len(data), sha256Hex(data))
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != int64(len(prefix)+len(data)) {
		t.Fatalf("the file is left at %d, want its end %d (CheckIn reads r to EOF)", off, len(prefix)+len(data))
	}
	p, err := s.Claim(tk)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.OpenStream(ctx) // verified as it is read to its end; Open would spool

	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	p.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("claimed %d bytes (%v), want the %d checked in", len(got), err, len(data))
	}
	if err := s.Bucket().Delete(ctx, tk.Key); err != nil {
		t.Fatal(err)
	}

	for _, change := range []struct {
		name string
		do   func(path string) error
	}{
		{"Written", func(path string) error {
			w, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer w.Close()
			_, err = w.WriteAt([]byte{data[3<<20] ^ 0xff}, int64(len(prefix))+3<<20) // one byte, same size
			return err
		}},
		{"Truncated", func(path string) error { return os.Truncate(path, int64(len(prefix)+len(data)/2)) }},
	} {
		t.Run(change.name, func(t *testing.T) {
			f := payloadFile(t, prefix, data)
			var key string
			_, err := s.CheckIn(ctx, tenant, f, &claimcheck.CheckInOptions{BeforeStore: func(ctx context.Context, tk *claimcheck.Ticket) error {
				key = tk.Key
				return change.do(f.Name()) // between the read that hashes and the one that stores
			}})
			if once {
				if err != nil || !exists(t, key) {
					t.Fatalf("CheckIn into a store that writes as it hashes, the file changed after: %v", err)
				}
				if err := s.Bucket().Delete(ctx, key); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, claimcheck.ErrPayloadCorrupt) || !strings.Contains(err.Error(), "changed while it was checked in") {
				t.Fatalf("CheckIn of a file changed between its reads: %v, want ErrPayloadCorrupt saying it changed", err)
			}
			if key == "" || exists(t, key) {
				t.Fatalf("an object is at the key of a file that changed while it was checked in (key %q)", key)
			}
		})
	}
}

// TestCheckInFileWithoutSpool: a payload given as a regular file (an
// *os.File, from its offset) is checked in without a spool, into file://
// and mem:// stores, plain and encrypted; a file that changes between the
// read that hashes it and the one that stores it fails with
// ErrPayloadCorrupt and stores nothing (mem://), or does not matter, the
// object written as the file was hashed (file://, which spools no payload,
// plain or encrypted). (TestS3CheckInFileWithoutSpool: S3.)
func TestCheckInFileWithoutSpool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		file bool
		enc  bool
	}{
		{"FilePlain", true, false},
		{"FileEncrypted", true, true},
		{"MemPlain", false, false},
		{"MemEncrypted", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts *claimcheck.Options
			if tc.enc {
				opts = &claimcheck.Options{Keeper: newKeeper(t)}
			}
			var b *testBundle
			if tc.file {
				b = setup(t, opts)
			} else {
				b = setupMem(t, opts)
			}
			breakSpool(t, b.spool)
			// More than a stream's check-in keeps in memory (1 MiB).
			if _, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(randomBytes(1<<20+1, 63)), nil); !tc.file {
				if err == nil {
					t.Fatal("a check-in from a bytes.Reader of 1 MiB + 1 byte did not need the spool: the test proves nothing")
				}
			} else if err != nil {
				t.Fatalf("a check-in from a bytes.Reader into a file:// store spooled: %v", err)
			}
			checkInFileReread(t, b.store, "acme", tc.file, func(t *testing.T, key string) bool {
				ok, err := b.store.Bucket().Exists(b.ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return ok
			})
			if tc.file {
				b.assertNoTempFiles(t)
				if temps := unnamedFilesUnder(t, b.root); len(temps) != 0 {
					t.Fatalf("unnamed files of the store left open: %v", temps)
				}
			}
		})
	}
}

// TestS3CheckInFileWithoutSpool is TestCheckInFileWithoutSpool on S3
// (CLAIMCHECK_TEST_S3_URL): plain (a multipart upload: 6 MiB over 5 MiB
// parts) and encrypted; a file changed between its reads leaves no object
// and no multipart upload open.
func TestS3CheckInFileWithoutSpool(t *testing.T) {
	t.Parallel()
	for _, enc := range []bool{false, true} {
		name := "Plain"
		if enc {
			name = "Encrypted"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupS3(t, nil)
			opts := &claimcheck.Options{}
			if enc {
				opts = &claimcheck.Options{Keeper: newKeeper(t)}
			}
			opts.SpoolDir = filepath.Join(t.TempDir(), "spool")
			s, err := claimcheck.OpenStore(b.ctx, b.url, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			breakSpool(t, opts.SpoolDir)
			checkInFileReread(t, s, b.tenant, false, func(t *testing.T, key string) bool {
				ok, err := s.Bucket().Exists(b.ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return ok
			})
			if u := b.uploads(t, claimcheck.PrefixPayloads+b.tenant+"/"); len(u) != 0 {
				t.Fatalf("%d multipart uploads left open", len(u))
			}
		})
	}
}

// TestCheckInStreamUpTo1MiBInMemory: an offloaded payload from a stream
// of at most 1 MiB is kept in memory between hashing and storing it (no
// spool file: with the spool directory broken, it is checked in, plain or
// encrypted, and its object holds it); one byte more needs the spool.
func TestCheckInStreamUpTo1MiBInMemory(t *testing.T) {
	t.Parallel()
	for _, enc := range []bool{false, true} {
		t.Run(fmt.Sprintf("encrypted=%v", enc), func(t *testing.T) {
			t.Parallel()
			var opts *claimcheck.Options
			if enc {
				opts = &claimcheck.Options{Keeper: newKeeper(t)}
			}
			b := setupMem(t, opts)
			breakSpool(t, b.spool)
			for _, n := range []int{threshold + 1, 200 << 10, 1 << 20} {
				data := randomBytes(n, uint64(n))
				tk, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(data), nil)
				if err != nil {
					t.Fatalf("%d bytes: %v", n, err)
				}
				if tk.IsInline() || tk.Size != int64(n) {
					t.Fatalf("%d bytes: ticket %v, want an object of that size", n, tk)
				}
				p, err := b.store.Claim(tk)
				if err != nil {
					t.Fatal(err)
				}
				r, err := p.OpenStream(b.ctx) // Open would need the spool
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(r)
				r.Close()
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%d bytes: claimed %d bytes (%v), not the payload", n, len(got), err)
				}
			}
			if _, err := b.store.CheckIn(b.ctx, "acme", bytes.NewReader(randomBytes(1<<20+1, 7)), nil); err == nil {
				t.Fatal("1 MiB + 1 byte checked in with the spool directory broken: kept in memory")
			}
		})
	}
}
