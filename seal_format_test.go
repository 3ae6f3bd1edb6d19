package claimcheck_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// metaSeal is the object metadata entry marking a sealed object's format
// (seal.go): absent for v1, "2" for v2.
const metaSeal = "claimcheck-seal"

// v1Fixture copies testdata/seal/v1-object, a file:// store holding one
// object sealed in format v1 (its ciphertext's associated data the tenant
// and key), as check-ins wrote it before format v2, into a fresh
// directory, and opens it with the fixture's keeper (localsecrets, the key
// below) and key id. It returns the store, the object's ticket and its
// plaintext.
func v1Fixture(t *testing.T) (*testBundle, *claimcheck.Ticket, []byte) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "bucket")
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", "seal", "v1-object"))); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "ticket.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "ticket.json")); err != nil {
		t.Fatal(err)
	}
	tk, err := claimcheck.ParseTicket(raw)
	if err != nil {
		t.Fatal(err)
	}
	var key [32]byte
	copy(key[:], "claimcheck-fixture-seal-v1-key!!")
	keeper := localsecrets.NewKeeper(key)
	t.Cleanup(func() { _ = keeper.Close() })
	b := open(t, "file://"+root, &claimcheck.Options{Keeper: keeper, KeeperID: "local:fixture", AlwaysOffload: true})
	b.root = root
	var plain bytes.Buffer
	for plain.Len() < 3000 {
		plain.WriteString("an object sealed in format v1, its ciphertext bound to its tenant and key. ")
	}
	return b, tk, plain.Bytes()
}

// readMeta returns the metadata of the object at key in b's file:// store.
func readMeta(t *testing.T, b *testBundle, key string) map[string]string {
	t.Helper()
	var meta map[string]string
	editSidecar(t, b, key, func(m map[string]string) { meta = m })
	return meta
}

// TestSealV1ObjectStillOpens: an object sealed in format v1 before v2
// existed (testdata/seal/v1-object) is claimed (Verify, Open, OpenStream)
// with its v1 associated data, its key id checks out (SealedKey), a
// re-check-in of the same bytes reuses it as it is, and a flipped
// ciphertext byte is still corrupt. A new check-in of other bytes into the
// same store is written in format v2, marked so, and claims back too.
func TestSealV1ObjectStillOpens(t *testing.T) {
	t.Parallel()
	b, tk, plain := v1Fixture(t)
	if meta := readMeta(t, b, tk.Key); meta[metaDEK] == "" || meta[metaSeal] != "" {
		t.Fatalf("fixture: metadata %v, want a sealed v1 object (no %s entry)", meta, metaSeal)
	}
	p, err := b.store.Claim(tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(b.ctx); err != nil {
		t.Fatalf("Verify of a v1 object: %v", err)
	}
	p.Close()
	if got, err := readAllOpen(b.ctx, b.store, tk); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open of a v1 object: %d bytes, %v", len(got), err)
	}
	if got, err := readAllStream(b.ctx, b.store, tk); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("OpenStream of a v1 object: %d bytes, %v", len(got), err)
	}
	if sealed, id, err := b.store.SealedKey(b.ctx, tk.Key); !sealed || id != "local:fixture" || err != nil {
		t.Fatalf("SealedKey of a v1 object: %v %q %v", sealed, id, err)
	}

	before, err := os.ReadFile(b.objectPath(tk.Key))
	if err != nil {
		t.Fatal(err)
	}
	again := b.checkIn(t, "acme", plain, nil)
	if again.Key != tk.Key {
		t.Fatalf("re-check-in of the v1 object's bytes went to another key")
	}
	after, err := os.ReadFile(b.objectPath(tk.Key))
	if err != nil || !bytes.Equal(after, before) || readMeta(t, b, tk.Key)[metaSeal] != "" {
		t.Fatalf("re-check-in of the same bytes rewrote the v1 object (%v)", err)
	}
	if got := b.claimBytes(t, again); !bytes.Equal(got, plain) {
		t.Fatal("the reused v1 object claims other bytes")
	}

	other := randomBytes(2<<20+99, 71)
	ntk := b.checkIn(t, "acme", other, nil)
	if got := readMeta(t, b, ntk.Key)[metaSeal]; got != "2" {
		t.Fatalf("a new file:// check-in is marked %s=%q, want format 2", metaSeal, got)
	}
	if got := b.claimBytes(t, ntk); !bytes.Equal(got, other) {
		t.Fatal("a v2 object claims other bytes")
	}

	ct := bytes.Clone(before)
	ct[len(ct)/2] ^= 1
	if err := os.WriteFile(b.objectPath(tk.Key), ct, 0o600); err != nil {
		t.Fatal(err)
	}
	assertRefusedAllWays(t, b.store, tk, plain, claimcheck.ErrPayloadCorrupt)
}

// TestSealFormatMarker changes the format marker of sealed objects: a v1
// object marked v2, or a v2 object with its marker removed, is read with
// the other format's associated data and fails to decrypt (corrupt, never
// delivered); a format this version does not know is ErrConfig, a
// transient mismatch to fix by upgrading, named as such.
func TestSealFormatMarker(t *testing.T) {
	t.Parallel()
	t.Run("V1MarkedV2", func(t *testing.T) {
		t.Parallel()
		b, tk, plain := v1Fixture(t)
		editSidecar(t, b, tk.Key, func(m map[string]string) { m[metaSeal] = "2" })
		assertRefusedAllWays(t, b.store, tk, plain, claimcheck.ErrPayloadCorrupt)
	})
	t.Run("V2Unmarked", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &claimcheck.Options{Keeper: newKeeper(t)})
		data := randomBytes(100_000, 72)
		tk := b.checkIn(t, "acme", data, nil)
		editSidecar(t, b, tk.Key, func(m map[string]string) { delete(m, metaSeal) })
		assertRefusedAllWays(t, b.store, tk, data, claimcheck.ErrPayloadCorrupt)
	})
	for _, v := range []string{"3", "", "v2", "2 ", "1"} {
		t.Run("Unknown"+strings.TrimSpace(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, &claimcheck.Options{Keeper: newKeeper(t)})
			data := randomBytes(100_000, 73)
			tk := b.checkIn(t, "acme", data, nil)
			editSidecar(t, b, tk.Key, func(m map[string]string) { m[metaSeal] = v })
			_, err := readAllStream(b.ctx, b.store, tk)
			if !errors.Is(err, claimcheck.ErrConfig) || claimcheck.IsPermanent(err) || !strings.Contains(err.Error(), "format") {
				t.Fatalf("claim of an object marked %s=%q: %v, want ErrConfig naming the format", metaSeal, v, err)
			}
			assertRedacted(t, err, tk)
		})
	}
}

// TestSealKeeperFailsAfterCiphertext: a file:// check-in writes a v2
// object's ciphertext before its data key is wrapped. A keeper that then
// fails (closed) fails the check-in as keeper-failed and leaves nothing:
// no object, no sidecar, no named temporary file, no unnamed file held
// open, an empty spool; for a payload given as a reader and as a regular
// file.
func TestSealKeeperFailsAfterCiphertext(t *testing.T) {
	t.Parallel()
	data := randomBytes(3<<20+5, 74)
	for _, file := range []bool{false, true} {
		name := "Reader"
		if file {
			name = "File"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			keeper := newKeeper(t)
			b := setup(t, &claimcheck.Options{Keeper: keeper})
			var written []int64
			before := func(context.Context, *claimcheck.Ticket) error {
				written = unnamedFilesUnder(t, b.root) // the ciphertext, before the wrap
				return keeper.Close()
			}
			var r io.Reader = bytes.NewReader(data)
			if file {
				r = payloadFile(t, nil, data)
			}
			tk, err := b.store.CheckIn(b.ctx, "acme", r, &claimcheck.CheckInOptions{BeforeStore: before})
			if len(written) != 1 || written[0] != int64(sealedSize(len(data))) {
				t.Fatalf("unnamed files once the payload was read: sizes %v, want its ciphertext (%d bytes)", written, sealedSize(len(data)))
			}
			assertFailedClosed(t, b, name, tk, err)
			if open := unnamedFilesUnder(t, b.root); len(open) != 0 {
				t.Fatalf("unnamed files of the store left open: %v", open)
			}
		})
	}
}
