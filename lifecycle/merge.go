package lifecycle

import (
	"errors"
	"fmt"
	"strings"

	"github.com/claimcheck/claimcheck"
)

// ErrConflict is wrapped by every *ConflictError.
var ErrConflict = errors.New("a lifecycle rule of the bucket conflicts with claimcheck's retention")

// ConflictError names a rule of someone else's that would remove or hide
// our objects sooner than our retention allows. Merge and Apply refuse to
// install anything while one exists: the other rule would keep applying to
// our prefix whatever we add, since S3 acts on the earliest of overlapping
// expirations.
type ConflictError struct {
	// RuleID is the other rule's ID ("" when it has none).
	RuleID string
	// RuleIndex is its position in the bucket's configuration, from 0.
	RuleIndex int
	// Prefix is the other rule's filter prefix ("" for the whole bucket).
	Prefix string
	// Ours is the prefix of ours it overlaps, and Days our expiry there.
	Ours string
	Days int
	// What the rule does that breaks our retention.
	Reason string
}

func (e *ConflictError) Error() string {
	name := fmt.Sprintf("rule %q", e.RuleID)
	if e.RuleID == "" {
		name = fmt.Sprintf("rule #%d (no ID)", e.RuleIndex+1)
	}
	scope := fmt.Sprintf("prefix %q", e.Prefix)
	if e.Prefix == "" {
		scope = "the whole bucket"
	}
	return fmt.Sprintf("lifecycle: the bucket's %s, on %s, %s, but objects under %s must live %s: narrow that rule's prefix or lengthen it, then apply again",
		name, scope, e.Reason, e.Ours, pluralDays(e.Days))
}

// Unwrap makes errors.Is match ErrConflict and claimcheck.ErrConfig.
func (e *ConflictError) Unwrap() []error { return []error{ErrConflict, claimcheck.ErrConfig} }

func pluralDays(n int) string {
	if n == 1 {
		return "1 day"
	}
	return fmt.Sprintf("%d days", n)
}

// MergeResult is the bucket's configuration after a merge and what changed.
type MergeResult struct {
	// Rules is the whole configuration to install: every other rule, exactly
	// as it was and in its order, then ours.
	Rules []Rule `json:"-"`
	// Foreign names the other rules kept untouched (their IDs, or "#N" for
	// a rule without one).
	Foreign []string `json:"foreign"`
	// Added, Replaced and Unchanged name our rules by ID; Removed names
	// rules with our ID prefix that the policy no longer has.
	Added     []string `json:"added"`
	Replaced  []string `json:"replaced"`
	Unchanged []string `json:"unchanged"`
	Removed   []string `json:"removed"`
}

// Changed reports whether installing Rules would change the bucket.
func (m *MergeResult) Changed() bool {
	return len(m.Added)+len(m.Replaced)+len(m.Removed) > 0
}

// Merge returns the union of a bucket's existing rules and ours: rules
// whose ID starts with idPrefix are ours and are replaced by ours (or
// removed if the policy no longer has them); every other rule is kept
// exactly as it was, whatever fields it uses. Nothing foreign is ever
// dropped.
//
// Merge refuses, with one *ConflictError per offending rule (joined), when
// an enabled foreign rule whose filter can match our objects — its prefix
// and ours overlap, and it has no tag condition (claimcheck never tags
// objects) — expires them sooner than ours, expires them on a fixed date,
// or moves them to an archive class (Transition.Archive; S3: GLACIER,
// DEEP_ARCHIVE) from which a claim cannot read them.
//
// Errors: claimcheck.ErrConfig for ours not all starting with idPrefix, an
// empty idPrefix, duplicate IDs or more than MaxRules rules in all.
func Merge(existing, ours []Rule, idPrefix string) (*MergeResult, error) {
	if idPrefix == "" {
		return nil, fmt.Errorf("lifecycle: empty rule ID prefix would make every rule ours: %w", claimcheck.ErrConfig)
	}
	want := make([]Rule, 0, len(ours))
	seen := map[string]bool{}
	for _, r := range ours {
		id := r.ID
		if !strings.HasPrefix(id, idPrefix) {
			return nil, fmt.Errorf("lifecycle: our rule %q does not start with the ID prefix %q: %w", id, idPrefix, claimcheck.ErrConfig)
		}
		if seen[id] {
			return nil, fmt.Errorf("lifecycle: two of our rules have the ID %q: %w", id, claimcheck.ErrConfig)
		}
		seen[id] = true
		want = append(want, r)
	}

	res := &MergeResult{Foreign: []string{}, Added: []string{}, Replaced: []string{}, Unchanged: []string{}, Removed: []string{}}
	old := map[string]Rule{}
	var conflicts []error
	for i, r := range existing {
		id := r.ID
		if id != "" && strings.HasPrefix(id, idPrefix) {
			old[id] = r
			if !seen[id] {
				res.Removed = append(res.Removed, id)
			}
			continue
		}
		name := id
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		res.Foreign = append(res.Foreign, name)
		res.Rules = append(res.Rules, r)
		if r.Disabled || r.Tagged { // claimcheck's objects carry no tags
			continue
		}
		for _, o := range want {
			if !overlaps(r.Prefix, o.Prefix) {
				continue
			}
			if reason := shortens(r, o.ExpirationDays); reason != "" {
				conflicts = append(conflicts, &ConflictError{RuleID: id, RuleIndex: i, Prefix: r.Prefix, Ours: o.Prefix, Days: o.ExpirationDays, Reason: reason})
			}
		}
	}
	if len(conflicts) > 0 {
		return nil, errors.Join(conflicts...)
	}
	for _, o := range want {
		id := o.ID
		res.Rules = append(res.Rules, o)
		switch prev, ok := old[id]; {
		case !ok:
			res.Added = append(res.Added, id)
		case sameRule(prev, o):
			res.Unchanged = append(res.Unchanged, id)
		default:
			res.Replaced = append(res.Replaced, id)
		}
	}
	if len(res.Rules) > MaxRules {
		return nil, fmt.Errorf("lifecycle: the merged configuration has %d rules, above S3's limit of %d: %w", len(res.Rules), MaxRules, claimcheck.ErrConfig)
	}
	ids := map[string]bool{}
	for _, r := range res.Rules {
		if id := r.ID; id != "" {
			if ids[id] {
				return nil, fmt.Errorf("lifecycle: two rules of the merged configuration have the ID %q: %w", id, claimcheck.ErrConfig)
			}
			ids[id] = true
		}
	}
	return res, nil
}

// shortens says how rule r would end our objects' readable life before
// days have passed, or "" if it does not.
func shortens(r Rule, days int) string {
	if r.ExpirationDays > 0 && r.ExpirationDays < days {
		return fmt.Sprintf("expires objects after %s", pluralDays(r.ExpirationDays))
	}
	if !r.ExpirationDate.IsZero() {
		return "expires objects on a fixed date (" + r.ExpirationDate.UTC().Format("2006-01-02") + ")"
	}
	for _, t := range r.Transitions {
		if !t.Archive {
			continue // readable at once: S3's STANDARD_IA, ONEZONE_IA, GLACIER_IR, INTELLIGENT_TIERING
		}
		if t.Days > 0 && t.Days < days {
			return fmt.Sprintf("moves objects to %s after %s, where a claim cannot read them until restored", t.StorageClass, pluralDays(t.Days))
		}
		if !t.Date.IsZero() {
			return fmt.Sprintf("moves objects to %s on a fixed date (%s), where a claim cannot read them until restored", t.StorageClass, t.Date.UTC().Format("2006-01-02"))
		}
	}
	return ""
}

// sameRule reports whether an installed rule of ours already is want: same
// status, prefix, expiry and abort, and nothing else set.
func sameRule(got, want Rule) bool {
	return ruleView(got) == ruleView(want)
}

type view struct {
	id, prefix             string
	disabled, tagged, more bool
	days, abort            int
}

func ruleView(r Rule) view {
	return view{id: r.ID, prefix: r.Prefix, disabled: r.Disabled, tagged: r.Tagged,
		more: r.Sized || !r.ExpirationDate.IsZero() || len(r.Transitions) > 0 || r.Other,
		days: r.ExpirationDays, abort: r.AbortIncompleteDays}
}
