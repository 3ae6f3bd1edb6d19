// Package sqlitedb opens the embedded job database: SQLite through the pure-Go
// modernc.org/sqlite driver, configured for River.
package sqlitedb

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrNotWritable is returned when the database's directory cannot be
// written.
var ErrNotWritable = errors.New("database directory is not writable")

// Path extracts the file path from "sqlite:///abs/path.db", "sqlite://rel.db"
// or a plain path.
func Path(database string) (string, error) {
	if database == "" {
		return "", errors.New("no database given")
	}
	if !strings.Contains(database, "://") {
		return database, nil
	}
	u, err := url.Parse(database)
	if err != nil {
		return "", fmt.Errorf("database URL does not parse: %v", err)
	}
	if u.Scheme != "sqlite" {
		return "", fmt.Errorf("database scheme %q is not supported (use sqlite:///path/to/file.db)", u.Scheme)
	}
	p := u.Host + u.Path
	if p == "" {
		return "", errors.New("database URL has no path")
	}
	return p, nil
}

// Open opens the SQLite database at database (see Path), creating its
// directory. The pool has one connection, as River's SQLite driver requires;
// WAL mode and a busy timeout let other processes (a submit beside a worker)
// share the file.
func Open(database string) (*sql.DB, error) {
	path, err := Path(database)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create database directory %s: %w: %w", dir, ErrNotWritable, err)
	}
	if probe, err := os.CreateTemp(dir, ".claimcheck-probe-*"); err != nil {
		return nil, fmt.Errorf("database directory %s: %w: %w", dir, ErrNotWritable, err)
	} else {
		probe.Close()
		os.Remove(probe.Name())
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, nil
}
