package jobdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ComponentStorage is the component of a storage setting Migrate changes
// on a table that exists already (setArgsCompression), in
// MigrationApplied.Component.
const ComponentStorage = "storage"

// argsCompressionStep names the one storage step, in MigrationApplied.Name.
const argsCompressionStep = "river_job.args: lz4 compression (TOAST)"

// setArgsCompression, on PostgreSQL 14 and later, sets the TOAST
// compression of river_job.args to lz4 unless it is lz4 already. A job's
// arguments hold its ticket, and a payload of up to the inline threshold
// (64 KiB by default) travels in the ticket: sealed by default, so base64
// of ciphertext, which no compressor shrinks. The server's default method,
// pglz, works through such a value before it gives up, on every insert;
// lz4 costs little either way and still compresses what compresses (an
// unsealed JSON payload). Measured here (PostgreSQL 15): 2,000 rows of
// 40 KB of base64 copied in, 1.46 s of the server's CPU with pglz, 0.55 s
// with lz4, 0.56 s with no compression at all.
//
// It changes a catalog entry, not the table's rows or any query (rows
// already stored keep their compression), once per database, under an
// ACCESS EXCLUSIVE lock held for an instant: the statement waits at most
// 5 s for it (lock_timeout), and River's statements on river_job wait
// behind it meanwhile. When it cannot be done (a server built without
// lz4, a role that does not own river_job, the lock not granted in time),
// the column is left as it was, the job database works as before, and why
// is returned as a note; a later Migrate tries again. Errors: the
// database's, for anything else.
func setArgsCompression(ctx context.Context, db *sql.DB, res *MigrateResult, logger *slog.Logger) error {
	var version int
	if err := db.QueryRowContext(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return fmt.Errorf("pipeline: migrate storage: server version: %w", err)
	}
	if version < 140000 { // column compression is PostgreSQL 14's
		return nil
	}
	var method string
	if err := db.QueryRowContext(ctx, `SELECT attcompression::text FROM pg_attribute
		WHERE attrelid = 'river_job'::regclass AND attname = 'args' AND NOT attisdropped`).Scan(&method); err != nil {
		return fmt.Errorf("pipeline: migrate storage: read river_job.args' compression: %w", err)
	}
	if method == "l" {
		return nil
	}
	start := time.Now()
	err := setArgsLZ4(ctx, db)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "0A000", "42501", "55P03": // feature_not_supported (no lz4), insufficient_privilege, lock_not_available
			note := fmt.Sprintf("%s left as it was (%s, SQLSTATE %s): inline payloads cost the database more CPU; Migrate tries again next time",
				argsCompressionStep, pgErr.Message, pgErr.Code)
			res.Notes = append(res.Notes, note)
			logger.InfoContext(ctx, "pipeline: migrate: "+note)
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("pipeline: migrate storage (%s): %w", argsCompressionStep, err)
	}
	res.Applied = append(res.Applied, MigrationApplied{Component: ComponentStorage, Version: 1, Name: argsCompressionStep, Duration: time.Since(start)})
	return nil
}

// setArgsLZ4 is setArgsCompression's statement, in a transaction of its own
// whose lock_timeout bounds its wait for the table's lock.
func setArgsLZ4(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if _, err := tx.ExecContext(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `ALTER TABLE river_job ALTER COLUMN args SET COMPRESSION lz4`); err != nil {
		return err
	}
	return tx.Commit()
}
