package s3store_test

// lifecycle.Apply through the S3 store's lifecycle.Manager against a real
// S3 server (SeaweedFS in CI: scripts/seaweedfs.sh), skipped when
// CLAIMCHECK_TEST_S3_URL is unset. Each test works in a bucket of its own,
// created and removed here, so the lifecycle rules it installs never touch
// the shared test bucket's objects.

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/lifecycle"
	"github.com/claimcheck/claimcheck/stores/s3store/s3test"
)

// seedPolicy: 22 days for payloads, results 30 days longer.
var seedPolicy = lifecycle.Policy{PayloadDays: 22, ResultDays: 52}

// lifecycleBucket returns a fresh, empty bucket on the server in
// $CLAIMCHECK_TEST_S3_URL, removed when t ends, and the lifecycle.Manager
// of a store opened on it.
func lifecycleBucket(t *testing.T) (*s3test.Bucket, lifecycle.Manager) {
	t.Helper()
	b := s3test.New(t, "lifecycle")
	st, err := claimcheck.OpenStore(t.Context(), b.URL, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, err := lifecycle.ManagerOf(st)
	if err != nil {
		t.Fatalf("ManagerOf(s3 store) = %v", err)
	}
	if m.LifecycleBucket() != b.Name {
		t.Errorf("manager's bucket %q, want %q", m.LifecycleBucket(), b.Name)
	}
	return b, m
}

func s3Rule(id, prefix string, days int32) types.LifecycleRule {
	return types.LifecycleRule{ID: aws.String(id), Status: types.ExpirationStatusEnabled,
		Filter: &types.LifecycleRuleFilter{Prefix: aws.String(prefix)}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(days)}}
}

func getRules(t *testing.T, c *s3.Client, bucket string) []types.LifecycleRule {
	t.Helper()
	out, err := c.GetBucketLifecycleConfiguration(context.Background(), &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("get lifecycle configuration: %v", err)
	}
	return out.Rules
}

func s3IDs(rs []types.LifecycleRule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, aws.ToString(r.ID))
	}
	return out
}

// The figure: apply keeps a pre-existing foreign rule.
func TestApplyS3KeepsForeignRule(t *testing.T) {
	b, m := lifecycleBucket(t)
	client, bucket := b.Client, b.Name
	ctx := context.Background()
	p := seedPolicy

	// A bucket with no configuration at all.
	res, err := lifecycle.Apply(ctx, m, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.HadConfiguration || !res.Written || res.Bucket != bucket {
		t.Errorf("fresh bucket: had %v, written %v, bucket %q", res.HadConfiguration, res.Written, res.Bucket)
	}

	// Another team's rule appears, installed behind our back.
	foreign := s3Rule("logs-team-expiry", "logs/", 3)
	foreign.AbortIncompleteMultipartUpload = &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(2)}
	_, err = client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket:                 aws.String(bucket),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: append([]types.LifecycleRule{foreign}, getRules(t, client, bucket)...)},
	})
	if err != nil {
		t.Fatal(err)
	}
	before := getRules(t, client, bucket)

	// Apply with a longer replay margin: ours are replaced, theirs kept.
	p.PayloadDays, p.ResultDays = 30, 60
	res, err = lifecycle.Apply(ctx, m, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Written || !reflect.DeepEqual(res.Foreign, []string{"logs-team-expiry"}) || !reflect.DeepEqual(res.Replaced, []string{"claimcheck-payloads", "claimcheck-results"}) {
		t.Errorf("written %v, foreign %q, replaced %q", res.Written, res.Foreign, res.Replaced)
	}
	after := getRules(t, client, bucket)
	if got, want := s3IDs(after), []string{"logs-team-expiry", "claimcheck-payloads", "claimcheck-results"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rules on the bucket: %q, want %q", got, want)
	}
	if !reflect.DeepEqual(after[0], before[0]) {
		t.Errorf("the foreign rule changed:\nbefore %+v\nafter  %+v", before[0], after[0])
	}
	if d := aws.ToInt32(after[1].Expiration.Days); d != 30 {
		t.Errorf("payload rule expires after %d days, want 30", d)
	}
	t.Logf("bucket %s rules after apply: %q (foreign kept: %q)", bucket, s3IDs(after), res.Foreign)

	// Applying the same policy again writes nothing.
	res, err = lifecycle.Apply(ctx, m, p, nil)
	if err != nil || res.Written {
		t.Errorf("second apply: %v, written %v", err, res.Written)
	}
}

func TestApplyS3RefusesConflict(t *testing.T) {
	b, m := lifecycleBucket(t)
	ctx := context.Background()
	// The common example rule: every object in the bucket after 21 days.
	_, err := b.Client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket:                 aws.String(b.Name),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{s3Rule("expire-job-payloads", "", 21)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = lifecycle.Apply(ctx, m, seedPolicy, nil)
	var ce *lifecycle.ConflictError
	if !errors.As(err, &ce) || ce.RuleID != "expire-job-payloads" {
		t.Fatalf("Apply = %v, want a conflict naming expire-job-payloads", err)
	}
	t.Log(err)
	if got := s3IDs(getRules(t, b.Client, b.Name)); !reflect.DeepEqual(got, []string{"expire-job-payloads"}) {
		t.Errorf("after a refused apply the bucket has %q", got)
	}
}
