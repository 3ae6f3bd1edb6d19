package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/sweep"
)

// TestNamespacesShareOneBucket: two job databases on one file bucket, each
// with its own prefix=: every object is aged past the grace period, both
// sweep, and no live payload is lost: every job completes. A third job
// database pointed at one of the namespaces is refused by sweep, submit and
// work with exit 2, naming both databases, before anything is read or
// deleted.
func TestNamespacesShareOneBucket(t *testing.T) {
	t.Parallel()
	bucket := filepath.Join(t.TempDir(), "bucket")
	const n = 5
	in := t.TempDir()
	type deployment struct {
		b     *cliBundle
		store string
	}
	deps := map[string]*deployment{}
	for _, ns := range []string{"staging", "prod"} {
		d := &deployment{b: setup(t), store: "file://" + filepath.ToSlash(bucket) + "?prefix=" + ns + "/"}
		deps[ns] = d
		for i := range n {
			f := filepath.Join(in, fmt.Sprintf("%s-%d.txt", ns, i))
			if err := os.WriteFile(f, []byte(fmt.Sprintf("payload %d of %s", i, ns)), 0o600); err != nil {
				t.Fatal(err)
			}
			d.b.submit("--store", d.store, "--always-offload", "--kind", "count", "--tenant", "acme", f)
		}
	}
	// Both namespaces' objects, and their markers, are in the one bucket.
	for ns := range deps {
		if _, err := os.Stat(filepath.Join(bucket, ns, claimcheck.NamespaceMarkerKey)); err != nil {
			t.Errorf("namespace %s has no ownership marker: %v", ns, err)
		}
	}
	old := time.Now().Add(-72 * time.Hour)
	objects := 0
	_ = filepath.WalkDir(bucket, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			objects++
			_ = os.Chtimes(p, old, old)
		}
		return nil
	})
	for ns, d := range deps {
		var rep struct{ Summary sweepSummary }
		out := d.b.ok("--store", d.store, "--json", "sweep")
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if rep.Summary.Removed != 0 || rep.Summary.Listed != n {
			t.Errorf("sweep of %s: %+v, want %d listed and 0 removed", ns, rep.Summary, n)
		}
		t.Logf("sweep of namespace %s after aging %d files 72h: listed %d, removed %d", ns, objects, rep.Summary.Listed, rep.Summary.Removed)
	}
	for ns, d := range deps {
		d.b.ok("--store", d.store, "work", "--kind", "count", "--until-empty", "--exec", "--", "sh", "-c", "wc -c")
		done := 0
		for _, j := range d.b.jobs("--store", d.store) {
			if j.State == "completed" {
				done++
			}
		}
		if done != n {
			t.Errorf("namespace %s: %d of %d jobs completed", ns, done, n)
		}
	}

	// A third job database on staging's namespace.
	intruder := setup(t)
	f := filepath.Join(in, "staging-0.txt")
	intruder.ok("--store", "file://"+filepath.ToSlash(bucket)+"?prefix=other/", "submit", "--kind", "count", "--tenant", "acme", f) // makes its database
	for _, args := range [][]string{
		{"sweep"},
		{"submit", "--kind", "count", "--tenant", "acme", f},
		{"work", "--kind", "count", "--until-empty", "--exec", "--", "cat"},
	} {
		r := intruder.run("", append([]string{"--store", deps["staging"].store}, args...)...)
		owner := filepath.Join(deps["staging"].b.data, "claimcheck.db")
		mine := filepath.Join(intruder.data, "claimcheck.db")
		if r.code != 2 || !strings.Contains(r.stderr, owner) || !strings.Contains(r.stderr, mine) || !strings.Contains(r.stderr, "prefix=") {
			t.Errorf("%s on another database's namespace: exit %d, want 2 naming %s and %s\n%s", args[0], r.code, owner, mine, r.stderr)
		}
		if args[0] == "sweep" {
			t.Logf("claimcheck --store …?prefix=staging/ sweep (third database): exit %d\n%s", r.code, r.stderr)
		}
	}
}

// TestStorePrefixValidated: a prefix= that would nest in a payload or
// result area, or escape its bucket, is refused at open.
func TestStorePrefixValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"payloads/", "a/results/", "../x/", "a//b/", ""} {
		r := b.run("payload", "--store", "file://"+filepath.ToSlash(t.TempDir())+"?prefix="+p, "submit", "--kind", "count", "--tenant", "acme", "-")
		if r.code != 2 || !strings.Contains(r.stderr, "prefix") {
			t.Errorf("prefix=%q: exit %d, want 2 naming the prefix\n%s", p, r.code, r.stderr)
		}
	}
}

// TestNamespacesShareOneS3Bucket is TestNamespacesShareOneBucket on a real
// S3 server (SeaweedFS): two job databases in two namespaces of one bucket
// submit, sweep as if three days had passed (every object past the grace
// period), and work: no live payload is lost. A third database on one of
// the namespaces is refused by sweep, submit and work with exit 2.
func TestNamespacesShareOneS3Bucket(t *testing.T) {
	s3URL := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", "scripts/seaweedfs.sh env prints it")
	ctx := t.Context()
	const n = 5
	in := t.TempDir()
	run := "ns" + strconv.FormatInt(time.Now().UnixNano(), 36)
	stores := map[string]string{}
	bundles := map[string]*cliBundle{}
	for _, ns := range []string{"staging", "prod"} {
		stores[ns] = s3URL + "&prefix=" + run + "/" + ns + "/"
		bundles[ns] = setup(t)
		for i := range n {
			f := filepath.Join(in, fmt.Sprintf("%s-%d.txt", ns, i))
			if err := os.WriteFile(f, []byte(fmt.Sprintf("payload %d of %s", i, ns)), 0o600); err != nil {
				t.Fatal(err)
			}
			bundles[ns].submit("--store", stores[ns], "--always-offload", "--kind", "count", "--tenant", "acme", f)
		}
	}
	for ns, b := range bundles {
		store, err := claimcheck.OpenStore(ctx, stores[ns], &claimcheck.Options{SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.Open(ctx, pipeline.Config{Database: filepath.Join(b.data, "claimcheck.db"), Store: store})
		if err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(72 * time.Hour)
		rep, err := sweep.Sweep(ctx, sweep.Options{Store: store, DB: p.DB(), Now: func() time.Time { return later }})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Removed != 0 || rep.Listed != n {
			t.Errorf("sweep of %s 72h later: listed %d, removed %d; want %d and 0", ns, rep.Listed, rep.Removed, n)
		}
		t.Logf("S3 namespace %s swept as if 72h later: listed %d, removed %d", ns, rep.Listed, rep.Removed)
		p.Close()
		store.Close()
	}
	for ns, b := range bundles {
		b.ok("--store", stores[ns], "work", "--kind", "count", "--until-empty", "--exec", "--", "sh", "-c", "wc -c")
		done := 0
		for _, j := range b.jobs("--store", stores[ns]) {
			if j.State == "completed" {
				done++
			}
		}
		if done != n {
			t.Errorf("S3 namespace %s: %d of %d jobs completed", ns, done, n)
		}
	}
	intruder := setup(t)
	f := filepath.Join(in, "staging-0.txt")
	intruder.ok("--store", s3URL+"&prefix="+run+"/other/", "submit", "--kind", "count", "--tenant", "acme", f)
	for _, args := range [][]string{
		{"sweep"},
		{"submit", "--kind", "count", "--tenant", "acme", f},
		{"work", "--kind", "count", "--until-empty", "--exec", "--", "cat"},
	} {
		r := intruder.run("", append([]string{"--store", stores["staging"]}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, filepath.Join(bundles["staging"].data, "claimcheck.db")) || !strings.Contains(r.stderr, filepath.Join(intruder.data, "claimcheck.db")) {
			t.Errorf("%s on another database's S3 namespace: exit %d, want 2 naming both databases\n%s", args[0], r.code, r.stderr)
		}
	}
}
