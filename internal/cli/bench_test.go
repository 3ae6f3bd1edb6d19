package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBenchRefusesSizeAboveFreeSpace: a --size the data directory's disk
// cannot hold (once; with --compare four times over, on the default file
// store) is refused (exit 2) before anything is written, naming the flag.
func TestBenchRefusesSizeAboveFreeSpace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the free-space check is Linux's (statfs)")
	}
	b := setup(t)
	if err := os.MkdirAll(b.data, 0o750); err != nil {
		t.Fatal(err)
	}
	free, ok := diskFree(b.data)
	if !ok {
		t.Skip("statfs cannot tell the free space here")
	}
	for _, c := range []struct {
		args []string
		need uint64
		want string
	}{
		{[]string{"bench", "--size", "64GiB"}, 64 << 30, "--size needs about 64 GiB free under"},
		{[]string{"bench", "--compare", "--rounds", "1", "--size", "4MiB", "--size", "64GiB"}, 4 * 64 << 30, "--size needs about 256 GiB free under"},
	} {
		if free >= c.need {
			t.Logf("%v: skipped, %d bytes free hold it and the bench would run", c.args, free)
			continue
		}
		r := b.run("", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, want 2 and %q\nstderr: %s", c.args, r.code, c.want, r.stderr)
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
	if left, _ := filepath.Glob(filepath.Join(b.data, "claimcheck-compare-jobs-*")); len(left) != 0 {
		t.Errorf("scratch directories left: %v", left)
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
