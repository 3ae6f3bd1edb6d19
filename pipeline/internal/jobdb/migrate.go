// Package jobdb is the job database under package pipeline: opening it
// (SQLite or PostgreSQL, internal/dbopen) with River's driver, and its
// schema, River's migrations and the claims registry's steps (Migrate,
// CheckMigrated). Package pipeline re-exports Migrate and its result types.
package jobdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
)

// ErrNotMigrated is returned (wrapped, together with claimcheck.ErrConfig)
// by Open with Config.SkipMigrations when the database lacks River's or the
// claims registry's schema, or part of it. Run Migrate (the `claimcheck
// migrate` command) first.
var ErrNotMigrated = errors.New("database schema is not migrated")

// Migration components, in MigrationApplied.Component.
const (
	ComponentRiver    = "river"
	ComponentRegistry = "claims-registry"
)

// MigrationApplied is one schema change Migrate applied.
type MigrationApplied struct {
	// Component is ComponentRiver, ComponentRegistry or ComponentStorage.
	Component string `json:"component"`
	// Version is River's migration version; registry and storage steps
	// count from 1.
	Version int `json:"version"`
	// Name describes the change.
	Name string `json:"name"`
	// Duration is how long it took.
	Duration time.Duration `json:"duration_ns"`
}

// MigrateResult reports a Migrate.
type MigrateResult struct {
	// Dialect is "sqlite" or "postgres".
	Dialect string `json:"dialect"`
	// Database names the database, any password redacted.
	Database string `json:"database"`
	// Applied lists the changes made, in order; empty when the schema was
	// already current.
	Applied []MigrationApplied `json:"applied"`
	// Notes say what Migrate left as it was and why: a storage step the
	// server or the role does not allow (the schema is complete without
	// it).
	Notes []string `json:"notes,omitempty"`
}

// registryStep is one step of the claims registry's schema: an object that
// is created, in each dialect's DDL, when it does not exist. The DML that
// uses the registry is portable ($N placeholders, ON CONFLICT DO NOTHING).
type registryStep struct {
	name  string
	table string // the step creates this table…
	index string // …or this index
	// sql creates the object: one statement for both dialects, written
	// with PostgreSQL's column types (registryStep.ddl).
	sql string
	// then, if set, runs after the object is created (portable DML);
	// thenSQLite and thenPG, if set, after it, in their dialect alone.
	then       string
	thenSQLite string
	thenPG     string
}

// ddl is the step's statement in dialect: sql as written on PostgreSQL;
// on SQLite with TIMESTAMPTZ read as TIMESTAMP, the type the registry's
// time columns always had there (registrySchema). The rest of the DDL is
// the same in both.
func (st registryStep) ddl(dialect dbopen.Dialect) string {
	if dialect == dbopen.Postgres {
		return st.sql
	}
	return strings.ReplaceAll(st.sql, "TIMESTAMPTZ", "TIMESTAMP")
}

// thenIn is the step's DML for dialect alone (thenSQLite or thenPG).
func (st registryStep) thenIn(dialect dbopen.Dialect) string {
	if dialect == dbopen.Postgres {
		return st.thenPG
	}
	return st.thenSQLite
}

// registrySchema is the claims registry: one row per object a job refers
// to, written in the same transaction as the job (or, for a result, before
// the job completes). An object with no row here, older than a grace period,
// is an orphan (docs/invariants.md, invariant 6).
//
// created_at is the ticket's check-in time, written in UTC. SQLite keeps the
// TIMESTAMP type it always had (modernc.org/sqlite stores and parses it as
// text with nanoseconds); PostgreSQL uses TIMESTAMPTZ, an absolute instant
// (microseconds) that compares correctly with now() whatever the session's
// TimeZone, where a plain TIMESTAMP would not.
var registrySchema = []registryStep{
	{
		name:  "create table claimcheck_claim",
		table: "claimcheck_claim",
		sql: `CREATE TABLE IF NOT EXISTS claimcheck_claim (
		job_id     BIGINT NOT NULL,
		role       TEXT   NOT NULL,
		object_key TEXT   NOT NULL,
		sha256     TEXT   NOT NULL,
		size       BIGINT NOT NULL,
		tenant     TEXT   NOT NULL,
		created_at TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (job_id, role, object_key)
	)`,
	},
	{
		name:  "create index claimcheck_claim_object_key",
		index: "claimcheck_claim_object_key",
		sql:   `CREATE INDEX IF NOT EXISTS claimcheck_claim_object_key ON claimcheck_claim (object_key)`,
	},
	{
		// The broker consumers' inbox (Pipeline.Inbox): the latest outcome
		// per message id, so a message delivered twice is processed once.
		name:  "create table claimcheck_inbox",
		table: "claimcheck_inbox",
		sql: `CREATE TABLE IF NOT EXISTS claimcheck_inbox (
		message_id TEXT    NOT NULL PRIMARY KEY,
		job_id     BIGINT  NOT NULL,
		kind       TEXT    NOT NULL,
		tenant     TEXT    NOT NULL,
		action     TEXT    NOT NULL,
		attempt    INTEGER NOT NULL,
		reason     TEXT    NOT NULL,
		error      TEXT    NOT NULL,
		result     TEXT,
		updated_at TIMESTAMPTZ NOT NULL
	)`,
	},
	{
		// The inbox per message and consuming queue, which replaces
		// claimcheck_inbox (kept, no longer written): a message the broker
		// copies to several queues is processed once in each. Existing rows
		// move over with the queue "" (transports that name no queue).
		name:  "create table claimcheck_consumed",
		table: "claimcheck_consumed",
		sql: `CREATE TABLE IF NOT EXISTS claimcheck_consumed (
		message_id TEXT    NOT NULL,
		queue      TEXT    NOT NULL,
		job_id     BIGINT  NOT NULL,
		kind       TEXT    NOT NULL,
		tenant     TEXT    NOT NULL,
		action     TEXT    NOT NULL,
		attempt    INTEGER NOT NULL,
		reason     TEXT    NOT NULL,
		error      TEXT    NOT NULL,
		result     TEXT,
		updated_at TIMESTAMPTZ NOT NULL,
		PRIMARY KEY (message_id, queue)
	)`,
		then: `INSERT INTO claimcheck_consumed (message_id, queue, job_id, kind, tenant, action, attempt, reason, error, result, updated_at)
		SELECT message_id, '', job_id, kind, tenant, action, attempt, reason, error, result, updated_at FROM claimcheck_inbox`,
	},
	{
		name:  "create index claimcheck_consumed_job_id",
		index: "claimcheck_consumed_job_id",
		sql:   `CREATE INDEX IF NOT EXISTS claimcheck_consumed_job_id ON claimcheck_consumed (job_id)`,
	},
	{
		// Check-in intents (internal/claimregistry): committed before a check-in
		// writes or reuses its object, removed by the transaction that
		// writes its registry row. recorded_ms is the database's clock.
		name:  "create table claimcheck_intent",
		table: "claimcheck_intent",
		sql: `CREATE TABLE IF NOT EXISTS claimcheck_intent (
		object_key  TEXT   NOT NULL,
		ticket_ns   BIGINT NOT NULL,
		tenant      TEXT   NOT NULL,
		recorded_ms BIGINT NOT NULL,
		PRIMARY KEY (object_key, ticket_ns)
	)`,
	},
	{
		// The job database's identity and the store namespaces it owns
		// (pipeline/internal/checkin/namespace.go): name → value.
		name:  "create table claimcheck_meta",
		table: "claimcheck_meta",
		sql:   `CREATE TABLE IF NOT EXISTS claimcheck_meta (name TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL)`,
	},
	{
		// The broker consumers' releases (Pipeline.Inbox): per message and
		// consuming queue, how many deliveries of its latest publish
		// (delivery_id, the transport's id) a stopping consumer returned
		// unworked; they spend no attempt (broker.Released).
		name:  "create table claimcheck_released",
		table: "claimcheck_released",
		sql: `CREATE TABLE IF NOT EXISTS claimcheck_released (
		message_id  TEXT    NOT NULL,
		queue       TEXT    NOT NULL,
		delivery_id TEXT    NOT NULL,
		released    INTEGER NOT NULL,
		PRIMARY KEY (message_id, queue)
	)`,
	},
	{
		// serve's API tokens (internal/apiauth): the SHA-256 of each
		// token, never the token, and the tenants it may act on
		// (comma-separated, or "*" for all). Times are milliseconds since
		// the epoch; revoked_ms is NULL while the token is live.
		name:  "create table claimcheck_token",
		table: "claimcheck_token",
		sql: `CREATE TABLE IF NOT EXISTS claimcheck_token (
		id           TEXT   NOT NULL PRIMARY KEY,
		name         TEXT   NOT NULL,
		token_sha256 TEXT   NOT NULL UNIQUE,
		tenants      TEXT   NOT NULL,
		created_ms   BIGINT NOT NULL,
		revoked_ms   BIGINT
	)`,
	},
	{
		// The key-encryption keys that sealed a payload or result (keys.go):
		// their ids, never the keys, recorded before anything is sealed
		// under them, so that a deployment whose key file is lost is
		// refused a new one (docs/invariants.md). A database that already
		// holds jobs with sealed inline payloads or results, from before
		// keys were recorded, gets the id "(unrecorded)".
		name:  "create table claimcheck_key",
		table: "claimcheck_key",
		sql:   `CREATE TABLE IF NOT EXISTS claimcheck_key (key_id TEXT NOT NULL PRIMARY KEY, first_sealed TIMESTAMPTZ NOT NULL)`,
		thenSQLite: `INSERT INTO claimcheck_key (key_id, first_sealed) SELECT '` + UnrecordedKeyID + `', CURRENT_TIMESTAMP
		WHERE EXISTS (SELECT 1 FROM river_job WHERE ` + SealedJobsSQLite + `) ON CONFLICT DO NOTHING`,
		thenPG: `INSERT INTO claimcheck_key (key_id, first_sealed) SELECT '` + UnrecordedKeyID + `', CURRENT_TIMESTAMP
		WHERE EXISTS (SELECT 1 FROM river_job WHERE ` + SealedJobsPG + `) ON CONFLICT DO NOTHING`,
	},
}

// DB is an open job database with its River driver.
type DB struct {
	Target dbopen.Target
	DB     *sql.DB
	Driver riverdriver.Driver[*sql.Tx]
	// Listen is PostgreSQL's pool for River's LISTEN connection (nil on
	// SQLite, and for Migrate).
	Listen *pgxpool.Pool
}

// Close closes the database and the listener pool.
func (d *DB) Close() error {
	if d.Listen != nil {
		d.Listen.Close()
	}
	return d.DB.Close()
}

// Options are dbopen's and whether River's workers get a LISTEN
// connection (PostgreSQL).
type Options struct {
	dbopen.Options
	Listen bool
}

// Open parses and opens database (a URL as in pipeline.Config.Database).
// Errors: claimcheck.ErrConfig for a URL that does not parse or names an
// unsupported database; the database's errors, wrapped.
func Open(ctx context.Context, database string, opts Options) (*DB, error) {
	target, err := dbopen.Parse(database)
	if err != nil {
		return nil, fmt.Errorf("pipeline: database: %v: %w", err, claimcheck.ErrConfig)
	}
	if target.Dialect != dbopen.Postgres {
		db, err := dbopen.Open(ctx, target, &opts.Options)
		if err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
		return &DB{Target: target, DB: db, Driver: riversqlite.New(db)}, nil
	}
	pool, db, err := dbopen.OpenPostgres(ctx, target, &opts.Options)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	d := &DB{Target: target, DB: db}
	// database/sql over the pool keeps *sql.Tx, so EnqueueTx is the same
	// on both databases, while River's own statements use the pool
	// directly (postgresDriver); a pgx pool of its own gives River's
	// workers their LISTEN connection, so that an insert (its NOTIFY, sent
	// in the inserting transaction) wakes them at once instead of at the
	// next poll (FetchPollInterval): a job's wait was half the poll
	// interval on average.
	if opts.Listen {
		if d.Listen, err = dbopen.ListenerPool(target); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrConfig)
		}
	}
	d.Driver = newPostgresDriver(pool, db, d.Listen)
	return d, nil
}

// Migrate applies River's and the claims registry's pending migrations to
// database (a URL as in Config.Database) and reports what it applied. Open
// does the same unless Config.SkipMigrations is set; operators who run
// migrations separately call this (the `claimcheck migrate` command).
// Several processes may migrate at once: on PostgreSQL they take turns
// under an advisory lock.
//
// Errors: claimcheck.ErrConfig for a database URL that does not parse; the
// database's errors, wrapped.
func Migrate(ctx context.Context, database string) (*MigrateResult, error) {
	d, err := Open(ctx, database, Options{Options: dbopen.Options{MaxConns: 2}})
	if err != nil {
		return nil, err
	}
	defer d.DB.Close()
	return d.Migrate(ctx, nil)
}

// migrateLock serialises migrations of one PostgreSQL schema across
// processes: two processes opening a fresh database at once would otherwise
// both try to create its tables. The lock is per current_schema(), so
// isolated schemas in one database do not wait for each other.
const migrateLock = `SELECT pg_advisory_lock(hashtext('claimcheck-migrate:' || current_schema()))`
const migrateUnlock = `SELECT pg_advisory_unlock(hashtext('claimcheck-migrate:' || current_schema()))`

// Migrate applies River's and the claims registry's pending migrations
// (logger nil: discard River's logs), as the package's Migrate does.
func (d *DB) Migrate(ctx context.Context, logger *slog.Logger) (*MigrateResult, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := rivermigrate.New(d.Driver, &rivermigrate.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("pipeline: migrate: %w", err)
	}
	res := &MigrateResult{Dialect: string(d.Target.Dialect), Database: d.Target.String(), Applied: []MigrationApplied{}}

	if d.Target.Dialect == dbopen.SQLite {
		// One connection, so no lock can be held beside the migrations:
		// run them all in one transaction instead. Its BEGIN IMMEDIATE
		// takes the file's write lock, so processes opening a fresh file at
		// once take turns (each waits up to the busy timeout), and the
		// second finds everything applied. (River deprecates MigrateTx
		// because some PostgreSQL migrations need their own transactions;
		// SQLite's do not, and DDL is transactional there. Migrate, its
		// successor, would run each step in a transaction of its own,
		// with no lock held between reading the applied versions and
		// applying the rest: TestConcurrentOpen's processes would race.)
		tx, err := d.DB.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("pipeline: migrate: begin: %w", err)
		}
		defer tx.Rollback()
		//lint:ignore SA1019 one transaction holds SQLite's write lock across the migrations (see above)
		rr, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, nil)
		if err != nil {
			return nil, fmt.Errorf("pipeline: migrate River schema: %w", err)
		}
		res.addRiver(rr)
		if err := d.migrateRegistry(ctx, d.Driver.UnwrapExecutor(tx), tx, res); err != nil {
			return nil, err
		}
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("pipeline: migrate: commit: %w", err)
		}
		return res, nil
	}

	// PostgreSQL: River applies each migration in its own transaction, as
	// it requires; processes take turns under an advisory lock held on a
	// connection of its own, while the migrations run on the pool's others.
	conn, err := d.DB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("pipeline: migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, migrateLock); err != nil {
		return nil, fmt.Errorf("pipeline: migrate: take the migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), migrateUnlock) //nolint:errcheck // closing the connection releases it too
	rr, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("pipeline: migrate River schema: %w", err)
	}
	res.addRiver(rr)
	if err := d.migrateRegistry(ctx, d.Driver.GetExecutor(), d.DB, res); err != nil {
		return nil, err
	}
	if err := setArgsCompression(ctx, d.DB, res, logger); err != nil {
		return nil, err
	}
	return res, nil
}

func (r *MigrateResult) addRiver(rr *rivermigrate.MigrateResult) {
	for _, v := range rr.Versions {
		r.Applied = append(r.Applied, MigrationApplied{Component: ComponentRiver, Version: v.Version, Name: v.Name, Duration: v.Duration})
	}
}

// migrateRegistry applies the registry steps whose object is missing.
func (d *DB) migrateRegistry(ctx context.Context, exec riverdriver.Executor, db execer, res *MigrateResult) error {
	missing, err := registryMissing(ctx, exec)
	if err != nil {
		return err
	}
	for _, i := range missing {
		step := registrySchema[i]
		start := time.Now()
		if _, err := db.ExecContext(ctx, step.ddl(d.Target.Dialect)); err != nil {
			return fmt.Errorf("pipeline: migrate claims registry (%s): %w", step.name, err)
		}
		for _, stmt := range []string{step.then, step.thenIn(d.Target.Dialect)} {
			if stmt == "" {
				continue
			}
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("pipeline: migrate claims registry (%s): %w", step.name, err)
			}
		}
		res.Applied = append(res.Applied, MigrationApplied{Component: ComponentRegistry, Version: i + 1, Name: step.name, Duration: time.Since(start)})
	}
	return nil
}

// execer is what runs a registry step: a *sql.DB or *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// RegistryStepNames are the claims registry's steps' names, in the order
// Migrate applies them (MigrationApplied.Name; Version is the index + 1).
func RegistryStepNames() []string {
	names := make([]string, len(registrySchema))
	for i, st := range registrySchema {
		names[i] = st.name
	}
	return names
}

// registryMissing returns the indexes of the registry steps whose object
// does not exist.
func registryMissing(ctx context.Context, exec riverdriver.Executor) ([]int, error) {
	var missing []int
	for i, step := range registrySchema {
		var ok bool
		var err error
		if step.table != "" {
			ok, err = exec.TableExists(ctx, &riverdriver.TableExistsParams{Table: step.table})
		} else {
			ok, err = exec.IndexExists(ctx, &riverdriver.IndexExistsParams{Index: step.index})
		}
		if err != nil {
			return nil, fmt.Errorf("pipeline: check claims registry schema: %w", err)
		}
		if !ok {
			missing = append(missing, i)
		}
	}
	return missing, nil
}

// CheckMigrated returns ErrNotMigrated (and ErrConfig) naming what is
// missing, when River's or the registry's schema is not fully applied.
func (d *DB) CheckMigrated(ctx context.Context) error {
	m, err := rivermigrate.New(d.Driver, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("pipeline: check migrations: %w", err)
	}
	v, err := m.Validate(ctx, nil)
	if err != nil {
		return fmt.Errorf("pipeline: check River migrations: %w", err)
	}
	var problems []string
	if !v.OK {
		problems = append(problems, "River: "+strings.Join(v.Messages, "; "))
	}
	missing, err := registryMissing(ctx, d.Driver.GetExecutor())
	if err != nil {
		return err
	}
	for _, i := range missing {
		problems = append(problems, "claims registry: missing step "+registrySchema[i].name)
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("pipeline: %s database %s: %s; run `claimcheck migrate` (pipeline.Migrate) against it, or open without SkipMigrations: %w: %w",
		d.Target.Dialect, d.Target, strings.Join(problems, "; "), ErrNotMigrated, claimcheck.ErrConfig)
}
