package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/internal/cli"
)

// labBundle is one data directory and a way to run claimcheck-bench
// commands against it.
type labBundle struct {
	t    *testing.T
	data string
}

func setup(t *testing.T) *labBundle {
	t.Helper()
	return &labBundle{t: t, data: filepath.Join(t.TempDir(), "data")}
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs claimcheck-bench in-process with --data set to the bundle's
// directory, interrupted after 8 minutes.
func (b *labBundle) run(stdin string, args ...string) result {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := cli.RunWith(ctx, extend, append([]string{"--data", b.data}, args...), strings.NewReader(stdin), &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

// dropTopology deletes a broker URL's queues or streams after a test.
func dropTopology(t *testing.T, u string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := broker.DeleteTopology(ctx, u); err != nil {
		t.Logf("cleanup: %v", err)
	}
}

// TestBenchCompareUsage: bad --compare flags are usage errors before
// anything runs, and bench without --compare is still claimcheck's.
func TestBenchCompareUsage(t *testing.T) {
	b := setup(t)
	for _, args := range [][]string{
		{"bench", "--compare", "--no-sdk-baseline"},
		{"bench", "--compare", "--rounds", "21"},
		{"bench", "--compare", "--size", "0"},
		{"bench", "--cpuprofile-dir", t.TempDir()},  // without --compare
		{"bench", "--rounds", "21"},                 // claimcheck's own bench
		{"bench", "relay", "measure", "--", "true"}, // no --usage
		{"bench", "jobs", "--compare", "--rounds", "21"},
		{"bench", "jobs", "--no-sqlite"}, // without --compare
		{"bench", "jobs", "--compare", "--size", "65KiB"},
		{"bench", "workload", "--rounds", "3"},                 // without --compare
		{"bench", "workload", "--cpuprofile-dir", t.TempDir()}, // without --compare
		{"bench", "workload", "--compare", "--rounds", "0"},
		{"bench", "workload", "--compare", "--mix", "50%:1KiB"},
		{"bench", "workload", "--compare", "--jobs", "0"},
		{"bench", "workload", "--compare", "--workers", "0"},
	} {
		if r := b.run("", args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2\nstderr: %s", args, r.code, r.stderr)
		}
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
		{"bench", "workload", "--compare", "--jobs", "1", "--cpuprofile-dir", filepath.Join(file, "prof")},
	} {
		r := b.run("", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--cpuprofile-dir "+filepath.Join(file, "prof")+" cannot be created") {
			t.Errorf("%v: exit %d, want 2 naming the flag\nstderr: %s", args, r.code, r.stderr)
		}
	}
}
