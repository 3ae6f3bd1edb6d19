package cli

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestStartupBucketChecks (issue 12, must-show 4, on SeaweedFS): a worker
// or a submit pointed at a bucket that does not exist exits 2 at start,
// naming the bucket, with nothing stored; a URL without use_path_style
// against SeaweedFS is refused naming the parameter to add.
func TestStartupBucketChecks(t *testing.T) {
	t.Parallel()
	store, _ := s3TestBucket(t, "startup")
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	missing := *u
	missing.Host = u.Host + "-nope"
	b := setup(t)
	f := filepath.Join(corpusPath, "pixel.pdf")
	for _, args := range [][]string{
		{"--store", missing.String(), "work", "--kind", "pdf-info", "--until-empty"},
		{"--store", missing.String(), "submit", "--kind", "pdf-info", "--tenant", "acme", f},
	} {
		r := b.run("", args...)
		t.Logf("claimcheck %s: exit %d: %s", args[2], r.code, strings.TrimSpace(r.stderr))
		if r.code != 2 || !strings.Contains(r.stderr, `bucket "`+missing.Host+`" does not exist`) || strings.Contains(r.stderr, "missing") {
			t.Errorf("%s on a bucket that does not exist: exit %d, want 2 naming the bucket\nstderr: %s", args[2], r.code, r.stderr)
		}
	}
	if r := b.run("", "jobs", "--json"); r.code == 0 && strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("jobs after refused start-ups: %s", r.stdout)
	}

	virtual := *u
	q := virtual.Query()
	q.Del("use_path_style")
	virtual.RawQuery = q.Encode()
	r := b.run("", "--store", virtual.String(), "work", "--kind", "pdf-info", "--until-empty")
	t.Logf("claimcheck work without use_path_style: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	if r.code == 0 || !strings.Contains(r.stderr, "add use_path_style=true to the store URL") {
		t.Errorf("work without use_path_style: exit %d, want a refusal naming use_path_style=true\nstderr: %s", r.code, r.stderr)
	}

	// The right URL passes the checks and works.
	b.ok("--store", store, "submit", "--kind", "pdf-info", "--tenant", "acme", "--always-offload", f)
	b.ok("--store", store, "work", "--kind", "pdf-info", "--until-empty")
}

// TestStartupRetentionCheck (issue 12, must-show 5 part 1, on SeaweedFS,
// whose S3 gateway keeps lifecycle configurations): with a bucket rule
// expiring payloads/ after 7 days, shorter than the 23 days `claimcheck
// retention` requires by default, submit and work warn on standard error
// and run; with --strict both refuse (exit 2), nothing stored.
func TestStartupRetentionCheck(t *testing.T) {
	t.Parallel()
	store, client := s3TestBucket(t, "retention")
	u, _ := url.Parse(store)
	if _, err := client.PutBucketLifecycleConfiguration(context.Background(), &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String(u.Host),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
			ID: aws.String("payloads-7d"), Status: types.ExpirationStatusEnabled,
			Filter: &types.LifecycleRuleFilter{Prefix: aws.String("payloads/")}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(7)}}}}}); err != nil {
		t.Fatal(err)
	}
	b := setup(t)
	f := filepath.Join(corpusPath, "pixel.pdf")
	want := `rule "payloads-7d", on "payloads/", expires objects after 7 days, but objects under payloads/ must live 23 days`

	r := b.run("", "--store", store, "submit", "--kind", "pdf-info", "--tenant", "acme", "--always-offload", f)
	t.Logf("submit: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	if r.code != 0 || !strings.Contains(r.stderr, "warning: bucket "+u.Host+": "+want) {
		t.Fatalf("submit on a 7-day payload expiry: exit %d, want 0 with a warning\nstderr: %s", r.code, r.stderr)
	}
	r = b.run("", "--store", store, "submit", "--strict", "--kind", "pdf-info", "--tenant", "acme", "--always-offload", filepath.Join(corpusPath, "bash.pdf"))
	t.Logf("submit --strict: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	if r.code != 2 || !strings.Contains(r.stderr, "refusing to start (--strict)") || !strings.Contains(r.stderr, want) {
		t.Fatalf("submit --strict: exit %d, want 2 naming the rule\nstderr: %s", r.code, r.stderr)
	}
	r = b.run("", "--store", store, "work", "--strict", "--kind", "pdf-info", "--until-empty")
	if r.code != 2 || !strings.Contains(r.stderr, "refusing to start (--strict)") {
		t.Fatalf("work --strict: exit %d, want 2\nstderr: %s", r.code, r.stderr)
	}
	if js := b.jobs(); len(js) != 1 || js[0].State == "completed" {
		t.Fatalf("jobs: %+v, want the first submit's only, not worked", js)
	}
	r = b.run("", "--store", store, "work", "--kind", "pdf-info", "--until-empty")
	t.Logf("work: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	if r.code != 0 || !strings.Contains(r.stderr, "warning: bucket "+u.Host+": "+want) || !strings.Contains(r.stdout, "succeeded 1") {
		t.Fatalf("work on a 7-day payload expiry: exit %d, want 0 with a warning\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}
