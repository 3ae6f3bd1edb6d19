package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotVerified is returned by Apply when the configuration read back after
// the write is not the one written (another writer changed it at the same
// time, or the server dropped part of it).
var ErrNotVerified = errors.New("the bucket's lifecycle configuration read back differs from the one written")

// ApplyOptions adjust Apply. The zero value is valid.
type ApplyOptions struct {
	// DryRun reads and merges but writes nothing.
	DryRun bool
	// VerifyTimeout bounds how long Apply re-reads the configuration until
	// it shows what was written (S3 may take a while to propagate a new
	// lifecycle configuration). Default 60 s.
	VerifyTimeout time.Duration
	// ExpectedBucketOwner, when set, is sent with every request, so a
	// bucket name that now belongs to another account is refused (S3; see
	// Manager.ReadLifecycle).
	ExpectedBucketOwner string
}

// ApplyResult reports an Apply.
type ApplyResult struct {
	MergeResult
	Bucket string `json:"bucket"`
	// HadConfiguration is false when the bucket had no lifecycle
	// configuration (NoSuchLifecycleConfiguration).
	HadConfiguration bool `json:"had_configuration"`
	// Written is true when a new configuration was installed.
	Written bool `json:"written"`
	DryRun  bool `json:"dry_run"`
}

// Apply installs p on m's bucket (ManagerOf gives a store's), merged with
// the bucket's existing rules (see Merge): it reads the configuration,
// replaces only our rules, writes the result if anything changed —
// keeping the configuration's other settings (S3:
// TransitionDefaultMinimumObjectSize) — and reads it back until it shows
// every rule written.
//
// S3 offers no conditional write for lifecycle configurations: a rule
// another writer adds between Apply's read and its write is lost. Run Apply
// from one place (a deploy step), not from every process.
//
// Errors: a *ConflictError (ErrConflict, claimcheck.ErrConfig) when another
// rule would expire our objects sooner; ErrNotVerified; the store's
// errors (a *StoreError for an error code), wrapped.
func Apply(ctx context.Context, m Manager, p Policy, opts *ApplyOptions) (*ApplyResult, error) {
	if opts == nil {
		opts = &ApplyOptions{}
	}
	ours, err := p.Rules()
	if err != nil {
		return nil, err
	}
	p = p.withDefaults()
	owner, bucket := opts.ExpectedBucketOwner, m.LifecycleBucket()
	got, err := m.ReadLifecycle(ctx, owner)
	if err != nil {
		return nil, err
	}
	merged, err := Merge(got.Rules, ours, p.IDPrefix)
	if err != nil {
		return nil, err
	}
	res := &ApplyResult{MergeResult: *merged, Bucket: bucket, HadConfiguration: got.Found, DryRun: opts.DryRun}
	if !merged.Changed() || opts.DryRun {
		return res, nil
	}
	if err := m.WriteLifecycle(ctx, &Configuration{Rules: merged.Rules, Found: true, Native: got.Native}, owner); err != nil {
		return nil, err
	}
	res.Written = true
	timeout := opts.VerifyTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		back, err := m.ReadLifecycle(ctx, owner)
		if err != nil {
			return res, err
		}
		problem := differs(merged.Rules, back.Rules)
		if problem == "" {
			return res, nil
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("lifecycle: bucket %s: %s: %w", bucket, problem, ErrNotVerified)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(min(2*time.Second, timeout)):
		}
	}
}

// differs describes how the rules read back differ from those written, by
// ID and content, or returns "".
func differs(wrote, read []Rule) string {
	byID := map[string]view{}
	for _, r := range read {
		byID[r.ID] = ruleView(r)
	}
	var missing, changed []string
	for _, r := range wrote {
		id := r.ID
		if id == "" {
			continue // the server may name it
		}
		v, ok := byID[id]
		switch {
		case !ok:
			missing = append(missing, id)
		case v != ruleView(r):
			changed = append(changed, id)
		}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "rules missing: "+strings.Join(missing, ", "))
	}
	if len(changed) > 0 {
		parts = append(parts, "rules changed: "+strings.Join(changed, ", "))
	}
	if len(read) != len(wrote) {
		parts = append(parts, fmt.Sprintf("%d rules written, %d read back", len(wrote), len(read)))
	}
	return strings.Join(parts, "; ")
}
