package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// opsRun runs claimcheck with --data data and args, in-process, through
// Run.
func opsRun(t *testing.T, data string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Run(ctx, append([]string{"--data", data}, args...), strings.NewReader(""), &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

func opsOK(t *testing.T, data string, args ...string) result {
	t.Helper()
	r := opsRun(t, data, args...)
	if r.code != 0 {
		t.Fatalf("claimcheck %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// The operations commands this file's tests run are registered on the
// root command.
func TestOpsCommandsRegistered(t *testing.T) {
	root := newRoot(&bytes.Buffer{})
	for _, name := range []string{"retention", "lifecycle", "sweep"} {
		c, _, err := root.Find([]string{name})
		if err != nil || c == nil || c.Name() != name {
			t.Errorf("root.Find(%q): %v; want the %s command", name, err, name)
		}
	}
}

var seedFlags = []string{"--backlog", "4h", "--retry-window", "1h", "--dead-letter", "14d", "--replay-margin", "7d"}

func TestRetentionCommand(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	r := opsOK(t, data, append([]string{"retention"}, seedFlags...)...)
	for _, want := range []string{
		"minimum object lifetime: 22 days for payloads/, 22 days for results/",
		"  backlog                      4h  total 4h\n",
		"+ retry window                 1h  total 5h\n",
		"+ dead-letter retention       14d  total 14d5h\n",
		"+ replay margin                7d  total 21d5h\n",
		"= 21d5h, rounded up to whole days: payloads/ need 22 days",
		"gives 21 days",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("retention output lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("claimcheck retention %s\n%s", strings.Join(seedFlags, " "), r.stdout)

	r = opsOK(t, data, append([]string{"retention", "--results-extra", "30d", "--json"}, seedFlags...)...)
	var got struct {
		PayloadDays   int    `json:"payload_days"`
		ResultDays    int    `json:"result_days"`
		PayloadTotal  string `json:"payload_total"`
		TruncatedDays int    `json:"truncated_days"`
		Steps         []struct{ Name, Add, Total string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if got.PayloadDays != 22 || got.ResultDays != 52 || got.PayloadTotal != "21d5h" || got.TruncatedDays != 21 || len(got.Steps) != 5 || got.Steps[4].Total != "51d5h" {
		t.Errorf("retention --json = %+v", got)
	}

	// Defaults: 1d backlog, the pipeline's retry bound (5 × 38m = 3h10m),
	// its 14-day dead-letter retention, a week's margin: 22d3h10m → 23 days.
	r = opsOK(t, data, "retention")
	if !strings.Contains(r.stdout, "23 days for payloads/") || !strings.Contains(r.stdout, "3h10m") || !strings.Contains(r.stdout, "14d") {
		t.Errorf("retention with defaults:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(data, "claimcheck.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("retention touched the data directory: %v", err)
	}
}

func TestRetentionCommandUsageErrors(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backlog", "-1h"}, "--backlog: duration \"-1h\" is negative"},
		{[]string{"--dead-letter", "14"}, "--dead-letter: invalid duration \"14\": 14 has no unit"},
		{[]string{"--replay-margin", "a week"}, "--replay-margin: invalid duration"},
		{[]string{"--retry-window", ""}, ""}, // empty means the default
		{[]string{"--results-extra", "3y"}, `unknown unit "y"`},
		{[]string{"--backlog", "200w", "--replay-margin", "36000d"}, "exceeds"},
		{[]string{"extra-arg"}, "expected no arguments"},
	} {
		r := opsRun(t, data, append([]string{"retention"}, tc.args...)...)
		if tc.want == "" {
			if r.code != 0 {
				t.Errorf("retention %q: exit %d: %s", tc.args, r.code, r.stderr)
			}
			continue
		}
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("retention %q: exit %d, stderr %q; want 2 with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestLifecycleCommand(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	args := append([]string{"lifecycle", "--results-extra", "30d"}, seedFlags...)
	r := opsOK(t, data, args...)
	var s3 struct {
		Rules []struct {
			ID                             string
			Filter                         struct{ Prefix string }
			Status                         string
			Expiration                     struct{ Days int }
			AbortIncompleteMultipartUpload struct{ DaysAfterInitiation int }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &s3); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(s3.Rules) != 2 || s3.Rules[0].Filter.Prefix != "payloads/" || s3.Rules[0].Expiration.Days != 22 ||
		s3.Rules[1].Filter.Prefix != "results/" || s3.Rules[1].Expiration.Days != 52 ||
		s3.Rules[0].AbortIncompleteMultipartUpload.DaysAfterInitiation != 1 || s3.Rules[0].Status != "Enabled" || s3.Rules[0].ID != "claimcheck-payloads" {
		t.Errorf("lifecycle S3 JSON:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "merge with the bucket's existing rules") {
		t.Errorf("lifecycle does not warn about replacing other rules: %q", r.stderr)
	}
	t.Logf("claimcheck %s\n%s", strings.Join(args, " "), r.stdout)

	r = opsOK(t, data, append(args, "--format", "gcs")...)
	var gcs struct {
		Lifecycle struct {
			Rule []struct {
				Action    struct{ Type string }
				Condition struct {
					Age           int
					MatchesPrefix []string
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &gcs); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	rules := gcs.Lifecycle.Rule
	if len(rules) != 3 || rules[0].Action.Type != "Delete" || rules[0].Condition.Age != 22 || rules[0].Condition.MatchesPrefix[0] != "payloads/" ||
		rules[1].Condition.Age != 52 || rules[2].Action.Type != "AbortIncompleteMultipartUpload" || rules[2].Condition.Age != 1 {
		t.Errorf("lifecycle GCS JSON:\n%s", r.stdout)
	}
	t.Logf("claimcheck %s --format gcs\n%s", strings.Join(args, " "), r.stdout)

	for _, bad := range [][]string{{"--format", "xml"}, {"--backlog", "-4h"}} {
		if r := opsRun(t, data, append([]string{"lifecycle"}, bad...)...); r.code != 2 {
			t.Errorf("lifecycle %q: exit %d, want 2: %s", bad, r.code, r.stderr)
		}
	}
}

// sweepData is a data directory holding the sweep figure: (a) an
// old orphan, (b) a young one, (c) a queued job's payload, (d) a dead
// letter's payload whose River row was pruned, (e) a temporary file and
// (f) an object under another prefix.
type sweepData struct {
	data             string
	a, b, c, d, e, f string
	objects          string
}

func setupSweepData(t *testing.T) *sweepData {
	t.Helper()
	ctx := context.Background()
	sd := &sweepData{data: filepath.Join(t.TempDir(), "data")}
	sd.objects = filepath.Join(sd.data, "objects")
	in := filepath.Join(t.TempDir(), "in.txt")
	submit := func(kind, body string) int64 {
		if err := os.WriteFile(in, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := Run(ctx, []string{"--data", sd.data, "--keeper", "none", "--always-offload", "--json", "submit", "--kind", kind, "--tenant", "acme", in}, strings.NewReader(""), &out, &errOut)
		if code != 0 {
			t.Fatalf("submit: exit %d: %s", code, errOut.String())
		}
		var s submitted
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	cID := submit("queued", "(c) a queued job's payload")
	dID := submit("doomed", "(d) a dead letter's payload")

	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(sd.objects), &claimcheck.Options{AlwaysOffload: true, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p, err := pipeline.Open(ctx, pipeline.Config{Database: filepath.Join(sd.data, "claimcheck.db"), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	key := func(id int64) string {
		j, err := p.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j.Ticket().Key
	}
	sd.c, sd.d = key(cID), key(dID)
	// (d): dead, then pruned by River.
	if err := p.Work(ctx, pipeline.WorkOptions{UntilEmpty: true, Handlers: map[string]claimcheck.Handler{
		"doomed": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return nil, claimcheck.Permanent(errors.New("bad input"))
		}),
	}}); err != nil {
		t.Fatal(err)
	}
	if j, err := p.Get(ctx, dID); err != nil || !j.Dead {
		t.Fatalf("job (d): %+v, %v; want dead", j, err)
	}
	if _, err := p.DB().ExecContext(ctx, `DELETE FROM river_job WHERE id = $1`, dID); err != nil {
		t.Fatal(err)
	}
	checkIn := func(body string) string {
		tk, err := store.CheckIn(ctx, "acme", strings.NewReader(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		return tk.Key
	}
	sd.a = checkIn("(a) an orphan: the producer crashed before its transaction")
	sd.b = checkIn("(b) a young orphan")
	sd.e = sd.b + ".18a2b3c4d5e6f708.tmp"
	if err := os.WriteFile(sd.path(sd.e), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	sd.f = "other/report.csv"
	if err := store.Bucket().WriteAll(ctx, sd.f, []byte("not ours"), nil); err != nil {
		t.Fatal(err)
	}
	for k, age := range map[string]time.Duration{sd.a: 48 * time.Hour, sd.b: time.Hour, sd.c: 48 * time.Hour, sd.d: 30 * 24 * time.Hour, sd.e: 48 * time.Hour, sd.f: 300 * 24 * time.Hour} {
		when := time.Now().Add(-age)
		for _, path := range []string{sd.path(k), sd.path(k) + ".attrs"} {
			if err := os.Chtimes(path, when, when); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	return sd
}

func (sd *sweepData) path(key string) string {
	return filepath.Join(sd.objects, filepath.FromSlash(key))
}

func (sd *sweepData) exists(key string) bool {
	_, err := os.Stat(sd.path(key))
	return err == nil
}

var fullDigest = regexp.MustCompile(`[0-9a-f]{64}`)

func TestSweepCommand(t *testing.T) {
	t.Parallel()
	sd := setupSweepData(t)

	r := opsOK(t, sd.data, "sweep", "--dry-run")
	t.Logf("claimcheck sweep --dry-run\n%s", r.stdout)
	want := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^would remove  orphan +\d+ B +2d[0-9hms]* +payloads/acme/…[0-9a-f]{12} +no claims-registry row and 2d[0-9hms]* old \(grace period 1d\)$`),
		regexp.MustCompile(`(?m)^kept +too-young +.*payloads/acme/…[0-9a-f]{12} +no claims-registry row yet, but only 1h[0-9ms]* old`),
		regexp.MustCompile(`(?m)^kept +referenced +.*payloads/acme/…[0-9a-f]{12} +referenced by job 1: 1 pending$`),
		regexp.MustCompile(`(?m)^kept +referenced +.*30d[0-9hms]* +payloads/acme/…[0-9a-f]{12} +referenced by job 2: 1 pruned by River`),
		regexp.MustCompile(`(?m)^would remove +temp-file +.*2d[0-9hms]* +payloads/acme/…[0-9a-f]{12}\.tmp +a temporary file of a write that never finished`),
		regexp.MustCompile(`(?m)^kept +other-prefix +.*other/… `),
		regexp.MustCompile(`(?m)^dry run: would remove 2 objects \(orphan 1, temp-file 1; \d+ B\), would keep 4 objects \(referenced 2, too-young 1, other-prefix 1\); listed 5 under payloads/ and results/ in 3 pages$`), // the third page: outcomes/ (empty)
	}
	for _, re := range want {
		if !re.MatchString(r.stdout) {
			t.Errorf("sweep --dry-run output does not match %s", re)
		}
	}
	if fullDigest.MatchString(r.stdout) {
		t.Errorf("sweep output shows a full key:\n%s", r.stdout)
	}
	for _, k := range []string{sd.a, sd.b, sd.c, sd.d, sd.e, sd.f} {
		if !sd.exists(k) {
			t.Fatalf("the dry run deleted %s", k)
		}
	}

	// Two broker inbox records, one settled 100 days ago (with a release
	// count), one now: the sweep forgets the first only.
	db, err := sql.Open("sqlite", filepath.Join(sd.data, "claimcheck.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, m := range []struct {
		id string
		at time.Time
	}{{"old", time.Now().Add(-100 * 24 * time.Hour).UTC()}, {"new", time.Now().UTC()}} {
		if _, err := db.Exec(`INSERT INTO claimcheck_consumed (message_id, queue, job_id, kind, tenant, action, attempt, reason, error, result, updated_at)
			VALUES ($1, 'q', 0, 'pages', 'acme', 'acked', 1, '', '', NULL, $2)`, m.id, m.at); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO claimcheck_released (message_id, queue, delivery_id, released) VALUES ($1, 'q', 'd', 1)`, m.id); err != nil {
			t.Fatal(err)
		}
	}
	if r := opsRun(t, sd.data, "sweep", "--inbox-retention", "1d"); r.code != 2 || !strings.Contains(r.stderr, "shorter than the dead-letter retention") {
		t.Errorf("sweep --inbox-retention 1d: exit %d, %s; want 2, refused as shorter than the dead-letter retention", r.code, r.stderr)
	}

	r = opsOK(t, sd.data, "--json", "sweep")
	var got struct {
		Entries []struct {
			Key     string
			Object  string
			Removed bool
			Reason  string
		}
		Summary sweepSummary
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	reasons := map[string]int{}
	for _, e := range got.Entries {
		reasons[fmt.Sprintf("%v %s", e.Removed, e.Reason)]++
		if e.Key != "" {
			t.Errorf("sweep --json shows a key without --reveal: %q", e.Key)
		}
	}
	if want := map[string]int{"true orphan": 1, "false too-young": 1, "false referenced": 2, "true temp-file": 1, "false other-prefix": 1}; fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Errorf("sweep --json entries %v, want %v", reasons, want)
	}
	if s := got.Summary; s.Removed != 2 || s.Kept != 4 || s.Listed != 5 || s.DryRun || s.Grace != "1d" || s.RemovedBy["temp-file"] != 1 {
		t.Errorf("sweep --json summary %+v", s)
	}
	if got.Summary.InboxPruned != 1 {
		t.Errorf("sweep forgot %d inbox records, want 1 (settled 100 days ago)", got.Summary.InboxPruned)
	}
	for _, q := range []string{`SELECT message_id FROM claimcheck_consumed`, `SELECT message_id FROM claimcheck_released`} {
		var left []string
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			left = append(left, id)
		}
		rows.Close()
		if fmt.Sprint(left) != "[new]" {
			t.Errorf("%s after the sweep: %v, want [new]", q, left)
		}
	}
	if sd.exists(sd.a) {
		t.Error("(a) the old orphan survived the sweep")
	}
	if sd.exists(sd.e) {
		t.Error("(e) the old temporary file survived the sweep")
	}
	for _, k := range []string{sd.b, sd.c, sd.d, sd.f} {
		if !sd.exists(k) {
			t.Errorf("%s was deleted", k)
		}
	}

	r = opsOK(t, sd.data, "sweep", "--reveal")
	if !strings.Contains(r.stdout, sd.c) || !strings.Contains(r.stdout, "\nremoved 0 objects") {
		t.Errorf("sweep --reveal after the sweep:\n%s", r.stdout)
	}
}

func TestSweepCommandExpiry(t *testing.T) {
	t.Parallel()
	sd := setupSweepData(t)
	// (d)'s job is pruned and its payload 30 days old: a 22-day expiry takes
	// it; (c) is queued: kept whatever its age.
	r := opsOK(t, sd.data, "sweep", "--expire-payloads", "22d", "--expire-results", "60d")
	t.Logf("claimcheck sweep --expire-payloads 22d --expire-results 60d\n%s", r.stdout)
	if !regexp.MustCompile(`(?m)^removed +expired +.*older than the 22d expiry of payloads/ \(30d[0-9hms]* old\); referenced by job 2: 1 pruned by River`).MatchString(r.stdout) {
		t.Errorf("no expired entry for (d)")
	}
	if sd.exists(sd.d) || sd.exists(sd.a) || !sd.exists(sd.c) {
		t.Errorf("after expiry: (a) %v (c) %v (d) %v; want only (c)", sd.exists(sd.a), sd.exists(sd.c), sd.exists(sd.d))
	}
}

func TestSweepCommandUsageErrors(t *testing.T) {
	t.Parallel()
	sd := setupSweepData(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--grace", "10m"}, "below the minimum of 1h"},
		{[]string{"--grace", "soon"}, "--grace: invalid duration"},
		{[]string{"--expire-payloads", "7d"}, "shorter than the dead-letter retention (14d)"},
		{[]string{"--expire-results", "2h"}, "shorter than the grace period (1d)"},
		{[]string{"--expire-payloads", "-3d"}, "negative"},
		{[]string{"--page-size", "0"}, "--page-size 0"},
		{[]string{"now"}, "expected no arguments"},
	} {
		r := opsRun(t, sd.data, append([]string{"sweep"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("sweep %q: exit %d, stderr %q; want 2 with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	for _, k := range []string{sd.a, sd.b, sd.c, sd.d, sd.e, sd.f} {
		if !sd.exists(k) {
			t.Fatalf("a refused sweep deleted %s", k)
		}
	}
	// A data directory with no job database: refused, never created (an
	// empty registry would make every object an orphan).
	empty := filepath.Join(t.TempDir(), "nothing")
	if r := opsRun(t, empty, "sweep"); r.code != 1 || !strings.Contains(r.stderr, "no claimcheck data") {
		t.Errorf("sweep of an empty data directory: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(empty, "claimcheck.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sweep created a job database: %v", err)
	}
}

// The figure on SeaweedFS: lifecycle apply keeps a pre-existing
// foreign rule, and refuses one that would expire our objects too soon.
// Skipped when CLAIMCHECK_TEST_S3_URL is unset; works in a bucket of its
// own so its rules never touch the shared test bucket.
func TestLifecycleApplyCommandS3(t *testing.T) {
	store, client := s3TestBucket(t, "lifecycle") // doctor_test.go
	ctx := context.Background()
	bucket := mustBucketName(t, store)
	put := func(rules ...types.LifecycleRule) {
		t.Helper()
		if _, err := client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String(bucket),
			LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: rules}}); err != nil {
			t.Fatal(err)
		}
	}
	ruleIDs := func() []string {
		t.Helper()
		out, err := client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range out.Rules {
			ids = append(ids, aws.ToString(r.ID)+fmt.Sprintf("=%dd", aws.ToInt32(r.Expiration.Days)))
		}
		return ids
	}
	foreign := types.LifecycleRule{ID: aws.String("logs-team-expiry"), Status: types.ExpirationStatusEnabled,
		Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(3)}}
	put(foreign)
	data := t.TempDir()

	args := append([]string{"--store", store, "lifecycle", "apply"}, seedFlags...)
	r := opsRun(t, data, append(args, "--dry-run")...)
	if r.code != 0 || !strings.Contains(r.stdout, "dry run") || fmt.Sprint(ruleIDs()) != "[logs-team-expiry=3d]" {
		t.Fatalf("apply --dry-run: exit %d %s %s; rules %v", r.code, r.stdout, r.stderr, ruleIDs())
	}
	r = opsRun(t, data, args...)
	t.Logf("claimcheck lifecycle apply %s\n%s", strings.Join(seedFlags, " "), r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "other rules kept as they were: logs-team-expiry") || !strings.Contains(r.stdout, "written and read back") {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := fmt.Sprint(ruleIDs()); got != "[logs-team-expiry=3d claimcheck-payloads=22d claimcheck-results=22d]" {
		t.Errorf("bucket rules after apply: %s", got)
	}
	if r := opsRun(t, data, args...); r.code != 0 || !strings.Contains(r.stdout, "nothing to change") {
		t.Errorf("second apply: exit %d %s %s", r.code, r.stdout, r.stderr)
	}

	// The common example rule (every object, 21 days) beside ours: refused.
	put(foreign, types.LifecycleRule{ID: aws.String("expire-job-payloads"), Status: types.ExpirationStatusEnabled,
		Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(21)}})
	r = opsRun(t, data, args...)
	t.Logf("with a whole-bucket 21-day rule: exit %d\n%s", r.code, r.stderr)
	if r.code != 2 || !strings.Contains(r.stderr, `rule "expire-job-payloads", on the whole bucket, expires objects after 21 days, but objects under payloads/ must live 22 days`) {
		t.Errorf("apply over a conflicting rule: exit %d, %s", r.code, r.stderr)
	}
	if got := fmt.Sprint(ruleIDs()); got != "[logs-team-expiry=3d expire-job-payloads=21d]" {
		t.Errorf("a refused apply changed the bucket: %s", got)
	}
	if r := opsRun(t, data, "lifecycle", "apply"); r.code != 2 || !strings.Contains(r.stderr, "needs an S3 store") {
		t.Errorf("apply without an s3 store: exit %d %s", r.code, r.stderr)
	}
}

// mustBucketName is the bucket of an s3:// store URL.
func mustBucketName(t *testing.T, store string) string {
	t.Helper()
	u, err := url.Parse(store)
	if err != nil || u.Host == "" {
		t.Fatalf("store URL %q has no bucket", store)
	}
	return u.Host
}
