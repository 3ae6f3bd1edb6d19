package pipeline

import (
	"context"

	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
)

// The job database's schema and its migrations live in
// pipeline/internal/jobdb; these are its public names.

// ErrNotMigrated is returned (wrapped, together with claimcheck.ErrConfig)
// by Open with Config.SkipMigrations when the database lacks River's or the
// claims registry's schema, or part of it. Run Migrate (the `claimcheck
// migrate` command) first.
var ErrNotMigrated = jobdb.ErrNotMigrated

// Migration components, in MigrationApplied.Component.
const (
	ComponentRiver    = jobdb.ComponentRiver
	ComponentRegistry = jobdb.ComponentRegistry
	// ComponentStorage is a storage setting of a table River made, on
	// PostgreSQL: river_job.args compressed with lz4, which inline
	// payloads cost far less CPU to store than with the server's default.
	ComponentStorage = jobdb.ComponentStorage
)

// MigrationApplied is one schema change Migrate applied: its Component
// (ComponentRiver, ComponentRegistry or ComponentStorage), Version
// (River's migration version; registry and storage steps count from 1),
// Name and Duration.
type MigrationApplied = jobdb.MigrationApplied

// MigrateResult reports a Migrate: the Dialect ("sqlite" or "postgres"),
// the Database (any password redacted), the changes Applied, in order
// (empty when the schema was already current), and Notes on what it left
// as it was (a storage step the server or the role does not allow).
type MigrateResult = jobdb.MigrateResult

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
	return jobdb.Migrate(ctx, database)
}
