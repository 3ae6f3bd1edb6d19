package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/lifecycle"
)

const day = 24 * time.Hour

// seedPolicy is the example: 22 days for payloads, results 30 days
// longer.
func seedPolicy(t *testing.T) lifecycle.Policy {
	t.Helper()
	r, err := claimcheck.ComputeRetention(claimcheck.RetentionInputs{
		Backlog: 4 * time.Hour, RetryWindow: time.Hour, DeadLetter: 14 * day, ReplayMargin: 7 * day, ResultsExtra: 30 * day,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := lifecycle.FromRetention(r)
	if p.PayloadDays != 22 || p.ResultDays != 52 {
		t.Fatalf("FromRetention = %+v, want 22 and 52 days", p)
	}
	return p
}

func TestS3JSON(t *testing.T) {
	t.Parallel()
	b, err := seedPolicy(t).S3JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Rules []struct {
			ID                             string
			Filter                         struct{ Prefix *string }
			Status                         string
			Expiration                     struct{ Days int }
			AbortIncompleteMultipartUpload struct{ DaysAfterInitiation int }
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	want := []struct {
		id, prefix string
		days       int
	}{{"claimcheck-payloads", "payloads/", 22}, {"claimcheck-results", "results/", 52}}
	if len(got.Rules) != len(want) {
		t.Fatalf("%d rules, want %d:\n%s", len(got.Rules), len(want), b)
	}
	for i, w := range want {
		r := got.Rules[i]
		if r.ID != w.id || r.Filter.Prefix == nil || *r.Filter.Prefix != w.prefix || r.Status != "Enabled" ||
			r.Expiration.Days != w.days || r.AbortIncompleteMultipartUpload.DaysAfterInitiation != 1 {
			t.Errorf("rule %d = %+v, want %s on %s expiring after %d days, aborting uploads after 1", i, r, w.id, w.prefix, w.days)
		}
	}
	t.Logf("\n%s", b)
}

func TestGCSJSON(t *testing.T) {
	t.Parallel()
	b, err := seedPolicy(t).GCSJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
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
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	type rule struct {
		typ    string
		age    int
		prefix string
	}
	var rules []rule
	for _, r := range got.Lifecycle.Rule {
		rules = append(rules, rule{r.Action.Type, r.Condition.Age, strings.Join(r.Condition.MatchesPrefix, ",")})
	}
	want := []rule{{"Delete", 22, "payloads/"}, {"Delete", 52, "results/"}, {"AbortIncompleteMultipartUpload", 1, ""}}
	if !reflect.DeepEqual(rules, want) {
		t.Errorf("GCS rules = %+v, want %+v\n%s", rules, want, b)
	}
	if !strings.Contains(string(b), `"matchesPrefix"`) || !strings.Contains(string(b), `"lifecycle"`) {
		t.Errorf("GCS JSON lacks lifecycle/matchesPrefix:\n%s", b)
	}
	t.Logf("\n%s", b)
}

func TestPolicyRefusesBadSettings(t *testing.T) {
	t.Parallel()
	for _, p := range []lifecycle.Policy{
		{PayloadDays: 0, ResultDays: 10},
		{PayloadDays: 10, ResultDays: -1},
		{PayloadDays: 10, ResultDays: 10, AbortIncompleteDays: -1},
		{PayloadDays: 10, ResultDays: 10, PayloadPrefix: "payloads"},
		{PayloadDays: 10, ResultDays: 10, PayloadPrefix: "data/", ResultPrefix: "data/results/"},
	} {
		if _, err := p.S3JSON(); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("%+v: S3JSON error %v, want ErrConfig", p, err)
		}
		if _, err := p.GCSJSON(); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("%+v: GCSJSON error %v, want ErrConfig", p, err)
		}
	}
}

// rule builds an S3 rule: a prefix filter and an expiry in days.
func rule(id, prefix string, days int32) types.LifecycleRule {
	r := types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String(prefix)}}
	if id != "" {
		r.ID = aws.String(id)
	}
	if days > 0 {
		r.Expiration = &types.LifecycleExpiration{Days: aws.Int32(days)}
	}
	return r
}

func ourRules(t *testing.T, p lifecycle.Policy) []types.LifecycleRule {
	t.Helper()
	rs, err := p.S3Rules()
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func ids(rs []types.LifecycleRule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, aws.ToString(r.ID))
	}
	return out
}

func TestMergeKeepsForeignRulesUntouched(t *testing.T) {
	t.Parallel()
	// Foreign rules using every kind of field, which a round trip through
	// a narrower type would lose.
	logs := rule("logs-team", "logs/", 3)
	logs.Transitions = []types.Transition{{Days: aws.Int32(1), StorageClass: types.TransitionStorageClassGlacier}}
	tagged := types.LifecycleRule{ID: aws.String("tagged-scratch"), Status: types.ExpirationStatusEnabled,
		Filter:     &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{Prefix: aws.String(""), Tags: []types.Tag{{Key: aws.String("scratch"), Value: aws.String("1")}}}},
		Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}}
	noncurrent := types.LifecycleRule{ID: aws.String("versions"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{},
		NoncurrentVersionExpiration:    &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(2)},
		AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(7)}}
	disabled := rule("old-purge", "", 1)
	disabled.Status = types.ExpirationStatusDisabled
	noID := rule("", "tmp/", 1)
	longer := rule("archive-payloads", "payloads/", 400)
	existing := []types.LifecycleRule{logs, tagged, noncurrent, disabled, noID, longer}
	snapshot := cloneRules(t, existing)

	m, err := lifecycle.Merge(existing, ourRules(t, seedPolicy(t)), lifecycle.IDPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(existing, snapshot) {
		t.Error("Merge modified its input")
	}
	if got, want := ids(m.Rules), []string{"logs-team", "tagged-scratch", "versions", "old-purge", "", "archive-payloads", "claimcheck-payloads", "claimcheck-results"}; !reflect.DeepEqual(got, want) {
		t.Errorf("merged IDs = %q, want %q", got, want)
	}
	for i := range existing {
		if !reflect.DeepEqual(m.Rules[i], existing[i]) {
			t.Errorf("foreign rule %d changed:\n got %+v\nwant %+v", i, m.Rules[i], existing[i])
		}
	}
	if want := []string{"logs-team", "tagged-scratch", "versions", "old-purge", "#5", "archive-payloads"}; !reflect.DeepEqual(m.Foreign, want) {
		t.Errorf("Foreign = %q, want %q", m.Foreign, want)
	}
	if !reflect.DeepEqual(m.Added, []string{"claimcheck-payloads", "claimcheck-results"}) || len(m.Replaced)+len(m.Removed)+len(m.Unchanged) != 0 || !m.Changed() {
		t.Errorf("Added %q Replaced %q Removed %q Unchanged %q", m.Added, m.Replaced, m.Removed, m.Unchanged)
	}
}

func TestMergeReplacesOnlyOurRules(t *testing.T) {
	t.Parallel()
	p := seedPolicy(t)
	existing := []types.LifecycleRule{
		rule("claimcheck-payloads", "payloads/", 7), // ours, too short: replaced
		rule("logs-team", "logs/", 3),
		rule("claimcheck-tmp", "tmp/", 1), // ours, no longer in the policy: removed
		rule("claimcheckers", "x/", 5),    // not our prefix "claimcheck-"
	}
	m, err := lifecycle.Merge(existing, ourRules(t, p), lifecycle.IDPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(m.Rules), []string{"logs-team", "claimcheckers", "claimcheck-payloads", "claimcheck-results"}; !reflect.DeepEqual(got, want) {
		t.Errorf("merged IDs = %q, want %q", got, want)
	}
	if !reflect.DeepEqual(m.Replaced, []string{"claimcheck-payloads"}) || !reflect.DeepEqual(m.Added, []string{"claimcheck-results"}) ||
		!reflect.DeepEqual(m.Removed, []string{"claimcheck-tmp"}) {
		t.Errorf("Replaced %q Added %q Removed %q", m.Replaced, m.Added, m.Removed)
	}
	if d := aws.ToInt32(m.Rules[2].Expiration.Days); d != 22 {
		t.Errorf("our payload rule expires after %d days, want 22", d)
	}

	// Merging again over the result changes nothing.
	again, err := lifecycle.Merge(m.Rules, ourRules(t, p), lifecycle.IDPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed() || !reflect.DeepEqual(again.Unchanged, []string{"claimcheck-payloads", "claimcheck-results"}) {
		t.Errorf("second merge: Changed %v, Unchanged %q Added %q Replaced %q Removed %q", again.Changed(), again.Unchanged, again.Added, again.Replaced, again.Removed)
	}
	if !reflect.DeepEqual(again.Rules, m.Rules) {
		t.Error("second merge reordered or changed rules")
	}
}

func TestMergeRefusesShorterForeignExpiry(t *testing.T) {
	t.Parallel()
	p := seedPolicy(t) // payloads 22 days, results 52
	date := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	seedRule := rule("expire-job-payloads", "", 21) // the common example rule: empty prefix
	for _, tc := range []struct {
		name   string
		rule   types.LifecycleRule
		id     string
		ours   string
		reason string
	}{
		{"the common whole-bucket 21 days", seedRule, "expire-job-payloads", "payloads/", "expires objects after 21 days"},
		{"a tenant's payloads for a week", rule("acme-cleanup", "payloads/acme/", 7), "acme-cleanup", "payloads/", "after 7 days"},
		{"a shorter prefix covering ours", rule("p-sweep", "p", 3), "p-sweep", "payloads/", "after 3 days"},
		{"results shorter than theirs", rule("results-month", "results/", 30), "results-month", "results/", "after 30 days"},
		{"an empty filter", types.LifecycleRule{ID: aws.String("all"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}}, "all", "payloads/", "after 1 day"},
		{"a size filter", types.LifecycleRule{ID: aws.String("big"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{ObjectSizeGreaterThan: aws.Int64(1 << 20)}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(2)}}, "big", "payloads/", "after 2 days"},
		//lint:ignore SA1019 the test writes a rule as older tools did, with the top-level Prefix
		{"the deprecated top-level prefix", types.LifecycleRule{ID: aws.String("legacy"), Status: types.ExpirationStatusEnabled, Prefix: aws.String("results/"), Expiration: &types.LifecycleExpiration{Days: aws.Int32(5)}}, "legacy", "results/", "after 5 days"},
		{"a fixed date", types.LifecycleRule{ID: aws.String("eoy"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")}, Expiration: &types.LifecycleExpiration{Date: &date}}, "eoy", "payloads/", "fixed date (2027-01-01)"},
		{"an archive transition", types.LifecycleRule{ID: aws.String("cold"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{Prefix: aws.String("payloads/"), ObjectSizeGreaterThan: aws.Int64(0)}}, Transitions: []types.Transition{{Days: aws.Int32(10), StorageClass: types.TransitionStorageClassDeepArchive}}}, "cold", "payloads/", "DEEP_ARCHIVE after 10 days"},
		{"a rule without ID", rule("", "", 2), "", "payloads/", "rule #1 (no ID)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			existing := []types.LifecycleRule{tc.rule}
			_, err := lifecycle.Merge(existing, ourRules(t, p), lifecycle.IDPrefix)
			var ce *lifecycle.ConflictError
			if !errors.As(err, &ce) || !errors.Is(err, lifecycle.ErrConflict) || !errors.Is(err, claimcheck.ErrConfig) {
				t.Fatalf("Merge = %v, want a ConflictError", err)
			}
			if ce.RuleID != tc.id || ce.Ours != tc.ours {
				t.Errorf("conflict names rule %q on our %s, want %q on %s", ce.RuleID, ce.Ours, tc.id, tc.ours)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q lacks %q", err, tc.reason)
			}
			t.Log(err)
		})
	}
}

func TestMergeNamesEveryConflict(t *testing.T) {
	t.Parallel()
	existing := []types.LifecycleRule{rule("a", "payloads/", 1), rule("ok", "logs/", 1), rule("b", "results/", 2)}
	_, err := lifecycle.Merge(existing, ourRules(t, seedPolicy(t)), lifecycle.IDPrefix)
	if err == nil || !strings.Contains(err.Error(), `rule "a"`) || !strings.Contains(err.Error(), `rule "b"`) || strings.Contains(err.Error(), `"ok"`) {
		t.Errorf("Merge error = %v, want both conflicting rules named and no other", err)
	}
}

func TestMergeAcceptsHarmlessOverlaps(t *testing.T) {
	t.Parallel()
	p := seedPolicy(t)
	disabled := rule("off", "", 1)
	disabled.Status = types.ExpirationStatusDisabled
	tagged := types.LifecycleRule{ID: aws.String("tagged"), Status: types.ExpirationStatusEnabled,
		Filter: &types.LifecycleRuleFilter{Tag: &types.Tag{Key: aws.String("tmp"), Value: aws.String("1")}}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}}
	ia := types.LifecycleRule{ID: aws.String("ia"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
		Transitions: []types.Transition{{Days: aws.Int32(30), StorageClass: types.TransitionStorageClassStandardIa}, {Days: aws.Int32(1), StorageClass: types.TransitionStorageClassGlacierIr}}}
	noncurrent := types.LifecycleRule{ID: aws.String("nc"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
		NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}}
	for _, r := range []types.LifecycleRule{
		disabled, tagged, ia, noncurrent,
		rule("equal", "payloads/", 22),       // exactly ours
		rule("longer", "", 400),              // longer than both of ours
		rule("sibling", "payloads-old/", 1),  // a different folder
		rule("results-ok", "results/x/", 52), // inside ours, equal
	} {
		if _, err := lifecycle.Merge([]types.LifecycleRule{r}, ourRules(t, p), lifecycle.IDPrefix); err != nil {
			t.Errorf("rule %s: %v", aws.ToString(r.ID), err)
		}
	}
}

func TestMergeRefusesBadInput(t *testing.T) {
	t.Parallel()
	ours := ourRules(t, seedPolicy(t))
	if _, err := lifecycle.Merge(nil, ours, ""); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("empty ID prefix: %v", err)
	}
	if _, err := lifecycle.Merge(nil, append(ours, rule("mine", "x/", 1)), lifecycle.IDPrefix); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("our rule without our prefix: %v", err)
	}
	if _, err := lifecycle.Merge(nil, append(ours, ours[0]), lifecycle.IDPrefix); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("duplicate ID among ours: %v", err)
	}
	many := make([]types.LifecycleRule, lifecycle.MaxRules-1)
	for i := range many {
		many[i] = rule("", "logs/", 1)
	}
	if _, err := lifecycle.Merge(many, ours, lifecycle.IDPrefix); !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "limit of 1000") {
		t.Errorf("1001 rules: %v", err)
	}
}

func cloneRules(t *testing.T, rs []types.LifecycleRule) []types.LifecycleRule {
	t.Helper()
	out := make([]types.LifecycleRule, len(rs))
	for i, r := range rs {
		c := r
		if r.Filter != nil {
			f := *r.Filter
			c.Filter = &f
		}
		c.Transitions = append([]types.Transition(nil), r.Transitions...)
		out[i] = c
	}
	return out
}

// fakeS3 is a bucket's lifecycle configuration in memory.
type fakeS3 struct {
	rules   []types.LifecycleRule
	minSize types.TransitionDefaultMinimumObjectSize
	gets    int
	puts    int
	dropOn  string // drop the rule with this ID on put, as a lossy server would
}

func (f *fakeS3) GetBucketLifecycleConfiguration(ctx context.Context, in *s3.GetBucketLifecycleConfigurationInput, _ ...func(*s3.Options)) (*s3.GetBucketLifecycleConfigurationOutput, error) {
	f.gets++
	if f.rules == nil {
		return nil, &smithy.GenericAPIError{Code: "NoSuchLifecycleConfiguration", Message: "The lifecycle configuration does not exist"}
	}
	return &s3.GetBucketLifecycleConfigurationOutput{Rules: cloneRulesNoT(f.rules), TransitionDefaultMinimumObjectSize: f.minSize}, nil
}

func (f *fakeS3) PutBucketLifecycleConfiguration(ctx context.Context, in *s3.PutBucketLifecycleConfigurationInput, _ ...func(*s3.Options)) (*s3.PutBucketLifecycleConfigurationOutput, error) {
	f.puts++
	f.rules = nil
	for _, r := range in.LifecycleConfiguration.Rules {
		if aws.ToString(r.ID) != f.dropOn || f.dropOn == "" {
			f.rules = append(f.rules, r)
		}
	}
	if f.rules == nil {
		f.rules = []types.LifecycleRule{}
	}
	f.minSize = in.TransitionDefaultMinimumObjectSize
	return &s3.PutBucketLifecycleConfigurationOutput{}, nil
}

func cloneRulesNoT(rs []types.LifecycleRule) []types.LifecycleRule {
	return append([]types.LifecycleRule(nil), rs...)
}

func TestApplyWithFakeClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := seedPolicy(t)

	t.Run("no configuration yet", func(t *testing.T) {
		f := &fakeS3{}
		res, err := lifecycle.Apply(ctx, f, "b", p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.HadConfiguration || !res.Written || f.puts != 1 || !reflect.DeepEqual(ids(f.rules), []string{"claimcheck-payloads", "claimcheck-results"}) {
			t.Errorf("had %v written %v puts %d rules %q", res.HadConfiguration, res.Written, f.puts, ids(f.rules))
		}
	})
	t.Run("keeps foreign rules and the minimum object size", func(t *testing.T) {
		f := &fakeS3{rules: []types.LifecycleRule{rule("logs-team", "logs/", 3)}, minSize: types.TransitionDefaultMinimumObjectSizeVariesByStorageClass}
		res, err := lifecycle.Apply(ctx, f, "b", p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(f.rules), []string{"logs-team", "claimcheck-payloads", "claimcheck-results"}) || !reflect.DeepEqual(res.Foreign, []string{"logs-team"}) {
			t.Errorf("rules %q, foreign %q", ids(f.rules), res.Foreign)
		}
		if f.minSize != types.TransitionDefaultMinimumObjectSizeVariesByStorageClass {
			t.Errorf("TransitionDefaultMinimumObjectSize became %q", f.minSize)
		}
		// Again: nothing to change, nothing written.
		res, err = lifecycle.Apply(ctx, f, "b", p, nil)
		if err != nil || res.Written || f.puts != 1 {
			t.Errorf("second apply: %v, written %v, puts %d", err, res.Written, f.puts)
		}
	})
	t.Run("dry run writes nothing", func(t *testing.T) {
		f := &fakeS3{}
		res, err := lifecycle.Apply(ctx, f, "b", p, &lifecycle.ApplyOptions{DryRun: true})
		if err != nil || res.Written || f.puts != 0 || len(res.Added) != 2 {
			t.Errorf("%v written %v puts %d added %q", err, res.Written, f.puts, res.Added)
		}
	})
	t.Run("a conflict writes nothing", func(t *testing.T) {
		f := &fakeS3{rules: []types.LifecycleRule{rule("expire-job-payloads", "", 21)}}
		_, err := lifecycle.Apply(ctx, f, "b", p, nil)
		if !errors.Is(err, lifecycle.ErrConflict) || f.puts != 0 {
			t.Errorf("err %v, puts %d", err, f.puts)
		}
	})
	t.Run("a rule lost on the way is reported", func(t *testing.T) {
		f := &fakeS3{rules: []types.LifecycleRule{rule("logs-team", "logs/", 3)}, dropOn: "logs-team"}
		_, err := lifecycle.Apply(ctx, f, "b", p, &lifecycle.ApplyOptions{VerifyTimeout: time.Millisecond})
		if !errors.Is(err, lifecycle.ErrNotVerified) || !strings.Contains(err.Error(), "logs-team") {
			t.Errorf("err %v, want ErrNotVerified naming logs-team", err)
		}
	})
}

// TestNamespacesKeepEachOthersRules: the root's and two namespaces' rules
// live side by side in one bucket's configuration; merging one never
// replaces or removes another's, and each covers only its own prefixes.
func TestNamespacesKeepEachOthersRules(t *testing.T) {
	t.Parallel()
	root := seedPolicy(t)
	a, ab := root.InNamespace("a/"), root.InNamespace("a/b/")
	var rules []types.LifecycleRule
	for _, p := range []lifecycle.Policy{root, a, ab} {
		idPrefix := p.IDPrefix
		if idPrefix == "" {
			idPrefix = lifecycle.IDPrefix
		}
		m, err := lifecycle.Merge(rules, ourRules(t, p), idPrefix)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Removed) != 0 || len(m.Replaced) != 0 {
			t.Errorf("merging %s removed %q, replaced %q", p.PayloadPrefix, m.Removed, m.Replaced)
		}
		rules = m.Rules
	}
	if got, want := ids(rules), []string{"claimcheck-payloads", "claimcheck-results", "claimcheck@a/#payloads", "claimcheck@a/#results", "claimcheck@a/b/#payloads", "claimcheck@a/b/#results"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rules %q, want %q", got, want)
	}
	if p := aws.ToString(rules[4].Filter.Prefix); p != "a/b/payloads/" {
		t.Errorf("namespace a/b/ payload rule prefix %q", p)
	}
}
