package pipeline

// The broker consumers' inbox on the job database (Inbox), deletion on
// acknowledgement (Release) and the outbox's emptiness (OutboxEmpty); the
// relay is pipeline/internal/outbox's (relay.go).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
	"github.com/claimcheck/claimcheck/pipeline/internal/outbox"
)

// Inbox is the idempotent receiver of broker consumers (broker.Inbox) on
// this pipeline's database: one row per message (idempotency key) and
// consuming queue in claimcheck_consumed with the latest outcome, and a
// claims-registry row for each result.
func (p *Pipeline) Inbox() broker.Inbox { return inbox{p} }

type inbox struct{ p *Pipeline }

// Seen implements broker.Inbox.
func (in inbox) Seen(ctx context.Context, queue, id, delivery string) (broker.Seen, error) {
	var seen broker.Seen
	var n int
	err := in.p.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM claimcheck_consumed WHERE message_id = $1 AND queue = $2 AND action = $3`,
		id, queue, string(broker.Acked)).Scan(&n)
	if err != nil {
		return seen, asUnavailable(fmt.Errorf("pipeline: inbox lookup: %w", err))
	}
	seen.Processed = n > 0
	if seen.Processed {
		return seen, nil
	}
	err = in.p.db.QueryRowContext(ctx, `SELECT released FROM claimcheck_released WHERE message_id = $1 AND queue = $2 AND delivery_id = $3`,
		id, queue, delivery).Scan(&seen.Released)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return seen, asUnavailable(fmt.Errorf("pipeline: inbox lookup: %w", err))
	}
	return seen, nil
}

// CheckInResult implements broker.ResultCheckIn with checkInResult; Record
// anchors the result, and Consume keeps the outcome naming it in the store
// (KeepOutcome) when Record fails too (docs/invariants.md, invariant 12).
func (in inbox) CheckInResult(ctx context.Context, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
	return in.p.checkInResult(ctx, in.p.store, tenant, r, opts)
}

// Record implements broker.Inbox: it upserts the outcome (never replacing
// an acked one), counts a release in claimcheck_released and, for a
// result, writes its claims-registry row under the outbox entry's job id
// (0 for a message from elsewhere), in one transaction.
func (in inbox) Record(ctx context.Context, o broker.Outcome) error {
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
	return asUnavailable(in.p.inTx(ctx, func(tx *sql.Tx) error {
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
			if err := in.p.anchor(ctx, tx, o.Result, "record the result"); err != nil {
				return err
			}
			return register(ctx, tx, o.Job, roleResult, o.Result)
		}
		return nil
	}))
}

// PruneInbox deletes the inbox's records (claimcheck_consumed) of
// messages last settled before cutoff, with their release counts
// (claimcheck_released), and returns how many messages it forgot. Without
// it both tables grow by a row per message and consuming queue forever.
//
// Choose cutoff no later than now less the results' retention
// (claimcheck.Retention.ResultTotal, docs/invariants.md, invariant 5): by
// then the payload and any result have expired, so a record is no longer
// needed to skip a redelivery (which would fail payload-missing anyway),
// to list a broker dead letter (which could no longer be replayed) or to
// find a result. Settlement times are the consumers' clocks; a skew of
// minutes is nothing against a retention of days.
//
// Errors: the database's, wrapped.
func (p *Pipeline) PruneInbox(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := p.inTx(ctx, func(tx *sql.Tx) error {
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

// Release implements broker.Releaser (opt-in deletion on acknowledgement):
// it deletes outbox entry job's registry row for t's object held for
// queue (the entry's one payload row, or, when its destination fans out,
// the row of that queue) and, if no registry row (no other queue's copy
// unprocessed, no other subscriber's entry, pending or
// acknowledged-but-unreleased, and no job of the pipeline) and no check-in
// intent refers to the object any more, the object itself. A row already
// released leaves only the deletion to retry. It reports whether this call
// deleted the object (false if it was gone already).
//
// The row's removal, the look-up and the store's delete happen in one
// transaction under the object's key lock, which check-ins that reuse the
// object take too (deleteUnheld, internal/registry): a check-in of the same
// bytes either comes first, and the object is kept for it, or after the
// delete, and writes the object again. A failed delete rolls the row's
// removal back.
func (p *Pipeline) Release(ctx context.Context, job int64, queue string, t *claimcheck.Ticket) (bool, error) {
	deleted, err := p.deleteUnheld(ctx, t, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM claimcheck_claim WHERE job_id = $1 AND role IN ($2, $3) AND object_key = $4`,
			job, rolePayload, outbox.RolePayloadAt+queue, t.Key)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pipeline: release %s: %w", t, err)
	}
	return deleted, nil
}

// inTx runs fn in a transaction, committed if fn returns nil.
func (p *Pipeline) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return jobdb.InTx(ctx, p.db, fn)
}

// OutboxEmpty reports whether destination's outbox holds no entry waiting
// to be sent (every entry sent or dead).
//
// OutboxEmptyFor is OutboxEmpty counting only the entries a relay for
// broker (RelayOptions.Broker) publishes.
func (p *Pipeline) OutboxEmpty(ctx context.Context, destination string) (bool, error) {
	return p.OutboxEmptyFor(ctx, destination, "")
}

// OutboxEmptyFor: see OutboxEmpty.
func (p *Pipeline) OutboxEmptyFor(ctx context.Context, destination, broker string) (bool, error) {
	res, err := p.client.JobList(ctx, outbox.BrokerFilter(river.NewJobListParams().Queues(outboxQueue(destination)).States(pendingStates...).First(1), broker))
	if err != nil {
		return false, fmt.Errorf("pipeline: poll outbox %s: %w", destination, err)
	}
	return len(res.Jobs) == 0, nil
}
