package benchlab

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// TestCompareJobs runs the small-job comparison briefly on SQLite and
// PostgreSQL and checks its shape: every case measured in every round,
// every ratio computed (positive), no job of the bench's queues left
// behind, the profiles written, and the report printed. Figures are not
// judged: this is no timed test.
func TestCompareJobs(t *testing.T) {
	dir := t.TempDir()
	profiles := filepath.Join(dir, "profiles")
	if err := os.Mkdir(profiles, 0o755); err != nil {
		t.Fatal(err)
	}
	pg := dbtest.Postgres(t)
	rep, err := CompareJobs(t.Context(), JobsCompareConfig{Databases: []string{"", pg}, Dir: dir,
		Jobs: 20, LatencyJobs: 3, Rounds: 2, ProfileDir: profiles})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{CaseJobsEnqueue, CaseRiverInsert, CaseJobsWork, CaseRiverWork, CaseJobsLatency, CaseRiverLatency}
	if len(rep.Groups) != 2 {
		t.Fatalf("%d groups, want 2", len(rep.Groups))
	}
	for _, g := range rep.Groups {
		if len(g.Cases) != len(want) || len(g.Load) != 2 {
			t.Fatalf("%s: %d cases, %d loads", g.Name, len(g.Cases), len(g.Load))
		}
		for i, cs := range g.Cases {
			if cs.Name != want[i] || len(cs.Samples) != 2 {
				t.Fatalf("%s: case %d is %q with %d samples, want %q", g.Name, i, cs.Name, len(cs.Samples), want[i])
			}
			for _, s := range cs.Samples {
				if s.Seconds <= 0 || s.Ops <= 0 {
					t.Fatalf("%s: %s: %+v", g.Name, cs.Name, s)
				}
			}
		}
		if len(g.Ratios) != 3 {
			t.Fatalf("%s: %d ratios", g.Name, len(g.Ratios))
		}
		for _, q := range g.Ratios {
			if q.Min <= 0 || len(q.PerRound) != 2 {
				t.Fatalf("%s: %s: %+v", g.Name, q.Name, q)
			}
		}
	}
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
		t.Errorf("jobs left in the PostgreSQL schema: %d (%v), want 0", left, err)
	}
	for _, f := range []string{"sqlite-enqueue", "sqlite-work", "postgres-enqueue", "postgres-work"} {
		if fi, err := os.Stat(filepath.Join(profiles, f+".pprof")); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", f, err)
		}
	}
	var out bytes.Buffer
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"load average", "enqueue / river insert", "CPU per worked job", "p50 enqueue→handler", "min–max"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}
