package checkin

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
)

// Key records (docs/invariants.md, "keys"): the job database's
// claimcheck_key table holds the id (claimcheck.KeeperID, never the key)
// of every key-encryption key that sealed a payload or a result of this
// deployment, so that a lost key file is noticed, from the database alone,
// before a new key is made in its place.

// RecordedKeyIDs returns the ids of the key-encryption keys recorded in
// the job database db, oldest first (pipeline.RecordedKeyIDs documents it).
func RecordedKeyIDs(ctx context.Context, db *sql.DB) ([]string, error) {
	dialect := dbopen.DialectOf(db)
	var keys, jobs bool
	var err error
	if dialect == dbopen.Postgres {
		err = db.QueryRowContext(ctx, `SELECT to_regclass('claimcheck_key') IS NOT NULL, to_regclass('river_job') IS NOT NULL`).Scan(&keys, &jobs)
	} else {
		err = db.QueryRowContext(ctx, `SELECT
			EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'claimcheck_key'),
			EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'river_job')`).Scan(&keys, &jobs)
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: read recorded key ids: %w", err)
	}
	if !keys {
		if !jobs {
			return nil, nil
		}
		cond := jobdb.SealedJobsSQLite
		if dialect == dbopen.Postgres {
			cond = jobdb.SealedJobsPG
		}
		var sealed bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM river_job WHERE `+cond+`)`).Scan(&sealed); err != nil {
			return nil, fmt.Errorf("pipeline: look for jobs with sealed payloads (no key ids recorded yet): %w", err)
		}
		if sealed {
			return []string{jobdb.UnrecordedKeyID}, nil
		}
		return nil, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT key_id FROM claimcheck_key ORDER BY first_sealed, key_id`)
	if err != nil {
		return nil, fmt.Errorf("pipeline: read recorded key ids: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("pipeline: read recorded key ids: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pipeline: read recorded key ids: %w", err)
	}
	return ids, nil
}

// recordKey records key id in claimcheck_key with q (ON CONFLICT DO
// NOTHING: once per key), unless this process recorded it before. cache
// says q commits at once (c.DB), so that the id may be remembered; a
// statement in a caller's transaction, which may roll back, is not.
func (c *Intents) recordKey(ctx context.Context, q jobdb.Execer, id string, cache bool) error {
	if _, ok := c.keys.Load(id); ok {
		return nil
	}
	_, err := q.ExecContext(ctx, `INSERT INTO claimcheck_key (key_id, first_sealed) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, time.Now().UTC())
	if err != nil {
		return fmt.Errorf("pipeline: record key id %s: %w", id, err)
	}
	if cache {
		c.keys.Store(id, struct{}{})
	}
	return nil
}

// RecordStoreKey records, before st seals anything, the id of st's key
// (committed at once, so that no sealed object or ticket exists whose key
// is not recorded); nothing when st does not seal. Errors are
// claimcheck.ErrUnavailable: nothing is sealed, and the check-in may be
// retried.
func (c *Intents) RecordStoreKey(ctx context.Context, st *claimcheck.Store) error {
	if !st.Seals() {
		return nil
	}
	if err := c.recordKey(ctx, c.DB, claimcheck.KeyIDText(st.KeyID()), true); err != nil {
		return fmt.Errorf("%w: %w", err, claimcheck.ErrUnavailable)
	}
	return nil
}

// RecordTicketKey records, in the job's transaction tx, the key that
// sealed t when t was checked in outside this pipeline (Store().CheckIn,
// then EnqueueTx): the ticket's "kid" for an inline sealed ticket, st's
// key for an offloaded ticket of a store that seals. A key this process
// recorded before costs nothing.
func (c *Intents) RecordTicketKey(ctx context.Context, tx jobdb.Execer, st *claimcheck.Store, t *claimcheck.Ticket) error {
	var id string
	switch {
	case t.DEK != "":
		id = claimcheck.KeyIDText(t.KID)
	case !t.IsInline() && st.Seals():
		id = claimcheck.KeyIDText(st.KeyID())
	default:
		return nil
	}
	return c.recordKey(ctx, tx, id, false)
}
