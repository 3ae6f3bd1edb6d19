package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// TestBenchJobsWorkloadUsage: each bad option of bench jobs and bench
// workload is a usage error (exit 2) and nothing is created, not even the
// data directory.
func TestBenchJobsWorkloadUsage(t *testing.T) {
	b := setup(t)
	for _, args := range [][]string{
		{"bench", "jobs", "--jobs", "0"},
		{"bench", "jobs", "--latency-jobs", "0"},
		{"bench", "jobs", "--workers", "0"},
		{"bench", "jobs", "--size", "65KiB"},
		{"bench", "jobs", "--size", "0"},
		{"bench", "jobs", "extra"},
		{"bench", "workload", "--jobs", "0"},
		{"bench", "workload", "--jobs", "1000001"},
		{"bench", "workload", "--mix", ""},
		{"bench", "workload", "--mix", "90%:1B-64KiB"},
		{"bench", "workload", "--mix", "100%:2MiB-1MiB"},
		{"bench", "workload", "--mix", "100%:0"},
		{"bench", "workload", "--producers", "0"},
		{"bench", "workload", "--workers", "257"},
		{"bench", "workload", "--seed", "-1"},
		{"bench", "workload", "--rate", "-1"},
		{"bench", "workload", "--rate", "NaN"},
	} {
		if r := b.run("", args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2\nstderr: %s", args, r.code, r.stderr)
		}
		if _, err := os.Stat(b.data); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%v: the data directory was created (%v)", args, err)
		}
	}
}

// TestBenchJobsWorkloadSQLite runs bench jobs and bench workload briefly
// on the default scratch SQLite file and file store and checks the
// reports' shape (every figure measured, every job worked, every byte
// read) and that the scratch directory is gone. Figures are not judged.
func TestBenchJobsWorkloadSQLite(t *testing.T) {
	b := setup(t)
	checkBenchJobsWorkload(t, b)
	if left, _ := filepath.Glob(filepath.Join(b.data, "bench-*")); len(left) != 0 {
		t.Errorf("left in the data directory: %v", left)
	}
}

// TestBenchJobsWorkloadPostgresS3 is TestBenchJobsWorkloadSQLite on
// PostgreSQL and S3 (SeaweedFS): it also checks that the bench's jobs are
// gone from the job database and its objects from the store.
func TestBenchJobsWorkloadPostgresS3(t *testing.T) {
	pg := dbtest.Postgres(t)
	s3 := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", "scripts/seaweedfs.sh env prints it")
	ns := "benchtest-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	b := setup(t)
	store := ownNamespace(t, s3, ns)
	checkBenchJobsWorkload(t, b, "--database", pg, "--store", store)

	target, err := dbopen.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	db, err := dbopen.Open(t.Context(), target, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM river_job`).Scan(&left); err != nil || left != 0 {
		t.Errorf("jobs left in the job database: %d (%v), want 0", left, err)
	}
	bucket, err := blob.OpenBucket(t.Context(), s3)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	it := bucket.List(&blob.ListOptions{Prefix: ns + "/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("left in the store: %s", obj.Key)
	}
}

// checkBenchJobsWorkload runs bench jobs and bench workload with --json
// and the global flags globals, and checks their reports.
func checkBenchJobsWorkload(t *testing.T, b *cliBundle, globals ...string) {
	t.Helper()
	r := b.run("", append(globals, "--json", "bench", "jobs", "--jobs", "20", "--latency-jobs", "3", "--workers", "2")...)
	if r.code != 0 {
		t.Fatalf("bench jobs: exit %d\nstderr: %s", r.code, r.stderr)
	}
	var jobs bench.JobsReport
	if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil {
		t.Fatalf("bench jobs --json: %v\n%s", err, r.stdout)
	}
	if len(jobs.Phases) != 3 || !jobs.Sealed || !jobs.Inline || jobs.Workers != 2 {
		t.Fatalf("bench jobs: %+v", jobs)
	}
	for _, p := range jobs.Phases {
		if p.Seconds <= 0 || p.Jobs <= 0 || p.CPUSeconds <= 0 {
			t.Errorf("bench jobs: phase %+v", p)
		}
	}
	if jobs.EnqueueToHandler.P50 <= 0 || jobs.EnqueueToHandler.P99 < jobs.EnqueueToHandler.P50 || jobs.HandlerToDone.Max <= 0 {
		t.Errorf("bench jobs: latencies %+v, %+v", jobs.EnqueueToHandler, jobs.HandlerToDone)
	}

	const mix = "80%:1B-8KiB,15%:64KiB-256KiB,5%:1MiB-2MiB"
	r = b.run("", append(globals, "--json", "bench", "workload", "--jobs", "40", "--mix", mix, "--seed", "3", "--producers", "2", "--workers", "2", "--rate", "400")...)
	if r.code != 0 {
		t.Fatalf("bench workload: exit %d\nstderr: %s", r.code, r.stderr)
	}
	var w bench.WorkloadReport
	if err := json.Unmarshal([]byte(r.stdout), &w); err != nil {
		t.Fatalf("bench workload --json: %v\n%s", err, r.stdout)
	}
	m, err := bench.ParseMix(mix)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	offload := int64(0)
	for _, n := range m.Sizes(3, 40) {
		want += n
		if n > w.InlineThreshold {
			offload++
		}
	}
	if w.Jobs != 40 || w.Rate != 400 || w.Seconds < 39.0/400 || w.Bytes != want || w.Offloaded != offload || w.Mix != mix {
		t.Errorf("bench workload: %d jobs, %d bytes, %d offloaded, mix %q; want 40, %d, %d, %q", w.Jobs, w.Bytes, w.Offloaded, w.Mix, want, offload, mix)
	}
	if w.Seconds <= 0 || w.JobsPerSec <= 0 || w.MiBPerSec <= 0 || w.Latency.P50 <= 0 || w.Latency.P99 < w.Latency.P95 ||
		w.TableBytesPerJob <= 0 || w.TableMethod == "" || w.CPUSeconds <= 0 {
		t.Errorf("bench workload: %+v", w)
	}
	if w.RSSMethod != bench.RSSMethodNone && (w.PeakRSS == 0 || w.PeakAnon == 0) {
		t.Errorf("bench workload: peak RSS %d, RssAnon %d", w.PeakRSS, w.PeakAnon)
	}
}
