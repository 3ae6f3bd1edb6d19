package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/ops"
	"github.com/claimcheck/claimcheck/stores/s3store/s3test"
)

// doctorCommands are the commands of doctor.go and verify.go, by name.
var doctorCommands = map[string]func(*globals) *cobra.Command{"doctor": newDoctor, "verify": newVerify}

// runOps runs claimcheck with args in-process, as Run does. Until root.go
// registers doctor and verify, they are added here to a root built by
// newRoot, each around globals copied from the root's parsed flags, so the
// global flags and their environment variables work as they will then.
func runOps(ctx context.Context, args ...string) result {
	var out, errOut bytes.Buffer
	registered := true
	probe := newRoot(io.Discard)
	for name := range doctorCommands {
		if c, _, err := probe.Find([]string{name}); err != nil || c == probe {
			registered = false
		}
	}
	if registered {
		code := Run(ctx, args, strings.NewReader(""), &out, &errOut)
		return result{out.String(), errOut.String(), code}
	}
	stdout, stderr := &syncWriter{w: &out}, &syncWriter{w: &errOut}
	root := newRoot(stderr)
	for name, mk := range doctorCommands {
		if c, _, err := root.Find([]string{name}); err == nil && c != root {
			continue // registered by root.go
		}
		g := &globals{stderr: stderr}
		c := mk(g)
		c.PreRunE = func(*cobra.Command, []string) error {
			copyGlobals(root.PersistentFlags(), g)
			return nil
		}
		root.AddCommand(c)
	}
	root.SetArgs(args)
	root.SetIn(strings.NewReader(""))
	root.SetOut(stdout)
	root.SetErr(stderr)
	code := 0
	if err := root.ExecuteContext(ctx); err != nil { // as Run reports it
		fmt.Fprintln(stderr, "claimcheck:", strings.TrimPrefix(err.Error(), "claimcheck: "))
		var ue usageError
		code = 1
		if errors.As(err, &ue) || errors.Is(err, claimcheck.ErrConfig) || errors.Is(err, claimcheck.ErrTicketInvalid) {
			code = 2
		}
	}
	return result{out.String(), errOut.String(), code}
}

// copyGlobals sets g from the root's parsed global flags.
func copyGlobals(f *pflag.FlagSet, g *globals) {
	g.data, _ = f.GetString("data")
	g.store, _ = f.GetString("store")
	g.database, _ = f.GetString("database")
	g.secretHex, _ = f.GetString("secret")
	g.keeper, _ = f.GetString("keeper")
	g.inlineThreshold, _ = f.GetInt64("inline-threshold")
	g.alwaysOffload, _ = f.GetBool("always-offload")
	g.maxPayloadSize, _ = f.GetInt64("max-payload-size")
	g.maxAttempts, _ = f.GetInt("max-attempts")
	g.json, _ = f.GetBool("json")
	g.logLevel, _ = f.GetString("log-level")
}

// opsx runs a command (any, doctor and verify included) on the bundle's
// data directory.
func (b *cliBundle) opsx(args ...string) result {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	return runOps(ctx, append([]string{"--data", b.data}, args...)...)
}

type checksJSON struct {
	OK     bool        `json:"ok"`
	Checks []ops.Check `json:"checks"`
}

// checks runs a doctor or verify command with --json and returns its exit
// code and report.
func (b *cliBundle) checks(args ...string) (int, checksJSON) {
	b.t.Helper()
	r := b.opsx(append([]string{"--json"}, args...)...)
	var out checksJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		b.t.Fatalf("claimcheck --json %s: exit %d, not a report: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, err, r.stdout, r.stderr)
	}
	return r.code, out
}

func (c checksJSON) status(name string) (ops.Status, string) {
	for _, ch := range c.Checks {
		if ch.Name == name {
			return ch.Status, ch.Detail
		}
	}
	return "", "no such check"
}

// wantStatus fails t unless check name has status want (and its detail
// contains each of contains).
func wantStatus(t *testing.T, rep checksJSON, name string, want ops.Status, contains ...string) {
	t.Helper()
	st, detail := rep.status(name)
	if st != want {
		t.Errorf("check %q: %s, want %s: %s", name, st, want, detail)
		return
	}
	for _, s := range contains {
		if !strings.Contains(detail, s) {
			t.Errorf("check %q: detail lacks %q: %s", name, s, detail)
		}
	}
}

// probeObjects lists the bundle's file-store objects under a reserved
// tenant's prefixes.
func (b *cliBundle) probeObjects(tenant string) []string {
	var out []string
	for key := range b.objects() {
		if strings.HasPrefix(key, claimcheck.PrefixPayloads+tenant+"/") || strings.HasPrefix(key, claimcheck.PrefixResults+tenant+"/") {
			out = append(out, key)
		}
	}
	return out
}

func TestDoctorCommandEmbedded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.opsx("doctor")
	t.Logf("claimcheck doctor (embedded default)\n%s%s", r.stdout, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "doctor OK") {
		t.Fatalf("doctor on the embedded default: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	code, rep := b.checks("doctor")
	if code != 0 || !rep.OK {
		t.Fatalf("doctor --json: exit %d, %+v", code, rep)
	}
	for _, name := range []string{ops.CheckStore, ops.CheckCredentials, ops.CheckKeeper, ops.CheckRetention, ops.CheckDeadLetter, ops.CheckInline} {
		wantStatus(t, rep, name, ops.StatusPass)
	}
	wantStatus(t, rep, ops.CheckExpiry+"payloads/", ops.StatusPass, "sweeper enforces expiry", "--expire-payloads 23d")
	wantStatus(t, rep, ops.CheckKeeper, ops.StatusPass, "encrypted inline probe", "encrypted 65537 B probe object")
	if left := b.probeObjects(ops.DoctorTenant); len(left) > 0 {
		t.Errorf("doctor left probes behind: %v", left)
	}

	// No keeper: a warning, not a failure.
	code, rep = b.checks("--keeper", "none", "doctor")
	if code != 0 {
		t.Errorf("doctor --keeper none: exit %d", code)
	}
	wantStatus(t, rep, ops.CheckKeeper, ops.StatusWarn, "unencrypted")
}

func TestDoctorCommandFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// The pipeline counts 14 days of dead letters; a sum with 7 is wrong.
	code, rep := b.checks("doctor", "--dead-letter", "7d")
	if code != 1 || rep.OK {
		t.Errorf("doctor --dead-letter 7d: exit %d, ok %v", code, rep.OK)
	}
	wantStatus(t, rep, ops.CheckDeadLetter, ops.StatusFail, "keeps dead letters 14d, but the retention sum counts only 7d")

	// An inline threshold whose tickets cannot travel: pipeline.Open
	// refuses it, and doctor still prints its table.
	r := b.opsx("--inline-threshold", "1048576", "doctor")
	t.Logf("claimcheck --inline-threshold 1048576 doctor\n%s%s", r.stdout, r.stderr)
	if r.code != 1 || !strings.Contains(r.stderr, "doctor: 2 of 2 checks failed: configuration, inline threshold") {
		t.Errorf("doctor with a 1 MiB inline threshold: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	code, rep = b.checks("--inline-threshold", "1048576", "doctor")
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	wantStatus(t, rep, ops.CheckInline, ops.StatusFail, "above the transport's maximum message size of 256 KiB")

	if r := b.opsx("doctor", "--backlog", "soon"); r.code != 2 {
		t.Errorf("doctor --backlog soon: exit %d, want 2 (usage)\n%s", r.code, r.stderr)
	}
}

// s3TestBucket creates a bucket of its own on the server in
// $CLAIMCHECK_TEST_S3_URL (skipping t when unset) and returns its store URL
// and a client; the bucket is emptied and removed when t ends.
func s3TestBucket(t *testing.T, name string) (string, *s3.Client) {
	t.Helper()
	b := s3test.New(t, "cli-"+name)
	return b.URL, b.Client
}

// testDatabase is PostgreSQL (a schema of the test's own) when
// CLAIMCHECK_TEST_DATABASE_URL is set, else SQLite.
func testDatabase(t *testing.T) string {
	if os.Getenv(dbtest.EnvPostgresURL) != "" {
		return dbtest.Postgres(t)
	}
	return dbtest.SQLite(t)
}

// The figure on SeaweedFS: doctor fails on a bucket whose
// claimcheck rules expire objects after 1 day while dead letters are kept
// 14 days, passes once "lifecycle apply" installed the right expiry, and
// names an access-denied failure as such under wrong credentials. Not
// parallel: it changes the AWS environment.
func TestDoctorCommandS3(t *testing.T) {
	store, client := s3TestBucket(t, "doctor")
	b := setup(t)
	global := []string{"--store", store, "--database", testDatabase(t)}
	ctx := context.Background()
	bucket, _ := url.Parse(store)
	oneDay := func(id, prefix string) types.LifecycleRule {
		return types.LifecycleRule{ID: aws.String(id), Status: types.ExpirationStatusEnabled,
			Filter: &types.LifecycleRuleFilter{Prefix: aws.String(prefix)}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}}
	}
	if _, err := client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String(bucket.Host),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
			oneDay("claimcheck-payloads", "payloads/"), oneDay("claimcheck-results", "results/")}}}); err != nil {
		t.Fatal(err)
	}

	r := b.opsx(append(global, "doctor")...)
	t.Logf("claimcheck doctor, bucket with a 1-day expiry, dead letters kept 14 days: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 1 {
		t.Fatalf("doctor on a 1-day expiry: exit %d, want 1", r.code)
	}
	code, rep := b.checks(append(global, "doctor")...)
	if code != 1 || rep.OK {
		t.Errorf("doctor --json on a 1-day expiry: exit %d ok %v", code, rep.OK)
	}
	wantStatus(t, rep, ops.CheckStore, ops.StatusPass, "S3 bucket "+bucket.Host)
	wantStatus(t, rep, ops.CheckCredentials, ops.StatusPass)
	wantStatus(t, rep, ops.CheckKeeper, ops.StatusPass)
	wantStatus(t, rep, ops.CheckExpiry+"payloads/", ops.StatusFail, `rule "claimcheck-payloads", on "payloads/", expires objects after 1 day`, "must live 23 days", "lifecycle apply")
	wantStatus(t, rep, ops.CheckExpiry+"results/", ops.StatusFail, `rule "claimcheck-results"`)
	wantStatus(t, rep, ops.CheckDeadLetter, ops.StatusFail, "dead letters are kept 14d but payloads expire after 1 day")
	wantStatus(t, rep, ops.CheckAbortIncomplete+"payloads/", ops.StatusFail, "no rule of bucket", "aborts incomplete multipart uploads under payloads/", "lifecycle apply")

	r = b.opsx(append(global, "lifecycle", "apply")...)
	if r.code != 0 || !strings.Contains(r.stdout, "claimcheck rules added: none; replaced: claimcheck-payloads, claimcheck-results") {
		t.Fatalf("lifecycle apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = b.opsx(append(global, "doctor")...)
	t.Logf("claimcheck doctor after lifecycle apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 0 {
		t.Fatalf("doctor after lifecycle apply: exit %d", r.code)
	}
	_, rep = b.checks(append(global, "doctor")...)
	wantStatus(t, rep, ops.CheckExpiry+"payloads/", ops.StatusPass, "expires payloads/ after 23 days (rule \"claimcheck-payloads\")")
	wantStatus(t, rep, ops.CheckDeadLetter, ops.StatusPass)
	wantStatus(t, rep, ops.CheckAbortIncomplete+"payloads/", ops.StatusPass, "aborts incomplete multipart uploads under payloads/ after 1 day (rule \"claimcheck-payloads\")")
	wantStatus(t, rep, ops.CheckAbortIncomplete+"results/", ops.StatusPass)

	// Wrong credentials: the store refuses them; doctor says access denied.
	t.Setenv("AWS_ACCESS_KEY_ID", "claimcheck-wrong-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	r = b.opsx(append(global, "doctor")...)
	t.Logf("claimcheck doctor with wrong credentials: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	code, rep = b.checks(append(global, "doctor")...)
	if r.code != 1 || code != 1 {
		t.Errorf("doctor with wrong credentials: exit %d", r.code)
	}
	// The namespace check reads the ownership marker before any other
	// check runs: the refused credentials surface there, as access denied.
	wantStatus(t, rep, "configuration", ops.StatusFail, "access denied")
}

// makeDead submits file as kind for tenant and works it with a command that
// fails permanently, returning the dead letter's id.
func (b *cliBundle) makeDead(global []string, kind, tenant, file string) int64 {
	b.t.Helper()
	r := b.opsx(append(global, "submit", "--json", "--kind", kind, "--tenant", tenant, file)...)
	var j jobJSON
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &j) != nil {
		b.t.Fatalf("submit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = b.opsx(append(global, "work", "--kind", kind, "--until-empty", "--exec", "--", "sh", "-c", "exit 65")...)
	if r.code != 1 || !strings.Contains(r.stderr, "went to the dead letters") {
		b.t.Fatalf("work: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return j.ID
}

// deleteObjects removes the file store's objects under tenant's payloads,
// as an expiry would.
func (b *cliBundle) deleteObjects(tenant string) int {
	b.t.Helper()
	n := 0
	for key, path := range b.objects() {
		if strings.HasPrefix(key, claimcheck.PrefixPayloads+tenant+"/") {
			if err := os.Remove(path); err != nil {
				b.t.Fatal(err)
			}
			_ = os.Remove(path + ".attrs")
			n++
		}
	}
	return n
}

func TestVerifyCommandEmbedded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := b.makeDead(nil, "render", "acme", filepath.Join(corpusPath, "bash.pdf"))

	r := b.opsx("verify")
	t.Logf("claimcheck verify (embedded default)\n%s%s", r.stdout, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "verify OK") {
		t.Fatalf("verify on the embedded default: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	code, rep := b.checks("verify", "--size", "70KiB", "--size", "1MiB")
	if code != 0 {
		t.Fatalf("verify --json: exit %d %+v", code, rep)
	}
	wantStatus(t, rep, ops.CheckUniform, ops.StatusPass, "70 KiB →", "1 MiB →", "1 sampled offloaded ticket (payloads of")
	wantStatus(t, rep, ops.CheckMissingDead, ops.StatusPass, "attempt 1", "payload-missing")
	wantStatus(t, rep, ops.CheckOldestDead, ops.StatusPass, fmt.Sprintf("job %d (kind render, tenant acme, handler-permanent", dead), "present")
	wantStatus(t, rep, ops.CheckOrphan, ops.StatusPass, "removed as orphan")
	wantStatus(t, rep, ops.CheckCleanup, ops.StatusPass)
	for _, j := range b.jobs() {
		if j.Kind == ops.VerifyKind || j.Tenant == ops.VerifyTenant {
			t.Errorf("verify left job %d (%s, %s) behind", j.ID, j.Kind, j.State)
		}
	}
	if left := b.probeObjects(ops.VerifyTenant); len(left) > 0 {
		t.Errorf("verify left objects behind: %v", left)
	}

	// Broken on purpose (1): the dead letter's payload expired before the
	// dead letter did, as a lifecycle expiry shorter than the dead-letter
	// retention does.
	if n := b.deleteObjects("acme"); n != 1 {
		t.Fatalf("deleted %d objects of tenant acme, want 1", n)
	}
	r = b.opsx("verify", "--size", "70KiB")
	t.Logf("claimcheck verify, the oldest dead letter's payload expired: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != 1 || !strings.Contains(r.stderr, "verify: 1 of 5 checks failed: oldest dead letter readable") {
		t.Errorf("verify with an expired dead letter: exit %d\n%s", r.code, r.stderr)
	}
	_, rep = b.checks("verify", "--size", "70KiB")
	wantStatus(t, rep, ops.CheckOldestDead, ops.StatusFail, fmt.Sprintf("job %d", dead), "payload is gone (expired or deleted)")

	// Broken on purpose (2): an inline threshold above the smallest probe
	// makes its message grow with its payload.
	r = b.opsx("--inline-threshold", "131072", "verify", "--size", "70KiB", "--size", "1MiB")
	t.Logf("claimcheck --inline-threshold 131072 verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	_, rep = b.checks("--inline-threshold", "131072", "verify", "--size", "70KiB", "--size", "1MiB")
	if r.code != 1 {
		t.Errorf("verify with a 128 KiB inline threshold: exit %d", r.code)
	}
	wantStatus(t, rep, ops.CheckUniform, ops.StatusFail, "the 70 KiB probe travelled inline")
	wantStatus(t, rep, ops.CheckCleanup, ops.StatusPass)

	if r := b.opsx("verify", "--grace", "10m"); r.code != 2 {
		t.Errorf("verify --grace 10m: exit %d, want 2", r.code)
	}
}

// PostgreSQL (when configured) and SeaweedFS: verify passes, with a dead
// letter of its own to check. Skipped without CLAIMCHECK_TEST_S3_URL.
func TestVerifyCommandS3(t *testing.T) {
	t.Parallel()
	store, _ := s3TestBucket(t, "verify")
	b := setup(t)
	global := []string{"--store", store, "--database", testDatabase(t)}
	dead := b.makeDead(global, "render", "acme", filepath.Join(corpusPath, "bash.pdf"))
	r := b.opsx(append(global, "verify")...)
	t.Logf("claimcheck verify on S3 (%s): exit %d\n%s%s", strings.Split(global[3], "?")[0], r.code, r.stdout, r.stderr)
	if r.code != 0 {
		t.Fatalf("verify on S3: exit %d", r.code)
	}
	_, rep := b.checks(append(global, "verify", "--size", "70KiB")...)
	wantStatus(t, rep, ops.CheckOldestDead, ops.StatusPass, fmt.Sprintf("job %d", dead), "present")
	wantStatus(t, rep, ops.CheckMissingDead, ops.StatusPass)
	wantStatus(t, rep, ops.CheckOrphan, ops.StatusPass)
}

// Replay (issue 5, figure 5): a dead letter whose payload expired is
// refused with a clear message; one whose payload is present, and an
// inline one, are replayed.
func TestReplayRefusesExpiredPayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	present := b.makeDead(nil, "render", "keep", filepath.Join(corpusPath, "bash.pdf"))
	expired := b.makeDead(nil, "render", "gone", filepath.Join(corpusPath, "refcard-a4.pdf"))
	small := filepath.Join(t.TempDir(), "small.txt")
	if err := os.WriteFile(small, []byte("a small payload, inline in its ticket"), 0o600); err != nil {
		t.Fatal(err)
	}
	inline := b.makeDead(nil, "render", "tiny", small)
	if n := b.deleteObjects("gone"); n != 1 {
		t.Fatalf("deleted %d objects, want 1", n)
	}

	r := b.opsx("dead", "replay", fmt.Sprint(expired))
	t.Logf("claimcheck dead replay %d: exit %d\n%s%s", expired, r.code, r.stdout, r.stderr)
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("replay job %d", expired)) || !strings.Contains(r.stderr, "payload expired or deleted: nothing to replay") {
		t.Errorf("replay of a dead letter whose payload expired: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, id := range []int64{present, inline} {
		r := b.opsx("dead", "replay", fmt.Sprint(id))
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("job %d replayed: state=available", id)) {
			t.Errorf("replay of job %d: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
		}
	}
	states := map[int64]string{}
	for _, j := range b.jobs() {
		states[j.ID] = j.State
	}
	if states[expired] != "cancelled" || states[present] != "available" || states[inline] != "available" {
		t.Errorf("states after replay: %v", states)
	}
}
