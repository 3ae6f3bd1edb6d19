package claimcheck_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
)

// testBundle is what most tests need: a store over a real bucket, the
// directory behind it (file:// only) and the spool directory it uses.
type testBundle struct {
	ctx   context.Context
	root  string // bucket directory; "" for mem://
	spool string // Options.SpoolDir
	store *claimcheck.Store
}

// setup opens a file:// store in a fresh temporary directory. opts may be
// nil; its SpoolDir is set to a fresh temporary directory unless given.
func setup(t testing.TB, opts *claimcheck.Options) *testBundle {
	t.Helper()
	root := filepath.Join(t.TempDir(), "bucket")
	b := open(t, "file://"+root, opts)
	b.root = root
	return b
}

// setupMem opens a mem:// store.
func setupMem(t testing.TB, opts *claimcheck.Options) *testBundle {
	t.Helper()
	return open(t, "mem://", opts)
}

func open(t testing.TB, url string, opts *claimcheck.Options) *testBundle {
	t.Helper()
	var o claimcheck.Options
	if opts != nil {
		o = *opts
	}
	if o.SpoolDir == "" {
		o.SpoolDir = filepath.Join(t.TempDir(), "spool")
	}
	ctx := t.Context()
	s, err := claimcheck.OpenStore(ctx, url, &o)
	if err != nil {
		t.Fatalf("OpenStore(%q): %v", url, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &testBundle{ctx: ctx, spool: o.SpoolDir, store: s}
}

// checkIn checks data in and fails the test on error.
func (b *testBundle) checkIn(t testing.TB, tenant string, data []byte, opts *claimcheck.CheckInOptions) *claimcheck.Ticket {
	t.Helper()
	tk, err := b.store.CheckIn(b.ctx, tenant, bytes.NewReader(data), opts)
	if err != nil {
		t.Fatalf("CheckIn(%s, %d bytes): %v", tenant, len(data), err)
	}
	return tk
}

// objects lists every key in the bucket, skipping in-flight temporary files.
func (b *testBundle) objects(t *testing.T) []string {
	t.Helper()
	var keys []string
	it := b.store.Bucket().List(nil)
	for {
		obj, err := it.Next(b.ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if claimcheck.IsTempKey(obj.Key) {
			continue
		}
		keys = append(keys, obj.Key)
	}
	slices.Sort(keys)
	return keys
}

func (b *testBundle) assertObjects(t *testing.T, want ...string) {
	t.Helper()
	got := b.objects(t)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("objects in bucket = %q, want %q", got, want)
	}
}

// files lists every regular file under the bucket directory (file:// only),
// as slash-separated paths relative to it: objects, their .attrs sidecars
// and any temporary file left behind.
func (b *testBundle) files(t *testing.T) []string {
	t.Helper()
	if b.root == "" {
		t.Fatal("files: not a file:// store")
	}
	return filesUnder(t, b.root)
}

func filesUnder(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	slices.Sort(out)
	return out
}

// assertNoTempFiles fails if any *.tmp file is under the bucket directory.
func (b *testBundle) assertNoTempFiles(t *testing.T) {
	t.Helper()
	for _, f := range b.files(t) {
		if strings.HasSuffix(f, ".tmp") {
			t.Errorf("temporary file left in bucket: %s", f)
		}
	}
}

// assertSpoolEmpty fails if the spool directory holds any file.
func (b *testBundle) assertSpoolEmpty(t *testing.T) {
	t.Helper()
	if f := filesUnder(t, b.spool); len(f) != 0 {
		t.Fatalf("spool directory not empty: %q", f)
	}
}

// objectPath is where fileblob keeps key on disk.
func (b *testBundle) objectPath(key string) string {
	return filepath.Join(b.root, filepath.FromSlash(key))
}

// claimBytes claims t and reads its verified bytes.
func (b *testBundle) claimBytes(t *testing.T, tk *claimcheck.Ticket) []byte {
	t.Helper()
	p, err := b.store.Claim(tk)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	defer p.Close()
	r, err := p.Open(b.ctx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read payload: %v", err)
	}
	return data
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	r := rand.NewChaCha8(s)
	out := make([]byte, n)
	_, _ = r.Read(out)
	return out
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// corpus reads every PDF of testdata/pdf into memory (reading each once
// keeps a test consistent even if a file is regenerated meanwhile).
type corpusFile struct {
	name string
	data []byte
}

func corpus(t *testing.T) []corpusFile {
	t.Helper()
	// big.pdf, not in the module, is read when it has been made
	// (go run ./internal/tools/mkbigpdf; .ci/run does).
	entries, err := os.ReadDir("testdata/pdf")
	if err != nil {
		t.Fatalf("read corpus: %v", err)
	}
	var out []corpusFile
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".pdf") {
			continue
		}
		data, err := os.ReadFile(filepath.Join("testdata", "pdf", e.Name()))
		if err != nil {
			t.Fatalf("read %s: %v", e.Name(), err)
		}
		out = append(out, corpusFile{e.Name(), data})
	}
	if len(out) == 0 {
		t.Fatal("no PDFs in testdata/pdf")
	}
	return out
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// assertIs fails unless errors.Is(err, target).
func assertIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want one wrapping %q", err, target)
	}
}

// assertRedacted fails if err's message names the object key or the full
// digest (docs/invariants.md, invariant 9).
func assertRedacted(t *testing.T, err error, tk *claimcheck.Ticket) {
	t.Helper()
	msg := err.Error()
	if tk.Key != "" && strings.Contains(msg, tk.Key) {
		t.Errorf("error string contains the object key %q: %s", tk.Key, msg)
	}
	if strings.Contains(msg, tk.SHA256) {
		t.Errorf("error string contains the full digest: %s", msg)
	}
	// The digest part of a key alone is as revealing as the key.
	if last := tk.Key[strings.LastIndex(tk.Key, "/")+1:]; len(last) == 64 && strings.Contains(msg, last) {
		t.Errorf("error string contains the key's digest: %s", msg)
	}
}

// localStore is a store a test runs in this process: file:// or mem://,
// plain or encrypted under a fresh local keeper.
type localStore struct {
	name string
	open func(t testing.TB, opts *claimcheck.Options) *testBundle
	seal bool
}

var (
	storeFile          = localStore{"File", setup, false}
	storeFileEncrypted = localStore{"FileEncrypted", setup, true}
	storeMem           = localStore{"Mem", setupMem, false}
	storeMemEncrypted  = localStore{"MemEncrypted", setupMem, true}
)

// bundle opens the store.
func (l localStore) bundle(t *testing.T) *testBundle {
	t.Helper()
	opts := &claimcheck.Options{}
	if l.seal {
		opts.Keeper = newKeeper(t)
	}
	return l.open(t, opts)
}
