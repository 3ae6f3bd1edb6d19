package bench

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// TestWorkloadAfterKilledRun: jobs of the workload's kind left by a
// killed run are deleted before the workload runs (their handlers would
// otherwise count among the measured jobs), and the workload's own jobs
// after it; every figure is measured.
func TestWorkloadAfterKilledRun(t *testing.T) {
	dir := t.TempDir()
	store, err := claimcheck.OpenStore(t.Context(), "file://"+filepath.ToSlash(filepath.Join(dir, "store")), &claimcheck.Options{SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p, err := pipeline.Open(t.Context(), pipeline.Config{Database: filepath.Join(dir, "jobs.db"), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 5 {
		if _, err := p.Enqueue(t.Context(), WorkloadKind, WorkloadTenant, bytes.NewReader([]byte("left by a killed run")), nil); err != nil {
			t.Fatal(err)
		}
	}
	mix, err := ParseMix("90%:1B-1KiB,10%:100KiB-200KiB")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Workload(t.Context(), WorkloadConfig{Pipeline: p, Jobs: 30, Mix: mix, Seed: 5, Producers: 3, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, n := range mix.Sizes(5, 30) {
		want += n
	}
	if rep.Bytes != want || rep.JobsPerSec <= 0 || rep.Latency.P50 <= 0 || rep.TableBytesPerJob <= 0 || rep.TableMethod != TableMethodPages {
		t.Errorf("report: %+v (want %d bytes)", rep, want)
	}
	n := 0
	if err := p.List(t.Context(), pipeline.ListOptions{Kind: WorkloadKind}, func(*pipeline.JobInfo) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("%d jobs of %s left (%v), want 0", n, WorkloadKind, err)
	}
}
