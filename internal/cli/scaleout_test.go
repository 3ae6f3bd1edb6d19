package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/bigpdf"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// TestScaleOutEndToEnd runs the command against a real S3 server (SeaweedFS,
// started by .ci/run) and, when configured, PostgreSQL: the main job gives
// the same results as on the embedded default; a deleted object
// dead-letters on attempt 1; wrong credentials are retried and reported as
// access denied, never dead-lettered as missing, and the job completes once
// the credentials are right. Not parallel: it changes the AWS environment.
func TestScaleOutEndToEnd(t *testing.T) {
	s3URL := os.Getenv("CLAIMCHECK_TEST_S3_URL")
	if s3URL == "" {
		t.Skip("S3 test skipped: set CLAIMCHECK_TEST_S3_URL (scripts/seaweedfs.sh env prints it)")
	}
	ensureBigPDF(t)
	database := dbtest.SQLite(t)
	if os.Getenv(dbtest.EnvPostgresURL) != "" {
		database = dbtest.Postgres(t)
	}
	b := setup(t)
	tenant := "so" + strconv.FormatInt(time.Now().UnixNano(), 36) // a fresh prefix in the shared bucket
	// No NotFound grace: the object deleted below must be missing at once
	// (within the grace a missing object is payload-not-visible-yet).
	s3URL += "&notfound_grace=0"
	s3URL = ownNamespace(t, s3URL, tenant) // this test's job database owns a namespace of its own
	global := []string{"--store", s3URL, "--database", database}
	run := func(ctx context.Context, args ...string) result {
		var out, errOut bytes.Buffer
		code := Run(ctx, append(append([]string{"--data", b.data}, global...), args...), strings.NewReader(""), &out, &errOut)
		return result{out.String(), errOut.String(), code}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// 1. The main job, on S3 (+ PostgreSQL): the same pages as on the
	// embedded default (TestRunCorpus).
	r := run(ctx, "run", "--json", "--tenant", tenant, corpus)
	if r.code != 0 {
		t.Fatalf("run on S3: exit %d\n%s", r.code, r.stderr)
	}
	var out struct {
		Jobs []struct {
			File  string `json:"file"`
			State string `json:"state"`
			Pages int    `json:"pages"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	wantPages := map[string]int{"TeXShopAndAsymptote.pdf": 2, "bash.pdf": 87, "big.pdf": bigpdf.Pages, "octave.pdf": 1158, "pixel.pdf": 1, "refcard-a4.pdf": 3}
	if len(out.Jobs) != len(wantPages) {
		t.Fatalf("%d jobs, want %d", len(out.Jobs), len(wantPages))
	}
	for _, j := range out.Jobs {
		if j.State != "completed" || j.Pages != wantPages[filepath.Base(j.File)] {
			t.Errorf("%s on S3: %s, %d pages", j.File, j.State, j.Pages)
		}
	}

	// 2. A deleted object dead-letters on attempt 1.
	submit := func(kind, file string) int64 {
		r := run(ctx, "submit", "--json", "--kind", kind, "--tenant", tenant, file)
		var j jobJSON
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &j) != nil {
			t.Fatalf("submit: %d %s", r.code, r.stderr)
		}
		return j.ID
	}
	gone := submit("gone", filepath.Join(corpus, "bash.pdf"))
	var in struct {
		Payload struct {
			Key string `json:"key"`
		} `json:"payload"`
	}
	r = run(ctx, "inspect", "--json", "--reveal", strconv.FormatInt(gone, 10))
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil || in.Payload.Key == "" {
		t.Fatalf("inspect --reveal: %v %s", err, r.stdout)
	}
	store, err := claimcheck.OpenStore(ctx, s3URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Bucket().Delete(ctx, in.Payload.Key); err != nil {
		t.Fatal(err)
	}
	if r := run(ctx, "work", "--kind", "gone", "--until-empty", "--exec", "--", "cat"); r.code != 1 {
		t.Fatalf("work on a deleted object: exit %d, want 1 (dead letter)\n%s", r.code, r.stderr)
	}
	j := jobState(t, run(ctx, "jobs", "--json", "--kind", "gone"), gone)
	if j.State != "cancelled" || j.Attempts != 1 || j.Reason != claimcheck.ReasonPayloadMissing {
		t.Errorf("deleted object on S3: %+v, want cancelled on attempt 1, %s", j, claimcheck.ReasonPayloadMissing)
	}

	// 3. Wrong credentials: refused at start-up, where the namespace's
	// ownership marker is read, as access denied; the job is left waiting,
	// never dead-lettered as missing.
	denied := submit("denied", filepath.Join(corpus, "refcard-a4.pdf"))
	secret := os.Getenv("AWS_SECRET_ACCESS_KEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	wctx, wcancel := context.WithTimeout(ctx, 4*time.Second)
	r = run(wctx, "work", "--kind", "denied", "--exec", "--", "cat")
	wcancel()
	if r.code == 0 || !strings.Contains(r.stderr, "access denied") {
		t.Errorf("work with wrong credentials: exit %d, want a refusal naming access denied:\n%s", r.code, r.stderr)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	j = jobState(t, run(ctx, "jobs", "--json", "--kind", "denied"), denied)
	if j.State == "cancelled" || j.State == "discarded" || j.State == "completed" || j.Reason == claimcheck.ReasonPayloadMissing {
		t.Errorf("after wrong credentials: %+v, want a job still waiting", j)
	}
	if r := run(ctx, "work", "--kind", "denied", "--until-empty", "--exec", "--", "cat"); r.code != 0 {
		t.Fatalf("work with the right credentials: exit %d\n%s", r.code, r.stderr)
	}
	if j := jobState(t, run(ctx, "jobs", "--json", "--kind", "denied"), denied); j.State != "completed" {
		t.Errorf("after the credentials were fixed: %+v", j)
	}
}

func jobState(t *testing.T, r result, id int64) jobJSON {
	t.Helper()
	var js []jobJSON
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		t.Fatalf("jobs --json: %v\n%s", err, r.stdout)
	}
	for _, j := range js {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("job %d not listed", id)
	return jobJSON{}
}
