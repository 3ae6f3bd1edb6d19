// Package dbtest gives each test a fresh, isolated job database: a SQLite
// file in the test's temporary directory, or a PostgreSQL schema of its own
// in the database named by CLAIMCHECK_TEST_DATABASE_URL, dropped when the
// test ends. Package pipelinetest exports the same helpers.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/claimcheck/claimcheck/internal/dbopen"
)

// EnvPostgresURL names the environment variable holding the PostgreSQL
// database tests use, e.g.
// postgres://postgres@127.0.0.1:5432/claimcheck_test?sslmode=disable.
// Tests needing PostgreSQL skip when it is unset.
const EnvPostgresURL = "CLAIMCHECK_TEST_DATABASE_URL"

// SchemaPrefix starts the name of every schema Postgres creates.
const SchemaPrefix = "claimcheck_t_"

// SQLite returns the URL of a fresh SQLite database file in a temporary
// directory removed when t ends.
func SQLite(t testing.TB) string {
	t.Helper()
	return "sqlite://" + filepath.Join(t.TempDir(), "jobs.db")
}

// PostgresURL returns $CLAIMCHECK_TEST_DATABASE_URL, skipping t with a
// message saying how to run it when the variable is unset.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvPostgresURL)
	if u == "" {
		t.Skipf("PostgreSQL test skipped: set %s (e.g. postgres://postgres@127.0.0.1:5432/claimcheck_test?sslmode=disable) to run it", EnvPostgresURL)
	}
	return u
}

// Postgres creates a schema of its own for t in the database at
// $CLAIMCHECK_TEST_DATABASE_URL (creating that database if it does not
// exist) and returns the URL with search_path set to it, so River's and the
// registry's tables land there. The schema is dropped, with everything in
// it, when t ends. Skips t when the variable is unset.
func Postgres(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	admin, err := adminDB(base)
	if err != nil {
		t.Fatalf("connect to %s: %v", dbopen.Redact(base), err)
	}
	schema := SchemaPrefix + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := WithSearchPath(base, schema)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// WithSearchPath returns the PostgreSQL URL u with its search_path
// parameter set to schema.
func WithSearchPath(u, schema string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("%s: %v", dbopen.Redact(u), err)
	}
	q := pu.Query()
	q.Set("search_path", schema)
	pu.RawQuery = q.Encode()
	return pu.String(), nil
}

var (
	adminMu  sync.Mutex
	adminDBs = map[string]*sql.DB{}
)

// adminDB is a small pool on the test database, shared by a test binary's
// tests; it lives as long as the process.
func adminDB(u string) (*sql.DB, error) {
	adminMu.Lock()
	defer adminMu.Unlock()
	if db, ok := adminDBs[u]; ok {
		return db, nil
	}
	target, err := dbopen.Parse(u)
	if err != nil {
		return nil, err
	}
	if target.Dialect != dbopen.Postgres {
		return nil, fmt.Errorf("%s is not a postgres:// URL", EnvPostgresURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := dbopen.Open(ctx, target, &dbopen.Options{MaxConns: 2})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "3D000" { // invalid_catalog_name
		if err := createDatabase(ctx, u); err != nil {
			return nil, err
		}
		db, err = dbopen.Open(ctx, target, &dbopen.Options{MaxConns: 2})
	}
	if err != nil {
		return nil, err
	}
	adminDBs[u] = db
	return db, nil
}

// createDatabase creates the database u names, connecting to the server's
// postgres database to do so.
func createDatabase(ctx context.Context, u string) error {
	pu, err := url.Parse(u)
	if err != nil {
		return err
	}
	name := pu.Path[1:]
	pu.Path = "/postgres"
	q := pu.Query()
	q.Del("search_path")
	pu.RawQuery = q.Encode()
	target, err := dbopen.Parse(pu.String())
	if err != nil {
		return err
	}
	db, err := dbopen.Open(ctx, target, &dbopen.Options{MaxConns: 1})
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "CREATE DATABASE "+quoteIdent(name))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: another test binary won
		return nil
	}
	return err
}

func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
