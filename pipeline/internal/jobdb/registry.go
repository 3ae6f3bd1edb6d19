package jobdb

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/claimcheck/claimcheck"
)

// Registry roles: claimcheck_claim.role.
const (
	RolePayload = "payload"
	RoleResult  = "result"
	// RoleAttachment: a document a job's manifest lists (its main payload
	// or an attachment); the manifest itself is the job's RolePayload.
	RoleAttachment = "attachment"
)

// Execer is satisfied by *sql.DB and *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Register records that job refers to the object behind t. Inline tickets
// refer to no object and record nothing.
func Register(ctx context.Context, db Execer, jobID int64, role string, t *claimcheck.Ticket) error {
	if t.IsInline() {
		return nil
	}
	_, err := db.ExecContext(ctx, `INSERT INTO claimcheck_claim (job_id, role, object_key, sha256, size, tenant, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		jobID, role, t.Key, t.SHA256, t.Size, t.Tenant, t.Created.UTC())
	if err != nil {
		return fmt.Errorf("pipeline: write claims registry row for %s: %w", t, err)
	}
	return nil
}

// InTx runs fn in a transaction of db, committed if fn returns nil.
func InTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("pipeline: begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("pipeline: commit: %w", err)
	}
	return nil
}

// AsUnavailable marks err, a failure of the job database, as
// claimcheck.ErrUnavailable unless it is classified already (a permanent
// failure, such as a payload found missing, stays permanent): retry
// policies then wait for the database without spending attempts. nil
// stays nil.
func AsUnavailable(err error) error {
	if err == nil || claimcheck.Classify(err) != claimcheck.FailureTransient {
		return err
	}
	return fmt.Errorf("%w: %w", err, claimcheck.ErrUnavailable)
}
