package claimcheck_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/claimcheck/claimcheck"
)

// TestWriteFileOnePass: a claim into a file writes no spool and reads
// nothing back: with the store's spool directory broken after check-in
// (breakSpool), WriteFile still writes the verified bytes (file:// plain
// and encrypted, mem://), where Verify, which spools, cannot (encrypted
// and mem://; a plain file:// object is verified where it lies). A
// corrupt object leaves nothing at the destination, not even over a file
// already there, and nothing else in its directory.
func TestWriteFileOnePass(t *testing.T) {
	data := randomBytes(3<<20+4321, 71) // several 1 MiB pieces
	for _, tc := range []struct {
		name      string
		url       func(t *testing.T) string
		encrypted bool
		spools    bool // Verify needs the spool
	}{
		{"file", func(t *testing.T) string { return "file://" + filepath.ToSlash(t.TempDir()) }, false, false},
		{"file encrypted", func(t *testing.T) string { return "file://" + filepath.ToSlash(t.TempDir()) }, true, true},
		{"mem", func(*testing.T) string { return "mem://" }, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spool := filepath.Join(t.TempDir(), "spool")
			opts := &claimcheck.Options{SpoolDir: spool}
			if tc.encrypted {
				opts.Keeper = newKeeper(t)
			}
			s, err := claimcheck.OpenStore(t.Context(), tc.url(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tk, err := s.CheckIn(t.Context(), "acme", bytes.NewReader(data), nil)
			if err != nil {
				t.Fatal(err)
			}
			breakSpool(t, spool)
			p, err := s.Claim(tk)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			dir := t.TempDir()
			dst := filepath.Join(dir, "out.bin")
			if err := p.WriteFile(t.Context(), dst); err != nil {
				t.Fatalf("WriteFile with the spool broken: %v", err)
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
				t.Fatalf("WriteFile wrote %d bytes, not the payload", len(got))
			}
			if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}
			if err := p.Verify(t.Context()); (err != nil) != tc.spools {
				t.Fatalf("Verify with the spool broken: %v; the test does not break what a spooling claim needs", err)
			}

			// A corrupt object: nothing at a new destination, a file
			// already at the destination left as it was.
			if err := os.WriteFile(dst, []byte("before"), 0o600); err != nil {
				t.Fatal(err)
			}
			corrupt := *tk
			corrupt.SHA256 = sha256Hex(append(bytes.Clone(data), 0))
			cp, err := s.Claim(&corrupt)
			if err != nil {
				t.Fatal(err)
			}
			defer cp.Close()
			for _, to := range []string{dst, filepath.Join(dir, "new.bin")} {
				if err := cp.WriteFile(t.Context(), to); !errors.Is(err, claimcheck.ErrPayloadCorrupt) {
					t.Fatalf("WriteFile of a corrupt payload: %v, want ErrPayloadCorrupt", err)
				}
			}
			if got, _ := os.ReadFile(dst); string(got) != "before" {
				t.Fatalf("a failed WriteFile changed the file already there: %d bytes", len(got))
			}
			if left, _ := os.ReadDir(dir); len(left) != 1 {
				t.Fatalf("a failed WriteFile left %d files in the directory, want 1 (the file already there)", len(left))
			}
		})
	}
}
