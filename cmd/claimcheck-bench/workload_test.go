package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/benchlab"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// TestBenchWorkloadCompare runs bench workload --compare briefly on the
// scratch SQLite file and file store, and on PostgreSQL and S3 when they
// are there, and checks the report's shape: every case measured in every
// round, every ratio computed. Figures are not judged (exit 0 or 1).
func TestBenchWorkloadCompare(t *testing.T) {
	t.Run("sqlite+file", func(t *testing.T) { checkWorkloadCompare(t) })
	t.Run("postgres+s3", func(t *testing.T) {
		pg := dbtest.Postgres(t)
		s3 := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", "scripts/seaweedfs.sh env prints it")
		u := s3 + "&prefix=wlcompare-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"
		checkWorkloadCompare(t, "--database", pg, "--store", u)
	})
}

func checkWorkloadCompare(t *testing.T, globals ...string) {
	b := setup(t)
	r := b.run("", append(globals, "--json", "bench", "workload", "--compare", "--rounds", "2", "--jobs", "12",
		"--mix", "75%:1B-4KiB,25%:100KiB-300KiB", "--workers", "2", "--producers", "2")...)
	if r.code != 0 && r.code != 1 {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	var rep benchlab.CompareReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s\nstderr: %s", err, r.stdout, r.stderr)
	}
	if len(rep.Groups) != 1 || len(rep.Groups[0].Cases) != 3 || len(rep.Groups[0].Ratios) != 7 {
		t.Fatalf("report: %+v", rep)
	}
	for _, cs := range rep.Groups[0].Cases {
		if len(cs.Samples) != 2 {
			t.Fatalf("%s: %d samples", cs.Name, len(cs.Samples))
		}
		for _, s := range cs.Samples {
			if s.Seconds <= 0 || s.Ops != 12 || s.Bytes <= 0 || s.Values["p50 ms"] <= 0 {
				t.Errorf("%s: %+v", cs.Name, s)
			}
			if cs.Name != benchlab.CaseWorkloadSDK && s.Values["table B/job"] <= 0 {
				t.Errorf("%s: table bytes %+v", cs.Name, s.Values)
			}
		}
	}
	for _, q := range rep.Groups[0].Ratios {
		if q.Min <= 0 || len(q.PerRound) != 2 {
			t.Errorf("%s: %+v", q.Name, q)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(b.data, "bench-*")); len(left) != 0 {
		t.Errorf("scratch directories left: %v", left)
	}
}
