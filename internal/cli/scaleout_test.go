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
	"github.com/claimcheck/claimcheck/internal/testenv"
	"github.com/claimcheck/claimcheck/ops"
	"github.com/claimcheck/claimcheck/stores/s3store/s3test"
)

// TestScaleOutEndToEnd runs the command against a real S3 server (SeaweedFS,
// started by .ci/run) and, when configured, PostgreSQL: the main job gives
// the same results as on the embedded default; a deleted object
// dead-letters on attempt 1; wrong credentials are retried and reported as
// access denied, never dead-lettered as missing, and the job completes once
// the credentials are right. Not parallel: it changes the AWS environment.
func TestScaleOutEndToEnd(t *testing.T) {
	s3URL := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", "scripts/seaweedfs.sh env prints it")
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
	r := run(ctx, "run", "--json", "--tenant", tenant, corpusPath)
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
	gone := submit("gone", filepath.Join(corpusPath, "bash.pdf"))
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
	denied := submit("denied", filepath.Join(corpusPath, "refcard-a4.pdf"))
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

// doctorRow runs doctor --json on a host and returns its check named name
// (doctor's own verdict is not asserted: on SeaweedFS the lifecycle rows
// fail for reasons of their own).
func doctorRow(t *testing.T, b *cliBundle, global []string, name string) ops.Check {
	t.Helper()
	r := b.run("", append(global, "--json", "doctor")...)
	var rep struct {
		Checks []ops.Check `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("doctor has no %q row:\n%s", name, r.stdout)
	return ops.Check{}
}

// TestScaleOutTwoHosts follows the README's "Scaling out" steps with two
// data directories standing for two hosts on one PostgreSQL database and
// one SeaweedFS namespace: every job submitted on the first is worked on
// the second, which takes the key `claimcheck keys` printed on the first
// as --keeper. A third host with a key of its own (unshared): doctor fails
// its deployment-key row naming the key id the payloads need, its worker's
// error names that id too, and no job dies of it. The second host without
// its --keeper (no key file, sealed payloads present) is refused at start
// naming the missing file and the key id.
func TestScaleOutTwoHosts(t *testing.T) {
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	s3URL := ownNamespace(t, testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", `eval "$(scripts/seaweedfs.sh env)"`), "hosts"+suffix)
	testenv.Require(t, dbtest.EnvPostgresURL, "a PostgreSQL database all hosts share")
	global := []string{"--store", s3URL, "--database", dbtest.Postgres(t)}
	one, two, other := setup(t), setup(t), setup(t)
	kind, tenant := "count", "acme"

	// Host one: migrate, and keys prints its key (made on first use) in
	// the form --keeper takes. The unshared host made a key of its own
	// before anything was sealed.
	one.ok(append(global, "migrate")...)
	var key keysJSON
	if err := json.Unmarshal([]byte(one.ok(append(global, "--json", "keys")...)), &key); err != nil || !strings.HasPrefix(key.Keeper, "base64key://") {
		t.Fatalf("keys --json on host one: %+v %v", key, err)
	}
	var otherKey keysJSON
	if err := json.Unmarshal([]byte(other.ok(append(global, "--json", "keys")...)), &otherKey); err != nil || otherKey.KeyID == key.KeyID {
		t.Fatalf("keys --json on the unshared host: %+v %v", otherKey, err)
	}
	t.Logf("host one's key id %s; the unshared host's %s", key.KeyID, otherKey.KeyID)

	// Host one submits: an inline payload (its ticket sealed) and two
	// offloaded ones (sealed objects).
	small := filepath.Join(t.TempDir(), "small.txt")
	if err := os.WriteFile(small, []byte("small enough to travel inline, sealed"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, f := range []string{small, payloadFile(t, 100<<10), payloadFile(t, 300<<10)} {
		ids = append(ids, one.submit(append(global, "--kind", kind, "--tenant", tenant, f)...).ID)
	}

	// Host two, with host one's key.
	shared := append(append([]string{}, global...), "--keeper", key.Keeper)
	if c := doctorRow(t, two, shared, ops.CheckDeploymentKey); c.Status != ops.StatusPass || !strings.Contains(c.Detail, key.KeyID) {
		t.Errorf("doctor on host two with the shared key: %+v, want pass naming %s", c, key.KeyID)
	}

	// The unshared host: doctor fails naming the key id needed, and so
	// does its worker; the jobs wait.
	c := doctorRow(t, other, global, ops.CheckDeploymentKey)
	if c.Status != ops.StatusFail || !strings.Contains(c.Detail, key.KeyID) || !strings.Contains(c.Detail, otherKey.KeyID) || !strings.Contains(c.Detail, "claimcheck keys") {
		t.Errorf("doctor on the unshared host: %+v, want a failure naming %s and %s and how to share", c, key.KeyID, otherKey.KeyID)
	}
	t.Logf("doctor on the unshared host: %s: %s", c.Status, c.Detail)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	var out, errOut bytes.Buffer
	code := Run(ctx, append(append([]string{"--data", other.data}, global...), "work", "--kind", kind, "--exec", "--", "wc", "-c"), strings.NewReader(""), &out, &errOut)
	cancel()
	if !strings.Contains(errOut.String(), key.KeyID) {
		t.Errorf("the unshared host's worker (exit %d) does not name the key id %s:\n%s", code, key.KeyID, errOut.String())
	}
	t.Logf("work on the unshared host: exit %d\n%s", code, errOut.String())
	for _, j := range two.jobs(append(shared, "--kind", kind)...) {
		if j.State == "cancelled" || j.State == "discarded" || j.State == "completed" {
			t.Errorf("job %d after the unshared worker: %s %s, want it waiting", j.ID, j.State, j.Reason)
		}
	}

	// Host two without --keeper: it has no key file and the deployment
	// holds sealed payloads: refused, naming the file and the key id.
	r := two.run("", append(global, "work", "--kind", kind, "--until-empty", "--exec", "--", "wc", "-c")...)
	if path := filepath.Join(two.data, "keys", keyFileName); r.code != 2 || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, key.KeyID) {
		t.Errorf("host two without its key: exit %d, want 2 naming %s and %s\n%s", r.code, path, key.KeyID, r.stderr)
	}

	// Host two with the shared key works every job host one submitted.
	two.ok(append(shared, "work", "--kind", kind, "--until-empty", "--exec", "--", "wc", "-c")...)
	done := map[int64]string{}
	for _, j := range two.jobs(append(shared, "--kind", kind)...) {
		done[j.ID] = j.State
	}
	for _, id := range ids {
		if done[id] != "completed" {
			t.Errorf("job %d submitted on host one, worked on host two: %s", id, done[id])
		}
	}
}

// TestREADMEScaleOutDoctor runs the README's "Scaling out" block as written
// on a fresh SeaweedFS bucket and a PostgreSQL database of its own, with
// CLAIMCHECK_DATABASE and CLAIMCHECK_STORE as the block exports them: on
// the first host migrate, lifecycle apply and keys; on another host the
// key from keys as CLAIMCHECK_KEEPER, then doctor, which must pass every
// check (a fresh bucket without the lifecycle rules fails two: nothing
// expires payloads or aborts incomplete uploads).
func TestREADMEScaleOutDoctor(t *testing.T) {
	bucket := s3test.New(t, "readme")
	testenv.Require(t, dbtest.EnvPostgresURL, "a PostgreSQL database all hosts share")
	t.Setenv("CLAIMCHECK_DATABASE", dbtest.Postgres(t))
	t.Setenv("CLAIMCHECK_STORE", ownNamespace(t, bucket.URL, "prod"))
	first, other := setup(t), setup(t)
	first.ok("migrate")
	first.ok("lifecycle", "apply")
	var key keysJSON
	if err := json.Unmarshal([]byte(first.ok("--json", "keys")), &key); err != nil || !strings.HasPrefix(key.Keeper, "base64key://") {
		t.Fatalf("keys --json: %+v %v", key, err)
	}
	t.Setenv("CLAIMCHECK_KEEPER", key.Keeper)
	r := other.run("", "--json", "doctor")
	var rep struct {
		Checks []ops.Check `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	counts := map[ops.Status]int{}
	for _, c := range rep.Checks {
		counts[c.Status]++
		if c.Status == ops.StatusFail {
			t.Errorf("doctor: %s fails: %s", c.Name, c.Detail)
		}
	}
	t.Logf("doctor after the README's steps: exit %d, %v", r.code, counts)
	if r.code != 0 {
		t.Errorf("doctor exit %d, want 0\n%s", r.code, r.stderr)
	}
}
