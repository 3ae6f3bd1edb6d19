package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBenchRefusesCompareAboveFreeSpace: a --compare --size the data
// directory's disk cannot hold four times over (the default file store)
// is refused (exit 2) before anything is written, naming the flag.
func TestBenchRefusesCompareAboveFreeSpace(t *testing.T) {
	b := setup(t)
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(b.data), &st); err != nil {
		t.Skipf("statfs: %v", err)
	}
	if free := st.Bavail * uint64(st.Bsize); free >= 4*64<<30 {
		t.Skipf("%d bytes free hold it and the bench would run", free)
	}
	r := b.run("", "bench", "--compare", "--rounds", "1", "--size", "4MiB", "--size", "64GiB")
	if r.code != 2 || !strings.Contains(r.stderr, "--size needs about 256 GiB free under") {
		t.Errorf("exit %d, want 2 and the free space needed\nstderr: %s", r.code, r.stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(b.data, "claimcheck-*")); len(left) != 0 {
		t.Errorf("left in the data directory: %v", left)
	}
}
