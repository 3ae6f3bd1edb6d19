package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

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

// rule builds a rule: a prefix filter and an expiry in days.
func rule(id, prefix string, days int) lifecycle.Rule {
	return lifecycle.Rule{ID: id, Prefix: prefix, ExpirationDays: days}
}

func ourRules(t *testing.T, p lifecycle.Policy) []lifecycle.Rule {
	t.Helper()
	rs, err := p.Rules()
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func ids(rs []lifecycle.Rule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// nativeRule is a store's own form of a rule, which Merge must hand back
// untouched.
type nativeRule struct{ fields map[string]string }

func TestMergeKeepsForeignRulesUntouched(t *testing.T) {
	t.Parallel()
	// Foreign rules using every kind of field, and a native form each
	// that a round trip through Rule would lose.
	logs := rule("logs-team", "logs/", 3)
	logs.Transitions = []lifecycle.Transition{{Days: 1, StorageClass: "GLACIER", Archive: true}}
	tagged := lifecycle.Rule{ID: "tagged-scratch", Tagged: true, ExpirationDays: 1}
	noncurrent := lifecycle.Rule{ID: "versions", Other: true, AbortIncompleteDays: 7}
	disabled := rule("old-purge", "", 1)
	disabled.Disabled = true
	noID := rule("", "tmp/", 1)
	longer := rule("archive-payloads", "payloads/", 400)
	existing := []lifecycle.Rule{logs, tagged, noncurrent, disabled, noID, longer}
	for i := range existing {
		existing[i].Native = &nativeRule{fields: map[string]string{"n": fmt.Sprint(i)}}
	}
	snapshot := cloneRules(existing)

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
		if !reflect.DeepEqual(m.Rules[i], existing[i]) || m.Rules[i].Native != existing[i].Native {
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
	existing := []lifecycle.Rule{
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
	if d := m.Rules[2].ExpirationDays; d != 22 {
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
		rule   lifecycle.Rule
		id     string
		ours   string
		reason string
	}{
		{"the common whole-bucket 21 days", seedRule, "expire-job-payloads", "payloads/", "expires objects after 21 days"},
		{"a tenant's payloads for a week", rule("acme-cleanup", "payloads/acme/", 7), "acme-cleanup", "payloads/", "after 7 days"},
		{"a shorter prefix covering ours", rule("p-sweep", "p", 3), "p-sweep", "payloads/", "after 3 days"},
		{"results shorter than theirs", rule("results-month", "results/", 30), "results-month", "results/", "after 30 days"},
		{"an empty filter", lifecycle.Rule{ID: "all", ExpirationDays: 1}, "all", "payloads/", "after 1 day"},
		{"a size filter", lifecycle.Rule{ID: "big", Sized: true, ExpirationDays: 2}, "big", "payloads/", "after 2 days"},
		{"a fixed date", lifecycle.Rule{ID: "eoy", ExpirationDate: date}, "eoy", "payloads/", "fixed date (2027-01-01)"},
		{"an archive transition", lifecycle.Rule{ID: "cold", Prefix: "payloads/", Sized: true, Transitions: []lifecycle.Transition{{Days: 10, StorageClass: "DEEP_ARCHIVE", Archive: true}}}, "cold", "payloads/", "DEEP_ARCHIVE after 10 days"},
		{"a rule without ID", rule("", "", 2), "", "payloads/", "rule #1 (no ID)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			existing := []lifecycle.Rule{tc.rule}
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
	existing := []lifecycle.Rule{rule("a", "payloads/", 1), rule("ok", "logs/", 1), rule("b", "results/", 2)}
	_, err := lifecycle.Merge(existing, ourRules(t, seedPolicy(t)), lifecycle.IDPrefix)
	if err == nil || !strings.Contains(err.Error(), `rule "a"`) || !strings.Contains(err.Error(), `rule "b"`) || strings.Contains(err.Error(), `"ok"`) {
		t.Errorf("Merge error = %v, want both conflicting rules named and no other", err)
	}
}

func TestMergeAcceptsHarmlessOverlaps(t *testing.T) {
	t.Parallel()
	p := seedPolicy(t)
	disabled := rule("off", "", 1)
	disabled.Disabled = true
	tagged := lifecycle.Rule{ID: "tagged", Tagged: true, ExpirationDays: 1}
	ia := lifecycle.Rule{ID: "ia", Transitions: []lifecycle.Transition{{Days: 30, StorageClass: "STANDARD_IA"}, {Days: 1, StorageClass: "GLACIER_IR"}}}
	noncurrent := lifecycle.Rule{ID: "nc", Other: true}
	for _, r := range []lifecycle.Rule{
		disabled, tagged, ia, noncurrent,
		rule("equal", "payloads/", 22),       // exactly ours
		rule("longer", "", 400),              // longer than both of ours
		rule("sibling", "payloads-old/", 1),  // a different folder
		rule("results-ok", "results/x/", 52), // inside ours, equal
	} {
		if _, err := lifecycle.Merge([]lifecycle.Rule{r}, ourRules(t, p), lifecycle.IDPrefix); err != nil {
			t.Errorf("rule %s: %v", r.ID, err)
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
	many := make([]lifecycle.Rule, lifecycle.MaxRules-1)
	for i := range many {
		many[i] = rule("", "logs/", 1)
	}
	if _, err := lifecycle.Merge(many, ours, lifecycle.IDPrefix); !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "limit of 1000") {
		t.Errorf("1001 rules: %v", err)
	}
}

func cloneRules(rs []lifecycle.Rule) []lifecycle.Rule {
	out := make([]lifecycle.Rule, len(rs))
	for i, r := range rs {
		r.Transitions = append([]lifecycle.Transition(nil), r.Transitions...)
		out[i] = r
	}
	return out
}

// fakeManager is a bucket's lifecycle configuration in memory: a fake,
// for the failures a real server does not produce on demand (a rule lost
// on the way). stores/s3store's tests run Apply against S3 itself.
type fakeManager struct {
	rules  []lifecycle.Rule // nil: no configuration
	native any
	gets   int
	puts   int
	dropOn string // drop the rule with this ID on put, as a lossy server would
}

func (f *fakeManager) LifecycleBucket() string { return "b" }

func (f *fakeManager) ReadLifecycle(context.Context, string) (*lifecycle.Configuration, error) {
	f.gets++
	if f.rules == nil {
		return &lifecycle.Configuration{}, nil
	}
	return &lifecycle.Configuration{Rules: cloneRules(f.rules), Found: true, Native: f.native}, nil
}

func (f *fakeManager) WriteLifecycle(_ context.Context, c *lifecycle.Configuration, _ string) error {
	f.puts++
	f.rules = []lifecycle.Rule{}
	for _, r := range c.Rules {
		if r.ID != f.dropOn || f.dropOn == "" {
			f.rules = append(f.rules, r)
		}
	}
	f.native = c.Native
	return nil
}

func TestApplyWithFakeManager(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := seedPolicy(t)

	t.Run("no configuration yet", func(t *testing.T) {
		f := &fakeManager{}
		res, err := lifecycle.Apply(ctx, f, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.HadConfiguration || !res.Written || f.puts != 1 || res.Bucket != "b" || !reflect.DeepEqual(ids(f.rules), []string{"claimcheck-payloads", "claimcheck-results"}) {
			t.Errorf("had %v written %v puts %d bucket %q rules %q", res.HadConfiguration, res.Written, f.puts, res.Bucket, ids(f.rules))
		}
	})
	t.Run("keeps foreign rules and the configuration's settings", func(t *testing.T) {
		f := &fakeManager{rules: []lifecycle.Rule{rule("logs-team", "logs/", 3)}, native: "varies_by_storage_class"}
		res, err := lifecycle.Apply(ctx, f, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(f.rules), []string{"logs-team", "claimcheck-payloads", "claimcheck-results"}) || !reflect.DeepEqual(res.Foreign, []string{"logs-team"}) {
			t.Errorf("rules %q, foreign %q", ids(f.rules), res.Foreign)
		}
		if f.native != "varies_by_storage_class" {
			t.Errorf("the configuration's native settings became %v", f.native)
		}
		// Again: nothing to change, nothing written.
		res, err = lifecycle.Apply(ctx, f, p, nil)
		if err != nil || res.Written || f.puts != 1 {
			t.Errorf("second apply: %v, written %v, puts %d", err, res.Written, f.puts)
		}
	})
	t.Run("dry run writes nothing", func(t *testing.T) {
		f := &fakeManager{}
		res, err := lifecycle.Apply(ctx, f, p, &lifecycle.ApplyOptions{DryRun: true})
		if err != nil || res.Written || f.puts != 0 || len(res.Added) != 2 {
			t.Errorf("%v written %v puts %d added %q", err, res.Written, f.puts, res.Added)
		}
	})
	t.Run("a conflict writes nothing", func(t *testing.T) {
		f := &fakeManager{rules: []lifecycle.Rule{rule("expire-job-payloads", "", 21)}}
		_, err := lifecycle.Apply(ctx, f, p, nil)
		if !errors.Is(err, lifecycle.ErrConflict) || f.puts != 0 {
			t.Errorf("err %v, puts %d", err, f.puts)
		}
	})
	t.Run("a rule lost on the way is reported", func(t *testing.T) {
		f := &fakeManager{rules: []lifecycle.Rule{rule("logs-team", "logs/", 3)}, dropOn: "logs-team"}
		_, err := lifecycle.Apply(ctx, f, p, &lifecycle.ApplyOptions{VerifyTimeout: time.Millisecond})
		if !errors.Is(err, lifecycle.ErrNotVerified) || !strings.Contains(err.Error(), "logs-team") {
			t.Errorf("err %v, want ErrNotVerified naming logs-team", err)
		}
	})
}

// TestManagerOfStoreWithoutLifecycle: a file store's driver manages no
// lifecycle configuration.
func TestManagerOfStoreWithoutLifecycle(t *testing.T) {
	t.Parallel()
	st, err := claimcheck.OpenStore(context.Background(), "mem://", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if m, err := lifecycle.ManagerOf(st); m != nil || !errors.Is(err, lifecycle.ErrNoManager) || !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("ManagerOf(mem://) = %v, %v; want ErrNoManager, ErrConfig", m, err)
	}
}

// TestNamespacesKeepEachOthersRules: the root's and two namespaces' rules
// live side by side in one bucket's configuration; merging one never
// replaces or removes another's, and each covers only its own prefixes.
func TestNamespacesKeepEachOthersRules(t *testing.T) {
	t.Parallel()
	root := seedPolicy(t)
	a, ab := root.InNamespace("a/"), root.InNamespace("a/b/")
	var rules []lifecycle.Rule
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
	if p := rules[4].Prefix; p != "a/b/payloads/" {
		t.Errorf("namespace a/b/ payload rule prefix %q", p)
	}
}
