package ops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/lifecycle"
	"github.com/claimcheck/claimcheck/pipeline"
)

func rule(id, prefix string, days int) lifecycle.Rule {
	return lifecycle.Rule{ID: id, Prefix: prefix, ExpirationDays: days}
}

func TestEvaluateExpiry(t *testing.T) {
	t.Parallel()
	disabled := rule("off", "", 1)
	disabled.Disabled = true
	tagged := lifecycle.Rule{ID: "tagged", Tagged: true, ExpirationDays: 1}
	glacier := lifecycle.Rule{ID: "archive", Prefix: "payloads/", Transitions: []lifecycle.Transition{{Days: 5, StorageClass: "GLACIER", Archive: true}}}
	readable := lifecycle.Rule{ID: "ia", Prefix: "payloads/", Transitions: []lifecycle.Transition{{Days: 1, StorageClass: "GLACIER_IR"}}}
	dated := lifecycle.Rule{ID: "dated", ExpirationDate: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	short := rule("pay", "pay", 30) // a shorter prefix covering ours
	for _, tc := range []struct {
		name            string
		rules           []lifecycle.Rule
		cover, shortest int
		problems        []string
	}{
		{"none", nil, 0, 0, nil},
		{"ours", []lifecycle.Rule{rule("claimcheck-payloads", "payloads/", 23), rule("claimcheck-results", "results/", 60)}, 23, 23, nil},
		{"ours too short", []lifecycle.Rule{rule("claimcheck-payloads", "payloads/", 1)}, 1, 1, []string{`rule "claimcheck-payloads", on "payloads/", expires objects after 1 day`}},
		{"whole bucket", []lifecycle.Rule{rule("all", "", 90), rule("claimcheck-payloads", "payloads/", 23)}, 23, 23, nil},
		{"narrower and shorter", []lifecycle.Rule{rule("claimcheck-payloads", "payloads/", 23), rule("acme", "payloads/acme/", 2)}, 23, 2,
			[]string{`rule "acme", on "payloads/acme/", expires objects after 2 days`}},
		{"other prefix", []lifecycle.Rule{rule("logs", "logs/", 1)}, 0, 0, nil},
		{"disabled and tagged ignored", []lifecycle.Rule{disabled, tagged}, 0, 0, nil},
		{"archive", []lifecycle.Rule{glacier}, 0, 0, []string{`rule "archive", on "payloads/", moves objects to GLACIER after 5 days, where a claim cannot read them`}},
		{"fixed date", []lifecycle.Rule{dated}, 0, 0, []string{`rule "dated", on the whole bucket, expires objects on a fixed date (2027-01-01)`}},
		{"readable transition", []lifecycle.Rule{readable}, 0, 0, nil},
		{"shorter prefix", []lifecycle.Rule{short}, 30, 30, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := evaluateExpiry(tc.rules, "payloads/", 22)
			if e.cover != tc.cover || e.shortest != tc.shortest || strings.Join(e.problems, "|") != strings.Join(tc.problems, "|") {
				t.Errorf("cover %d shortest %d problems %q; want %d %d %q", e.cover, e.shortest, e.problems, tc.cover, tc.shortest, tc.problems)
			}
			// Only claimcheck's own rules are fixed by lifecycle apply.
			if want := len(tc.problems) > 0 && tc.name != "ours too short"; e.foreign != want {
				t.Errorf("foreign %v, want %v", e.foreign, want)
			}
		})
	}
}

func TestCheckInlineThreshold(t *testing.T) {
	t.Parallel()
	if c := CheckInlineThreshold(claimcheck.DefaultInlineThreshold, 0); c.Status != StatusPass {
		t.Errorf("default threshold: %+v", c)
	}
	if c := CheckInlineThreshold(-1, 0); c.Status != StatusPass {
		t.Errorf("nothing inline: %+v", c)
	}
	c := CheckInlineThreshold(1<<20, 0)
	if c.Status != StatusFail || !strings.Contains(c.Detail, "above the transport's maximum message size of 256 KiB") {
		t.Errorf("1 MiB threshold: %+v", c)
	}
	m := MaxInlineThresholdFor(pipeline.DefaultMaxMessageSize)
	if CheckInlineThreshold(m, 0).Status != StatusPass || CheckInlineThreshold(m+1, 0).Status != StatusFail {
		t.Errorf("MaxInlineThresholdFor = %d is not the boundary", m)
	}
	// The pipeline agrees: it opens with m and refuses m+1.
	for _, th := range []int64{m, m + 1} {
		st, err := claimcheck.OpenStore(context.Background(), "file://"+filepath.ToSlash(t.TempDir()), &claimcheck.Options{InlineThreshold: th})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.Open(context.Background(), pipeline.Config{Database: dbtest.SQLite(t), Store: st})
		if (err == nil) != (th == m) {
			t.Errorf("pipeline.Open with threshold %d: %v", th, err)
		}
		if p != nil {
			p.Close()
		}
		st.Close()
	}
}

type bundle struct {
	st   *claimcheck.Store
	p    *pipeline.Pipeline
	root string
}

// setup opens a keeper-encrypted file store in a temporary directory and a
// pipeline on database.
func setup(t *testing.T, database string, opts *claimcheck.Options) *bundle {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &claimcheck.Options{}
	}
	opts.Keeper = localsecrets.NewKeeper(key)
	opts.SpoolDir = t.TempDir()
	st, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(root), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := pipeline.Open(ctx, pipeline.Config{Database: database, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &bundle{st: st, p: p, root: root}
}

// files lists the object files under root/dir (no sidecars, no namespace
// marker).
func (b *bundle) files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(filepath.Join(b.root, dir), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, ".attrs") && d.Name() != claimcheck.NamespaceMarkerKey {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func logReport(t *testing.T, rep *Report) {
	t.Helper()
	var b strings.Builder
	for _, c := range rep.Checks {
		b.WriteString("  " + c.Name + " " + strings.ToUpper(string(c.Status)) + ": " + c.Detail + "\n")
	}
	t.Logf("ok=%v\n%s", rep.OK, b.String())
}

func TestDoctorFileStore(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.SQLite(t), nil)
	r, err := claimcheck.ComputeRetention(claimcheck.RetentionInputs{Backlog: 4 * time.Hour, RetryWindow: time.Hour, DeadLetter: pipeline.DefaultDeadLetterRetention, ReplayMargin: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Doctor(context.Background(), DoctorOptions{Pipeline: b.p, Retention: r})
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, rep)
	if !rep.OK {
		t.Fatalf("doctor failed on a file store: %+v", rep.Failed())
	}
	for _, name := range []string{CheckStore, CheckCredentials, CheckKeeper, CheckRetention, CheckExpiry + "payloads/", CheckExpiry + "results/", CheckDeadLetter, CheckInline} {
		if c := rep.Check(name); c == nil || c.Status != StatusPass {
			t.Errorf("check %q: %+v", name, c)
		}
	}
	if c := rep.Check(CheckRetention); !strings.Contains(c.Detail, "payloads/ need 22 days") {
		t.Errorf("retention row: %s", c.Detail)
	}
	if left := b.files(t, ""); len(left) > 0 {
		t.Errorf("doctor left files behind: %v", left)
	}

	// NoProbes: the probing checks are skipped, the reading ones run.
	rep, err = Doctor(context.Background(), DoctorOptions{Pipeline: b.p, Retention: r, NoProbes: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CheckStore, CheckCredentials, CheckKeeper} {
		if c := rep.Check(name); c == nil || c.Status != StatusSkip {
			t.Errorf("NoProbes: check %q: %+v, want skipped", name, c)
		}
	}
	for _, name := range []string{CheckDeploymentKey, CheckRetention, CheckExpiry + "payloads/", CheckDeadLetter, CheckInline} {
		if c := rep.Check(name); c == nil || c.Status != StatusPass {
			t.Errorf("NoProbes: check %q: %+v, want passed", name, c)
		}
	}

	// The retention sum counting 7 days of dead letters while the pipeline
	// keeps 14: a failure.
	r7, _ := claimcheck.ComputeRetention(claimcheck.RetentionInputs{DeadLetter: 7 * 24 * time.Hour})
	rep, err = Doctor(context.Background(), DoctorOptions{Pipeline: b.p, Retention: r7})
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Check(CheckDeadLetter); rep.OK || c.Status != StatusFail || !strings.Contains(c.Detail, "keeps dead letters 14d, but the retention sum counts only 7d") {
		t.Errorf("dead letters kept longer than counted: ok=%v %+v", rep.OK, c)
	}
}

func TestDoctorNoKeeperWarns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(t.TempDir()), &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := pipeline.Open(ctx, pipeline.Config{Database: dbtest.SQLite(t), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r, _ := claimcheck.ComputeRetention(claimcheck.RetentionInputs{DeadLetter: pipeline.DefaultDeadLetterRetention})
	rep, err := Doctor(ctx, DoctorOptions{Pipeline: p, Retention: r})
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Check(CheckKeeper); !rep.OK || c.Status != StatusWarn || !strings.Contains(c.Detail, "unencrypted") {
		t.Errorf("no keeper: ok=%v %+v", rep.OK, c)
	}
}

// Verify passes on the embedded default (and PostgreSQL when configured),
// and fails its orphan check when the sweeper's grace keeps the orphan.
func TestVerify(t *testing.T) {
	t.Parallel()
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"SQLite", dbtest.SQLite}, {"Postgres", dbtest.Postgres}} {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, db.url(t), nil)
			ctx := context.Background()
			rep, err := Verify(ctx, VerifyOptions{Pipeline: b.p, ProbeSizes: []int64{70 << 10, 1 << 20, 16 << 20}})
			if err != nil {
				t.Fatal(err)
			}
			logReport(t, rep)
			if !rep.OK {
				t.Fatalf("verify failed: %+v", rep.Failed())
			}
			for _, name := range []string{CheckUniform, CheckMissingDead, CheckOldestDead, CheckOrphan, CheckCleanup} {
				if c := rep.Check(name); c == nil || c.Status != StatusPass {
					t.Errorf("check %q: %+v", name, c)
				}
			}
			if left := b.files(t, ""); len(left) > 0 {
				t.Errorf("verify left objects behind: %v", left)
			}
			n := 0
			if err := b.p.List(ctx, pipeline.ListOptions{}, func(*pipeline.JobInfo) error { n++; return nil }); err != nil || n != 0 {
				t.Errorf("verify left %d jobs behind (%v)", n, err)
			}
			var claims int
			if err := b.p.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM claimcheck_claim`).Scan(&claims); err != nil || claims != 0 {
				t.Errorf("verify left %d registry rows behind (%v)", claims, err)
			}

			// Broken on purpose: the sweeper's grace outlasts the orphan's age.
			rep, err = Verify(ctx, VerifyOptions{Pipeline: b.p, ProbeSizes: []int64{70 << 10}, SweepGrace: 48 * time.Hour, OrphanAge: 24 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			logReport(t, rep)
			if c := rep.Check(CheckOrphan); rep.OK || c.Status != StatusFail || !strings.Contains(c.Detail, "kept as too-young") {
				t.Errorf("orphan younger than the grace: ok=%v %+v", rep.OK, c)
			}
			if c := rep.Check(CheckCleanup); c.Status != StatusPass {
				t.Errorf("cleanup after a failed verify: %+v", c)
			}
			if left := b.files(t, ""); len(left) > 0 {
				t.Errorf("a failed verify left objects behind: %v", left)
			}
		})
	}
}
