// Package pipelinetest is the job-store conformance suite of package
// pipeline, after River's riverdrivertest: one set of tests that every job
// database the pipeline supports must pass, so that "works on SQLite" and
// "works on PostgreSQL" mean the same thing.
//
// A backend runs it with a function returning a Config for a fresh, empty,
// isolated database per test:
//
//	func TestConformancePostgres(t *testing.T) {
//		pipelinetest.RunConformance(t, func(t *testing.T) pipeline.Config {
//			return pipeline.Config{Database: pipelinetest.PostgresDatabase(t)}
//		})
//	}
//
// The suite supplies the object store (a file:// store in a temporary
// directory) and the settings each test needs; it keeps the returned
// Config's other fields (Logger, MaxConns, SkipMigrations, …).
package pipelinetest

import (
	"testing"

	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// EnvDatabaseURL names the environment variable holding the PostgreSQL
// database PostgreSQL tests use, e.g.
// postgres://postgres@127.0.0.1:5432/claimcheck_test?sslmode=disable.
// Tests needing it skip, saying so, when it is unset.
const EnvDatabaseURL = dbtest.EnvPostgresURL

// SQLiteDatabase returns the Database of a fresh SQLite file in a temporary
// directory removed when t ends.
func SQLiteDatabase(t testing.TB) string {
	t.Helper()
	return dbtest.SQLite(t)
}

// PostgresDatabase returns the Database of a fresh schema of its own in the
// database at $CLAIMCHECK_TEST_DATABASE_URL (the URL with search_path set),
// dropped with everything in it when t ends. It skips t when the variable is
// unset, and creates the database if it does not exist.
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	return dbtest.Postgres(t)
}

// PostgresURL returns $CLAIMCHECK_TEST_DATABASE_URL itself, skipping t,
// with a message saying how to run it, when the variable is unset.
func PostgresURL(t testing.TB) string {
	t.Helper()
	return dbtest.PostgresURL(t)
}
