package cli

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestResultOutputCorrupt: result -o writes an offloaded result verified
// into the file; once the result's object is corrupted it exits 1 naming
// the corruption, leaves nothing at a new file, leaves a file already
// there as it was, and leaves no temporary file in the directory.
func TestResultOutputCorrupt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	payload := make([]byte, 300<<10) // over the inline threshold: the result is an object
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "payload.bin")
	if err := os.WriteFile(src, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	j := b.submit("--kind", "echo", "--tenant", "acme", src)
	b.ok("work", "--kind", "echo", "--until-empty", "--exec", "--", "cat")
	id := strconv.FormatInt(j.ID, 10)

	dir := t.TempDir()
	dst := filepath.Join(dir, "result.bin")
	b.ok("result", id, "-o", dst)
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, payload) {
		t.Fatalf("result -o wrote %d bytes, not the result", len(got))
	}

	var obj string
	for key, path := range b.objects() {
		if strings.HasPrefix(key, "results/") {
			obj = path
		}
	}
	if obj == "" {
		t.Fatalf("no result object among %v", b.objects())
	}
	f, err := os.OpenFile(obj, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{payload[len(payload)/2] ^ 0xff}, int64(len(payload)/2)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, to := range []string{dst, filepath.Join(dir, "new.bin")} {
		r := b.run("", "result", id, "-o", to)
		if r.code != 1 || !strings.Contains(r.stderr, "payload corrupt") {
			t.Fatalf("result -o of a corrupt result: exit %d, stderr %q; want exit 1 naming the corruption", r.code, r.stderr)
		}
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, payload) {
		t.Fatal("a failed result -o changed the file already there")
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Fatalf("a failed result -o left %d files in the directory, want 1 (the file already there)", len(left))
	}
}
