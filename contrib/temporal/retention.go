package temporal

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/ops"
)

// RetentionInputs are the Temporal settings that decide how long a stored
// payload can still be read. A payload the driver stores is read while its
// workflow runs (by the workflow's workers, and by every replay of its
// history), and after the workflow closes for as long as the namespace
// keeps the closed workflow's history (queries, resets, `temporal workflow
// show`, a worker's replay tests). Each field is a length of time.
type RetentionInputs struct {
	// WorkflowExecution is the longest a workflow that uses the driver may
	// run: its WorkflowExecutionTimeout (StartWorkflowOptions), which covers
	// its retries and continue-as-new runs. Temporal's default is no limit,
	// and no expiry is then safe: Retention refuses zero. A workflow that
	// runs longer can find the payloads of its start expired.
	WorkflowExecution time.Duration
	// NamespaceRetention is the namespace's workflow execution retention
	// period (`temporal operator namespace describe`: at least 1 day):
	// how long a closed workflow's history, and so its claims, are kept.
	NamespaceRetention time.Duration
	// Margin is slack for a human to read a closed workflow's payloads or
	// reset it at the end of its retention (claimcheck's own default for a
	// dead letter's replay is a week: docs/invariants.md, invariant 5).
	Margin time.Duration
}

// Retention returns the shortest lifecycle expiry the store's payloads/
// prefix may have for the driver's objects: the longest workflow execution,
// plus the namespace's retention, plus the margin, rounded up to whole days
// by claimcheck.ComputeRetention (docs/invariants.md, invariant 5). Its
// steps are named for the Temporal settings. Apply it to the bucket with
// `claimcheck lifecycle apply --backlog WORKFLOW --retry-window 0
// --dead-letter NAMESPACE --replay-margin MARGIN` or lifecycle.FromRetention,
// and check it at start-up with Driver.CheckRetention.
//
// Errors: claimcheck.ErrConfig for a zero WorkflowExecution or
// NamespaceRetention, a negative input, or a sum above 100 years.
func Retention(in RetentionInputs) (*claimcheck.Retention, error) {
	switch {
	case in.WorkflowExecution == 0:
		return nil, fmt.Errorf("claimcheck temporal driver: retention: WorkflowExecution is zero, Temporal's 'no limit': no expiry is safe for a workflow that may run forever; set the WorkflowExecutionTimeout your workflows start with: %w", claimcheck.ErrConfig)
	case in.NamespaceRetention == 0:
		return nil, fmt.Errorf("claimcheck temporal driver: retention: NamespaceRetention is zero; Temporal keeps a closed workflow's history at least a day: %w", claimcheck.ErrConfig)
	}
	r, err := claimcheck.ComputeRetention(claimcheck.RetentionInputs{
		Backlog:      in.WorkflowExecution,
		DeadLetter:   in.NamespaceRetention,
		ReplayMargin: in.Margin,
	})
	if err != nil {
		return nil, fmt.Errorf("claimcheck temporal driver: %w", err)
	}
	names := map[string]string{
		"backlog":               "workflow execution timeout",
		"dead-letter retention": "namespace retention",
	}
	for i, s := range r.PayloadSteps {
		if n, ok := names[s.Name]; ok {
			r.PayloadSteps[i].Name = n
		}
	}
	return r, nil
}

// CheckRetention checks the store's lifecycle configuration against r (from
// Retention): call it at start-up, before the driver stores or reads
// anything. On an S3 store it reads the bucket's lifecycle rules once per
// process and fails when one expires the driver's payloads (payloads/,
// inside the store's namespace) sooner than r requires, moves them to an
// archive tier sooner, or expires them on a fixed date: the same rows
// `claimcheck doctor` reports. Stores whose expiry claimcheck cannot read
// (file://, where `claimcheck sweep --expire` sets it; gs://) pass.
//
// Errors: claimcheck.ErrConfig naming each failing rule; the store's error
// when the configuration cannot be read (the credentials may lack
// s3:GetLifecycleConfiguration).
func (d *Driver) CheckRetention(ctx context.Context, r *claimcheck.Retention) error {
	if r == nil {
		return fmt.Errorf("claimcheck temporal driver: CheckRetention: no retention: %w", claimcheck.ErrConfig)
	}
	fails, err := ops.StartupExpiry(ctx, d.store, r)
	if err != nil {
		return fmt.Errorf("claimcheck temporal driver: check the store's lifecycle against %d days of retention: %w", r.PayloadDays, err)
	}
	if len(fails) == 0 {
		return nil
	}
	var why []string
	for _, c := range fails {
		why = append(why, c.Name+": "+c.Detail)
	}
	return fmt.Errorf("claimcheck temporal driver: the store's lifecycle expires payloads sooner than the %d days Temporal may still read them (%s): %w", r.PayloadDays, strings.Join(why, "; "), claimcheck.ErrConfig)
}
