package claimcheck_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// TestCheckInFsyncsBeforeTicket shows, on a real file system, that a
// file:// check-in's object is durable before its ticket exists: the file
// that was fsynced is the object (same inode at the object's path), its
// sidecar was fsynced, and the link to its key was followed by an fsync of
// the object's directory and of each parent up to the store's root, all
// before CheckIn returned the ticket; that the payload was written once,
// into a file of the store without a name (no listing shows it; this
// process holds it open), in plaintext for a plain store and as its whole
// ciphertext (format v2, sealed as it was hashed) for an encrypted one; and
// that nothing named a temporary file is ever in the store. Named and content-addressed keys, plain and encrypted.
func TestCheckInFsyncsBeforeTicket(t *testing.T) {
	t.Parallel()
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	keeper := localsecrets.NewKeeper(key)
	t.Cleanup(func() { keeper.Close() })
	for _, tc := range []struct {
		name string
		opts *claimcheck.Options
		in   *claimcheck.CheckInOptions
	}{
		{"Plain", nil, nil},
		{"PlainNamed", nil, &claimcheck.CheckInOptions{Name: "docs/label.pdf", Version: "v2"}},
		{"Encrypted", &claimcheck.Options{Keeper: keeper}, nil},
		{"EncryptedNamed", &claimcheck.Options{Keeper: keeper}, &claimcheck.CheckInOptions{Name: "docs/label.pdf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.opts)
			type event struct {
				op, path string
				info     os.FileInfo // of the file fsynced
			}
			var mu sync.Mutex
			var events []event
			claimcheck.SetSyncHook(b.store, func(op, path string) {
				e := event{op: op, path: path}
				if op == "fsync file" {
					fi, err := os.Stat(path)
					if err != nil {
						t.Errorf("fsynced file %s: %v", path, err)
					}
					e.info = fi
				}
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			})
			data := randomBytes(3<<20+12345, 41) // several 1 MiB pieces and a tail
			// Once the payload is read it is in the store already, in a
			// file without a name: plain, or sealed.
			var temps []int64
			in := &claimcheck.CheckInOptions{}
			if tc.in != nil {
				*in = *tc.in
			}
			var named int
			in.BeforeStore = func(ctx context.Context, tk *claimcheck.Ticket) error {
				temps = unnamedFilesUnder(t, b.root)
				return filepath.WalkDir(b.root, func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() && claimcheck.IsTempKey(p) {
						named++
					}
					return err
				})
			}
			tk := b.checkIn(t, "acme", data, in)
			size := int64(len(data))
			if tc.opts != nil {
				size = int64(sealedSize(len(data)))
			}
			if len(temps) != 1 || temps[0] != size {
				t.Fatalf("unnamed files of the store open once the payload was read: sizes %v, want one of %d bytes (written once, in the store)", temps, size)
			}
			if named != 0 {
				t.Fatalf("%d named temporary files in the store once the payload was read, want none (a sweeper would see them)", named)
			}
			mu.Lock()
			got := append([]event(nil), events...)
			mu.Unlock()
			got = append(got, event{op: "ticket"})

			path := b.objectPath(tk.Key)
			var ops []string
			for _, e := range got {
				ops = append(ops, e.op)
			}
			// fsync file, fsync attrs, link, then fsync dir for the
			// object's directory and each parent up to the root, then the ticket.
			var wantDirs []string
			for d := filepath.Dir(path); ; d = filepath.Dir(d) {
				wantDirs = append(wantDirs, d)
				if d == b.root {
					break
				}
			}
			want := []string{"fsync file", "fsync attrs", "link"}
			for range wantDirs {
				want = append(want, "fsync dir")
			}
			want = append(want, "ticket")
			if strings.Join(ops, ",") != strings.Join(want, ",") {
				t.Fatalf("steps %q, want %q", ops, want)
			}
			obj, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(got[0].info, obj) {
				t.Fatalf("the file fsynced (%s) is not the object", got[0].path)
			}
			if got[1].path != path+".attrs" || got[2].path != path {
				t.Fatalf("attrs fsynced at %s, linked to %s; want %s(.attrs)", got[1].path, got[2].path, path)
			}
			for i, d := range wantDirs {
				if got[3+i].path != d {
					t.Fatalf("directory fsync %d: %s, want %s", i, got[3+i].path, d)
				}
			}
			if got := b.claimBytes(t, tk); !bytes.Equal(got, data) {
				t.Fatal("the object claims other bytes")
			}
			b.assertNoTempFiles(t)
			b.assertSpoolEmpty(t)
		})
	}
}

// unnamedFilesUnder lists the sizes of the files this process holds open
// that have no name and were made in a directory under root (O_TMPFILE:
// /proc/self/fd links to "<dir>/#<inode> (deleted)").
func unnamedFilesUnder(t *testing.T, root string) []int64 {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, e := range ents {
		p := filepath.Join("/proc/self/fd", e.Name())
		target, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(target, root+string(filepath.Separator)) || !strings.HasSuffix(target, " (deleted)") {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			sizes = append(sizes, fi.Size())
		}
	}
	return sizes
}
