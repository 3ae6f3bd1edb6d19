package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBenchRefusesSizeAboveFreeSpace: a --size the data directory's disk
// cannot hold (four times over, on the default file store) is refused
// (exit 2) before anything is written, naming the flag.
func TestBenchRefusesSizeAboveFreeSpace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the free-space check is Linux's (statfs)")
	}
	b := setup(t)
	if err := os.MkdirAll(b.data, 0o750); err != nil {
		t.Fatal(err)
	}
	if free, ok := diskFree(b.data); !ok || free >= 4*64<<30 {
		t.Skipf("%d bytes free: 64 GiB four times over fits, and the bench would run", free)
	}
	for _, args := range [][]string{
		{"bench", "--size", "64GiB"},
		{"bench", "--compare", "--rounds", "1", "--size", "4MiB", "--size", "64GiB"},
	} {
		r := b.run("", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--size needs about 256 GiB free under") {
			t.Errorf("%v: exit %d, want 2 and the free space needed\nstderr: %s", args, r.code, r.stderr)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(b.data, "claimcheck-*")); len(left) != 0 {
		t.Errorf("left in the data directory: %v", left)
	}
}

// TestBenchJobsUnreachableDatabase: bench jobs with a --database it cannot
// reach fails at once, before the SQLite half is measured, and says that
// nothing was.
func TestBenchJobsUnreachableDatabase(t *testing.T) {
	b := setup(t)
	r := b.run("", "--database", "postgres://postgres@127.0.0.1:1/claimcheck_none?sslmode=disable&connect_timeout=5",
		"bench", "jobs", "--compare", "--jobs", "1", "--latency-jobs", "1", "--rounds", "1")
	if r.code == 0 || !strings.Contains(r.stderr, "nothing was measured") || !strings.Contains(r.stderr, "connection refused") {
		t.Fatalf("exit %d; want a failure saying nothing was measured and why\nstderr: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "compare: jobs, sqlite") {
		t.Errorf("the SQLite half ran first:\n%s", r.stderr)
	}
	if entries, _ := os.ReadDir(b.data); len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Logf("data directory holds %v", names)
	}
}

// TestBenchProfileDirUsage: a --cpuprofile-dir that cannot be created is a
// usage error naming the flag, before anything is measured.
func TestBenchProfileDirUsage(t *testing.T) {
	b := setup(t)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"bench", "--compare", "--size", "1KiB", "--cpuprofile-dir", filepath.Join(file, "prof")},
		{"bench", "jobs", "--compare", "--jobs", "1", "--cpuprofile-dir", filepath.Join(file, "prof")},
	} {
		r := b.run("", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--cpuprofile-dir "+filepath.Join(file, "prof")+" cannot be created") {
			t.Errorf("%v: exit %d, want 2 naming the flag\nstderr: %s", args, r.code, r.stderr)
		}
	}
}
