package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck/pipeline"
)

// TestRefuseEmpty: a regular file, opened by openInput, is handed to the
// check-in as the *os.File itself (which then reads it twice instead of
// spooling it), an empty one is refused before anything is read, and
// standard input is wrapped so that an empty stream fails at its end.
func TestRefuseEmpty(t *testing.T) {
	dir := t.TempDir()
	full, empty := filepath.Join(dir, "full.pdf"), filepath.Join(dir, "empty.pdf")
	if err := os.WriteFile(full, []byte("%PDF-1.7"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, _, size, closeF, err := openInput(nil, full)
	if err != nil {
		t.Fatal(err)
	}
	defer closeF()
	if _, ok := f.(*os.File); !ok {
		t.Fatalf("openInput of a regular file: %T, want an *os.File", f)
	}
	if r, err := refuseEmpty(f, full, size); err != nil || r != f {
		t.Errorf("regular file: got %T, %v; want the *os.File itself", r, err)
	}
	e, _, size, closeE, err := openInput(nil, empty)
	if err != nil {
		t.Fatal(err)
	}
	defer closeE()
	if _, err := refuseEmpty(e, empty, size); !errors.Is(err, errEmptyPayload) {
		t.Errorf("empty file: %v, want errEmptyPayload", err)
	}
	stdin, _, size, _, err := openInput(strings.NewReader(""), "-")
	if err != nil {
		t.Fatal(err)
	}
	r, err := refuseEmpty(stdin, "-", size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, pipeline.ErrEmptyPayload) {
		t.Errorf("empty stream: %v, want pipeline.ErrEmptyPayload at its end", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pw.Close()
	piped, _, size, _, err := openInput(pr, "-")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := refuseEmpty(piped, "-", size); err != nil || r == io.Reader(pr) {
		t.Errorf("pipe: got %T, %v; want it wrapped", r, err)
	}
}
