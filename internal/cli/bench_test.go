package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBenchRefusesSizeAboveFreeSpace: a --size the data directory's disk
// cannot hold is refused (exit 2) before anything is written, naming the flag.
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

// TestBenchIsTheProducts: the shipped bench has no comparison: no
// --compare, --cpuprofile-dir or --no-sdk-baseline flag, on bench, bench
// jobs or bench workload, and no relay subcommand (claimcheck-bench's).
func TestBenchIsTheProducts(t *testing.T) {
	b := setup(t)
	for _, args := range [][]string{
		{"bench", "--compare"},
		{"bench", "--cpuprofile-dir", t.TempDir()},
		{"bench", "jobs", "--compare"},
		{"bench", "jobs", "--rounds", "2"},
		{"bench", "workload", "--compare"},
		{"bench", "relay"},
		{"bench", "--no-sdk-baseline"},
	} {
		if r := b.run("", args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (no such flag or command)\nstderr: %s", args, r.code, r.stderr)
		}
	}
}
