// Package claimregistry holds the SQL that producers, the sweeper and deletions
// share around the claims registry: the per-key lock that serialises
// reusing an object with deleting it, check-in intents, and the database's
// clock. One copy of each, so the pipeline and the sweeper cannot disagree
// about what "referenced" means (docs/invariants.md, invariants 6 and 11).
//
// A check-in intent is a row in claimcheck_intent, committed before a
// check-in writes or reuses its object and removed in the transaction that
// writes the object's registry row. While it is live, the object is
// referenced: no sweep deletes it, whatever the clocks, because intents are
// timed by the database's clock (recorded_ms), never by a process's.
//
// Every deletion of an object (the sweeper's, a delete-on-ack release, a
// producer discarding what it checked in for nothing) runs in a transaction
// that first takes the object's key lock (Lock), then looks at the
// registry and the intents, then deletes the object from the store, then
// commits. Recording an intent takes the same lock. So a check-in that
// reuses an object either records its intent before a deletion looks (and
// the deletion keeps the object), or after the deletion committed (and the
// check-in finds no object, so it writes a new one).
package claimregistry

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/claimcheck/claimcheck/internal/dbopen"
)

// Querier is satisfied by *sql.DB and *sql.Tx.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// NowMS is the SQL expression of the database's clock in milliseconds
// since the Unix epoch. SQLite's is the host's clock (every process sharing
// the file shares the host); PostgreSQL's is the server's, read at the
// statement (clock_timestamp, not the transaction's start).
func NowMS(d dbopen.Dialect) string {
	if d == dbopen.Postgres {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
}

// DatabaseNow reads the database's clock, in milliseconds since the epoch.
func DatabaseNow(ctx context.Context, q Querier, d dbopen.Dialect) (int64, error) {
	var ms int64
	if err := q.QueryRowContext(ctx, `SELECT `+NowMS(d)).Scan(&ms); err != nil {
		return 0, fmt.Errorf("read the job database's clock: %w", err)
	}
	return ms, nil
}

// Lock takes key's lock for the rest of tx. On PostgreSQL it is a
// transaction-scoped advisory lock on a 64-bit hash of the schema and the
// key (a collision only serialises two keys). SQLite needs none: the job
// database opens every transaction with BEGIN IMMEDIATE, so write
// transactions already run one at a time.
func Lock(ctx context.Context, tx *sql.Tx, d dbopen.Dialect, key string) error {
	if d != dbopen.Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('claimcheck-object:' || current_schema() || ':' || $1, 0))`, key); err != nil {
		return fmt.Errorf("take the object's key lock: %w", err)
	}
	return nil
}

// RecordIntent commits a check-in intent for key, identified by the
// check-in's ticket creation time in nanoseconds, under the key's lock.
func RecordIntent(ctx context.Context, db *sql.DB, d dbopen.Dialect, key, tenant string, ticketNS int64) error {
	return InTx(ctx, db, func(tx *sql.Tx) error {
		if err := Lock(ctx, tx, d, key); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO claimcheck_intent (object_key, ticket_ns, tenant, recorded_ms)
			VALUES ($1, $2, $3, `+NowMS(d)+`) ON CONFLICT DO NOTHING`, key, ticketNS, tenant)
		if err != nil {
			return fmt.Errorf("record the check-in intent: %w", err)
		}
		return nil
	})
}

// DropIntent removes one check-in intent and reports whether it was there.
func DropIntent(ctx context.Context, q Querier, key string, ticketNS int64) (bool, error) {
	res, err := q.ExecContext(ctx, `DELETE FROM claimcheck_intent WHERE object_key = $1 AND ticket_ns = $2`, key, ticketNS)
	if err != nil {
		return false, fmt.Errorf("remove the check-in intent: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("remove the check-in intent: %w", err)
	}
	return n > 0, nil
}

// Holders counts, for one key, its registry rows and its check-in
// intents (all of them, whatever their age).
func Holders(ctx context.Context, q Querier, key string) (rows, intents int64, err error) {
	err = q.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM claimcheck_claim WHERE object_key = $1),
		(SELECT COUNT(*) FROM claimcheck_intent WHERE object_key = $1)`, key).Scan(&rows, &intents)
	if err != nil {
		return 0, 0, fmt.Errorf("look up the object's registry rows and intents: %w", err)
	}
	return rows, intents, nil
}

// IntentCounts counts, per key of keys, the check-in intents recorded
// within maxAgeMS of the database's clock (live) and before (stale).
func IntentCounts(ctx context.Context, q Querier, d dbopen.Dialect, keys []string, maxAgeMS int64) (map[string][2]int64, error) {
	out := map[string][2]int64{}
	if len(keys) == 0 {
		return out, nil
	}
	marks, args := Placeholders(keys, 2)
	args = append([]any{maxAgeMS}, args...)
	rows, err := q.QueryContext(ctx, `SELECT object_key,
		SUM(CASE WHEN recorded_ms >= `+NowMS(d)+` - $1 THEN 1 ELSE 0 END),
		SUM(CASE WHEN recorded_ms < `+NowMS(d)+` - $1 THEN 1 ELSE 0 END)
		FROM claimcheck_intent WHERE object_key IN (`+marks+`) GROUP BY object_key`, args...)
	if err != nil {
		return nil, fmt.Errorf("query the check-in intents: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var live, stale int64
		if err := rows.Scan(&k, &live, &stale); err != nil {
			return nil, fmt.Errorf("read the check-in intents: %w", err)
		}
		out[k] = [2]int64{live, stale}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the check-in intents: %w", err)
	}
	return out, nil
}

// DropStaleIntents removes key's intents recorded more than maxAgeMS ago
// by the database's clock: their producers died or stalled past the
// sweeper's grace period, and an enqueue that still comes finds its intent
// gone and refuses (pipeline.EnqueueTx).
func DropStaleIntents(ctx context.Context, tx *sql.Tx, d dbopen.Dialect, key string, maxAgeMS int64) (int64, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM claimcheck_intent WHERE object_key = $1 AND recorded_ms < `+NowMS(d)+` - $2`, key, maxAgeMS)
	if err != nil {
		return 0, fmt.Errorf("remove stale check-in intents: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("remove stale check-in intents: %w", err)
	}
	return n, nil
}

// StaleIntentKeys lists up to limit distinct keys, after after in the
// column's order, that have a check-in intent recorded more than maxAgeMS
// ago by the database's clock: a page of the intents of check-ins that died
// or stalled past a sweep's grace period.
func StaleIntentKeys(ctx context.Context, q Querier, d dbopen.Dialect, after string, maxAgeMS int64, limit int) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT object_key FROM claimcheck_intent
		WHERE object_key > $1 AND recorded_ms < `+NowMS(d)+` - $2 ORDER BY object_key LIMIT $3`, after, maxAgeMS, limit)
	if err != nil {
		return nil, fmt.Errorf("query the stale check-in intents: %w", err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("read the stale check-in intents: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the stale check-in intents: %w", err)
	}
	return keys, nil
}

// Placeholders returns "$first,$first+1,…" for values, and values as args.
func Placeholders(values []string, first int) (string, []any) {
	marks := make([]string, len(values))
	args := make([]any, len(values))
	for i, v := range values {
		marks[i] = "$" + strconv.Itoa(first+i)
		args[i] = v
	}
	return strings.Join(marks, ","), args
}

// InTx runs fn in a transaction of db, committed if fn returns nil.
func InTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
