// Package lifecycle generates the bucket lifecycle policy that enforces
// claimcheck's retention (docs/invariants.md, invariant 5) and installs it on a
// bucket (S3) without disturbing other teams' rules.
//
// The policy has one expiry per prefix — payloads/ and results/, each at
// least its minimum lifetime from claimcheck.ComputeRetention — and aborts
// incomplete multipart uploads after a day, so a crashed upload's parts do
// not sit billed forever. It is written as S3 JSON (the
// PutBucketLifecycleConfiguration shape, for `aws s3api
// put-bucket-lifecycle-configuration --lifecycle-configuration file://…`)
// or as GCS JSON (for `gcloud storage buckets update --lifecycle-file=…`).
//
// A bucket has one lifecycle configuration, and a PUT replaces it whole:
// writing ours alone would silently delete every other team's rules. Merge
// and Apply therefore read the existing rules, replace only ours (rules
// whose ID starts with IDPrefix), keep every other rule untouched, and
// refuse when another rule would expire our objects sooner than our
// retention allows. They work on store-neutral Rules through the store
// driver's Manager (ManagerOf: stores/s3store provides one), so this
// package imports no storage SDK. The file store has no lifecycle engine:
// package sweep enforces the same expiry there.
package lifecycle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/claimcheck/claimcheck"
)

// IDPrefix starts the ID of every rule claimcheck writes; Merge replaces
// exactly the rules whose ID starts with it.
const IDPrefix = "claimcheck-"

// DefaultAbortIncompleteDays is how long an incomplete multipart upload may
// sit before the store aborts it and deletes its parts.
const DefaultAbortIncompleteDays = 1

// MaxRules is S3's limit on rules per bucket lifecycle configuration.
const MaxRules = 1000

// Policy is claimcheck's part of a bucket's lifecycle configuration.
type Policy struct {
	// PayloadDays expires objects under claimcheck.PrefixPayloads this many
	// days after they are written. At least 1.
	PayloadDays int
	// ResultDays expires objects under claimcheck.PrefixResults. At least 1.
	ResultDays int
	// AbortIncompleteDays aborts multipart uploads not completed this many
	// days after they began. 0 means DefaultAbortIncompleteDays.
	AbortIncompleteDays int
	// IDPrefix starts our rules' IDs. Empty means IDPrefix; set another to
	// run two independent claimcheck deployments in one bucket under
	// different key prefixes (Prefixes).
	IDPrefix string
	// PayloadPrefix and ResultPrefix default to claimcheck.PrefixPayloads
	// and claimcheck.PrefixResults.
	PayloadPrefix, ResultPrefix string
}

// FromRetention is the policy whose expiry is exactly the minimum lifetime
// r computes: r.PayloadDays for payloads, r.ResultDays for results.
func FromRetention(r *claimcheck.Retention) Policy {
	return Policy{PayloadDays: r.PayloadDays, ResultDays: r.ResultDays}
}

// InNamespace is p for a store namespace ns (claimcheck.Store.Namespace,
// ending in '/'; "" is the bucket's root, for which p is returned as it
// is): its rules cover ns+"payloads/" and ns+"results/", and their IDs
// start with "claimcheck@"+ns+"#", so that Merge for one namespace (or for
// the root, whose IDs start with IDPrefix) never replaces another's rules.
func (p Policy) InNamespace(ns string) Policy {
	if ns == "" {
		return p
	}
	p = p.withDefaults()
	if p.IDPrefix == IDPrefix {
		p.IDPrefix = "claimcheck@" + ns + "#"
	}
	p.PayloadPrefix, p.ResultPrefix = ns+p.PayloadPrefix, ns+p.ResultPrefix
	return p
}

// Rule is one rule of a bucket's lifecycle configuration in a
// store-neutral form: one of ours (Policy.Rules), or one a Manager read
// from the bucket, ours or another team's. A Manager turns each rule it
// reads into a Rule and keeps the service's own form in Native, so a rule
// Merge keeps is written back exactly as it was read, whatever fields it
// uses that Rule does not name.
type Rule struct {
	ID string `json:"id"`
	// Prefix is the key prefix the rule applies to ("" for the whole
	// bucket).
	Prefix string `json:"prefix"`
	// ExpirationDays deletes objects this many days after they are written
	// (0: the rule expires nothing after a number of days).
	ExpirationDays int `json:"expiration_days"`
	// AbortIncompleteDays aborts multipart uploads under Prefix this many
	// days after they began (0: none).
	AbortIncompleteDays int `json:"abort_incomplete_days"`

	// Disabled is a rule the bucket keeps but does not apply.
	Disabled bool `json:"-"`
	// Tagged is a rule that also requires object tags (claimcheck never
	// tags objects, so it never applies to claimcheck's); Sized one that
	// also requires an object size range (it applies to some objects under
	// Prefix, not all).
	Tagged, Sized bool `json:"-"`
	// ExpirationDate deletes objects on a fixed date (zero: none).
	ExpirationDate time.Time `json:"-"`
	// Transitions move objects to other storage classes.
	Transitions []Transition `json:"-"`
	// Other is a rule that also does what Rule does not describe and
	// claimcheck's rules never do (S3: act on noncurrent versions or
	// delete markers).
	Other bool `json:"-"`
	// Native is the rule as the Manager read it (S3: a
	// types.LifecycleRule), nil for ours; a Manager writes it back as it is.
	Native any `json:"-"`
}

// Transition is one storage-class transition of a Rule.
type Transition struct {
	// Days and Date say when: this many days after an object is written,
	// or on a fixed date (zero: not by date).
	Days int
	Date time.Time
	// StorageClass is the service's name of the class (S3: GLACIER,
	// STANDARD_IA, ...).
	StorageClass string
	// Archive is a class a claim cannot read from until the object is
	// restored (S3: GLACIER, DEEP_ARCHIVE; not GLACIER_IR).
	Archive bool
}

// Rules validates p and returns our rules: one for payloads, one for
// results. Errors: claimcheck.ErrConfig for a missing or non-positive
// expiry, a bad prefix or ID prefix.
func (p Policy) Rules() ([]Rule, error) {
	p = p.withDefaults()
	if p.PayloadDays < 1 || p.ResultDays < 1 {
		return nil, fmt.Errorf("lifecycle: expiry must be at least 1 day (payloads %d, results %d): %w", p.PayloadDays, p.ResultDays, claimcheck.ErrConfig)
	}
	if p.AbortIncompleteDays < 1 {
		return nil, fmt.Errorf("lifecycle: abort of incomplete uploads must be at least 1 day: %w", claimcheck.ErrConfig)
	}
	if p.IDPrefix == "" || len(p.IDPrefix) > 200 {
		return nil, fmt.Errorf("lifecycle: rule ID prefix must be 1 to 200 bytes: %w", claimcheck.ErrConfig)
	}
	for _, pre := range []string{p.PayloadPrefix, p.ResultPrefix} {
		if !strings.HasSuffix(pre, "/") || pre == "/" {
			return nil, fmt.Errorf("lifecycle: prefix %q must be a non-empty folder ending in '/': %w", pre, claimcheck.ErrConfig)
		}
	}
	if overlaps(p.PayloadPrefix, p.ResultPrefix) {
		return nil, fmt.Errorf("lifecycle: prefixes %q and %q overlap: %w", p.PayloadPrefix, p.ResultPrefix, claimcheck.ErrConfig)
	}
	return []Rule{
		{ID: p.IDPrefix + "payloads", Prefix: p.PayloadPrefix, ExpirationDays: p.PayloadDays, AbortIncompleteDays: p.AbortIncompleteDays},
		{ID: p.IDPrefix + "results", Prefix: p.ResultPrefix, ExpirationDays: p.ResultDays, AbortIncompleteDays: p.AbortIncompleteDays},
	}, nil
}

func (p Policy) withDefaults() Policy {
	if p.AbortIncompleteDays == 0 {
		p.AbortIncompleteDays = DefaultAbortIncompleteDays
	}
	if p.IDPrefix == "" {
		p.IDPrefix = IDPrefix
	}
	if p.PayloadPrefix == "" {
		p.PayloadPrefix = claimcheck.PrefixPayloads
	}
	if p.ResultPrefix == "" {
		p.ResultPrefix = claimcheck.PrefixResults
	}
	return p
}

// S3 JSON: the PutBucketLifecycleConfiguration request body as the AWS CLI
// takes it.
type s3Config struct {
	Rules []s3Rule `json:"Rules"`
}

type s3Rule struct {
	ID                             string       `json:"ID"`
	Filter                         s3Filter     `json:"Filter"`
	Status                         string       `json:"Status"`
	Expiration                     s3Expiration `json:"Expiration"`
	AbortIncompleteMultipartUpload s3Abort      `json:"AbortIncompleteMultipartUpload"`
}

type s3Filter struct {
	Prefix string `json:"Prefix"`
}

type s3Expiration struct {
	Days int `json:"Days"`
}

type s3Abort struct {
	DaysAfterInitiation int `json:"DaysAfterInitiation"`
}

// S3JSON is the policy as an S3 lifecycle configuration:
//
//	{"Rules": [{"ID": "claimcheck-payloads", "Filter": {"Prefix": "payloads/"},
//	  "Status": "Enabled", "Expiration": {"Days": 22},
//	  "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}, …]}
//
// Each rule names its prefix: the common example rule filters on the
// empty prefix, which expires every object in the bucket, other teams'
// included. Installing this alone replaces the bucket's other rules; use
// Apply, or merge by hand.
func (p Policy) S3JSON() ([]byte, error) {
	rules, err := p.Rules()
	if err != nil {
		return nil, err
	}
	var c s3Config
	for _, r := range rules {
		c.Rules = append(c.Rules, s3Rule{ID: r.ID, Filter: s3Filter{Prefix: r.Prefix}, Status: "Enabled",
			Expiration: s3Expiration{Days: r.ExpirationDays}, AbortIncompleteMultipartUpload: s3Abort{DaysAfterInitiation: r.AbortIncompleteDays}})
	}
	return marshal(c)
}

// GCS JSON: the bucket resource's lifecycle field.
type gcsConfig struct {
	Lifecycle gcsLifecycle `json:"lifecycle"`
}

type gcsLifecycle struct {
	Rule []gcsRule `json:"rule"`
}

type gcsRule struct {
	Action    gcsAction    `json:"action"`
	Condition gcsCondition `json:"condition"`
}

type gcsAction struct {
	Type string `json:"type"`
}

type gcsCondition struct {
	Age           int      `json:"age"`
	MatchesPrefix []string `json:"matchesPrefix,omitempty"`
}

// GCSJSON is the policy as a Cloud Storage lifecycle configuration: a
// Delete rule per prefix (condition age and matchesPrefix) and an
// AbortIncompleteMultipartUpload rule:
//
//	{"lifecycle": {"rule": [
//	  {"action": {"type": "Delete"}, "condition": {"age": 22, "matchesPrefix": ["payloads/"]}},
//	  {"action": {"type": "Delete"}, "condition": {"age": 22, "matchesPrefix": ["results/"]}},
//	  {"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": 1}}]}}
//
// The abort rule carries only the age condition, the one condition Google's
// client libraries document for that action, so it applies to every
// incomplete XML-API multipart upload in the bucket (claimcheck's own GCS
// writes use resumable uploads, which it does not affect). GCS rules have no
// IDs: a merge with other rules must match ours by action and prefix.
func (p Policy) GCSJSON() ([]byte, error) {
	rules, err := p.Rules()
	if err != nil {
		return nil, err
	}
	var c gcsConfig
	for _, r := range rules {
		c.Lifecycle.Rule = append(c.Lifecycle.Rule, gcsRule{Action: gcsAction{Type: "Delete"}, Condition: gcsCondition{Age: r.ExpirationDays, MatchesPrefix: []string{r.Prefix}}})
	}
	c.Lifecycle.Rule = append(c.Lifecycle.Rule, gcsRule{Action: gcsAction{Type: "AbortIncompleteMultipartUpload"}, Condition: gcsCondition{Age: rules[0].AbortIncompleteDays}})
	return marshal(c)
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// overlaps reports whether a key could lie under both prefixes.
func overlaps(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }
