package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefuseEmpty: a regular file is handed to the check-in as the
// *os.File itself (which then reads it twice instead of spooling it), an
// empty one is refused before anything is read, and any other reader is
// wrapped so that an empty stream fails at its end.
func TestRefuseEmpty(t *testing.T) {
	dir := t.TempDir()
	full, empty := filepath.Join(dir, "full.pdf"), filepath.Join(dir, "empty.pdf")
	if err := os.WriteFile(full, []byte("%PDF-1.7"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(full)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if r, err := refuseEmpty(f, full); err != nil || r != io.Reader(f) {
		t.Errorf("regular file: got %T, %v; want the *os.File itself", r, err)
	}
	e, err := os.Open(empty)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := refuseEmpty(e, empty); !errors.Is(err, errEmptyPayload) {
		t.Errorf("empty file: %v, want errEmptyPayload", err)
	}
	r, err := refuseEmpty(strings.NewReader(""), "-")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, errEmptyPayload) {
		t.Errorf("empty stream: %v, want errEmptyPayload at its end", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pw.Close()
	if r, err := refuseEmpty(pr, "-"); err != nil || r == io.Reader(pr) {
		t.Errorf("pipe: got %T, %v; want it wrapped", r, err)
	}
}
