// Package inbox is package pipeline's broker side: the consumers' inbox on
// the job database (Inbox, an idempotent broker.Inbox and
// broker.OutcomeKeeper), deletion on acknowledgement (Release), the
// inbox's pruning (Prune), the outcome records a worker keeps in the store
// through an outage of the job database (outcome.go, docs/invariants.md,
// invariant 12) and Work over a broker source (Consume, consume.go).
// Package pipeline wires it to its database, store and check-ins (Host)
// and keeps the public names.
package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
	"github.com/claimcheck/claimcheck/pipeline/internal/outbox"
)

// Host is what the inbox needs of its pipeline.
type Host struct {
	// DB is the job database.
	DB *sql.DB
	// Store is the pipeline's default store: results and outcome records
	// go there.
	Store *claimcheck.Store
	// Logger receives the warnings of outcome records left for a sweep.
	Logger *slog.Logger
	// CheckInResult checks a handler's result in to st, with its check-in
	// intent when the job database allows (pipeline's checkInResult).
	CheckInResult func(ctx context.Context, st *claimcheck.Store, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error)
	// Anchor takes t's key lock for the rest of tx and turns its check-in
	// intent into the registry row about to be written (pipeline's anchor).
	Anchor func(ctx context.Context, tx *sql.Tx, t *claimcheck.Ticket, step string) error
	// DeleteUnheld runs release and deletes t's object if nothing holds it
	// any more, reporting whether it did (pipeline's deleteUnheld).
	DeleteUnheld func(ctx context.Context, t *claimcheck.Ticket, release func(*sql.Tx) error) (bool, error)
}

// Inbox is the idempotent receiver of broker consumers (broker.Inbox) on
// the job database: one row per message (idempotency key) and consuming
// queue in claimcheck_consumed with the latest outcome, and a
// claims-registry row for each result.
type Inbox struct{ h *Host }

// New returns the inbox on h's database.
func New(h *Host) Inbox { return Inbox{h} }

// Seen implements broker.Inbox.
func (in Inbox) Seen(ctx context.Context, queue, id, delivery string) (broker.Seen, error) {
	var seen broker.Seen
	var n int
	err := in.h.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM claimcheck_consumed WHERE message_id = $1 AND queue = $2 AND action = $3`,
		id, queue, string(broker.Acked)).Scan(&n)
	if err != nil {
		return seen, jobdb.AsUnavailable(fmt.Errorf("pipeline: inbox lookup: %w", err))
	}
	seen.Processed = n > 0
	if seen.Processed {
		return seen, nil
	}
	err = in.h.DB.QueryRowContext(ctx, `SELECT released FROM claimcheck_released WHERE message_id = $1 AND queue = $2 AND delivery_id = $3`,
		id, queue, delivery).Scan(&seen.Released)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return seen, jobdb.AsUnavailable(fmt.Errorf("pipeline: inbox lookup: %w", err))
	}
	return seen, nil
}

// CheckInResult implements broker.ResultCheckIn with Host.CheckInResult;
// Record anchors the result, and Consume keeps the outcome naming it in
// the store (KeepOutcome) when Record fails too (docs/invariants.md,
// invariant 12).
func (in Inbox) CheckInResult(ctx context.Context, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
	return in.h.CheckInResult(ctx, in.h.Store, tenant, r, opts)
}

// Record implements broker.Inbox: it upserts the outcome (never replacing
// an acked one), counts a release in claimcheck_released and, for a
// result, writes its claims-registry row under the outbox entry's job id
// (0 for a message from elsewhere), in one transaction.
func (in Inbox) Record(ctx context.Context, o broker.Outcome) error {
	var result sql.NullString
	if o.Result != nil {
		b, err := o.Result.Marshal()
		if err != nil {
			return err
		}
		result = sql.NullString{String: string(b), Valid: true}
	}
	var errText string
	if o.Err != nil {
		errText = o.Err.Error()
	}
	return jobdb.AsUnavailable(jobdb.InTx(ctx, in.h.DB, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO claimcheck_consumed (message_id, queue, job_id, kind, tenant, action, attempt, reason, error, result, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
			ON CONFLICT (message_id, queue) DO UPDATE SET job_id = excluded.job_id, kind = excluded.kind, tenant = excluded.tenant,
				action = excluded.action, attempt = excluded.attempt, reason = excluded.reason, error = excluded.error,
				result = excluded.result, updated_at = excluded.updated_at
			WHERE claimcheck_consumed.action <> 'acked'`,
			o.ID, o.Queue, o.Job, o.Kind, o.Tenant, string(o.Action), o.Attempt, o.Reason, errText, result, time.Now().UTC())
		if err != nil {
			return fmt.Errorf("pipeline: inbox record: %w", err)
		}
		if o.Action == broker.Released {
			// Counted per publish: another delivery id (a replay) starts
			// from 1.
			_, err := tx.ExecContext(ctx, `INSERT INTO claimcheck_released (message_id, queue, delivery_id, released) VALUES ($1, $2, $3, 1)
				ON CONFLICT (message_id, queue) DO UPDATE SET
					released = CASE WHEN claimcheck_released.delivery_id = excluded.delivery_id THEN claimcheck_released.released + 1 ELSE 1 END,
					delivery_id = excluded.delivery_id`, o.ID, o.Queue, o.Delivery)
			if err != nil {
				return fmt.Errorf("pipeline: inbox record release: %w", err)
			}
		}
		if o.Action == broker.Acked && o.Result != nil {
			// The result's check-in intent (CheckInResult) becomes its
			// registry row here; a result whose object a sweep took
			// meanwhile is ErrPayloadMissing, and the message is retried.
			if err := in.h.Anchor(ctx, tx, o.Result, "record the result"); err != nil {
				return err
			}
			return jobdb.Register(ctx, tx, o.Job, jobdb.RoleResult, o.Result)
		}
		return nil
	}))
}

// Prune deletes the inbox's records (claimcheck_consumed) of messages last
// settled before cutoff, with their release counts (claimcheck_released),
// and returns how many messages it forgot (Pipeline.PruneInbox). Errors:
// the database's, wrapped.
func Prune(ctx context.Context, db *sql.DB, cutoff time.Time) (int64, error) {
	var n int64
	err := jobdb.InTx(ctx, db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM claimcheck_consumed WHERE updated_at < $1`, cutoff.UTC())
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM claimcheck_released WHERE NOT EXISTS (SELECT 1 FROM claimcheck_consumed c
			WHERE c.message_id = claimcheck_released.message_id AND c.queue = claimcheck_released.queue)`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pipeline: prune the inbox: %w", err)
	}
	return n, nil
}

// Release deletes outbox entry job's registry row for t's object held for
// queue and, if nothing else holds it, the object (Pipeline.Release, which
// documents it). It reports whether this call deleted the object.
func (in Inbox) Release(ctx context.Context, job int64, queue string, t *claimcheck.Ticket) (bool, error) {
	deleted, err := in.h.DeleteUnheld(ctx, t, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM claimcheck_claim WHERE job_id = $1 AND role IN ($2, $3) AND object_key = $4`,
			job, jobdb.RolePayload, outbox.RolePayloadAt+queue, t.Key)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pipeline: release %s: %w", t, err)
	}
	return deleted, nil
}
