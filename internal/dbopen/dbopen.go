// Package dbopen opens the job database named by a URL: the embedded SQLite
// default (pure Go, modernc.org/sqlite) or PostgreSQL (a pgx pool, with
// database/sql over it), each configured for River.
package dbopen

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/ctxio"
)

// Dialect is the kind of database a URL names.
type Dialect string

// Dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DefaultMaxConns is the default size of a PostgreSQL pool.
const DefaultMaxConns = 10

// ErrNotWritable is returned when the database's directory cannot be
// written.
var ErrNotWritable = errors.New("database directory is not writable")

// ErrNoDatabase is returned (wrapped) when Options.MustExist or ReadOnly
// names a SQLite file that does not exist.
var ErrNoDatabase = errors.New("no such database file")

// Target is a parsed database URL.
type Target struct {
	Dialect Dialect
	// Path is the SQLite database file.
	Path string
	// URL is the PostgreSQL connection URL, as given.
	URL string
}

// String is the database for messages: a PostgreSQL URL with its password
// redacted, or the SQLite file's path.
func (t Target) String() string {
	if t.Dialect == Postgres {
		return Redact(t.URL)
	}
	return t.Path
}

// Parse reads a database URL: "sqlite:///abs/path.db", "sqlite://rel.db", a
// plain path (SQLite), or "postgres://…" / "postgresql://…" (PostgreSQL, in
// pgx's URL syntax: user, password, host, port, database and parameters such
// as sslmode or search_path).
func Parse(database string) (Target, error) {
	if database == "" {
		return Target{}, errors.New("no database given")
	}
	if !strings.Contains(database, "://") {
		return Target{Dialect: SQLite, Path: database}, nil
	}
	scheme, rest, _ := strings.Cut(database, "://")
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		database = strings.ToLower(scheme) + "://" + rest // pgx wants it lowercase
		t := Target{Dialect: Postgres, URL: database}
		if _, _, err := t.pgConfig(); err != nil {
			return Target{}, err
		}
		return t, nil
	case "sqlite":
	default:
		return Target{}, fmt.Errorf("database scheme %q is not supported (use sqlite:///path/to/file.db or postgres://user@host:5432/dbname)", scheme)
	}
	u, err := url.Parse(database)
	if err != nil {
		return Target{}, fmt.Errorf("database URL does not parse: %v", err)
	}
	p := u.Host + u.Path
	if p == "" {
		return Target{}, errors.New("database URL has no path")
	}
	return Target{Dialect: SQLite, Path: p}, nil
}

// Redact hides the password of a URL, for messages and logs.
func Redact(database string) string {
	u, err := url.Parse(database)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Options tune Open.
type Options struct {
	// MaxConns bounds a PostgreSQL pool. Default DefaultMaxConns. SQLite
	// always has one connection.
	MaxConns int
	// SQLiteCacheKiB caps SQLite's page cache, in KiB (PRAGMA cache_size,
	// https://sqlite.org/pragma.html#pragma_cache_size). 0 keeps SQLite's
	// default, 2000 KiB.
	SQLiteCacheKiB int
	// MustExist refuses a SQLite file that does not exist (ErrNoDatabase)
	// instead of creating it.
	MustExist bool
	// ReadOnly opens a SQLite file for reading only, writing nothing
	// (implies MustExist): mode=ro, no directory created and no probe
	// written; and, when the file has no write-ahead log beside it (no
	// process has it open) and its directory is read-only (not writable by
	// this process, or without any write permission bit, as a chmod a-w
	// snapshot is even for root), immutable=1, so that SQLite creates no
	// -wal or -shm file either (https://sqlite.org/uri.html#uriimmutable).
	// Ignored for PostgreSQL.
	ReadOnly bool
}

// Open opens the database t names and checks it answers.
//
// SQLite: the file's directory is created; the pool has one connection, as
// River's SQLite driver requires; WAL mode and a busy timeout let other
// processes (a submit beside a worker) share the file.
//
// PostgreSQL: OpenPostgres's pool of up to MaxConns connections, so one
// process can enqueue and work concurrently, and several processes can
// share the database; closing the *sql.DB closes the pool.
func Open(ctx context.Context, t Target, opts *Options) (*sql.DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	switch t.Dialect {
	case SQLite:
		cache := 0
		if opts != nil {
			cache = opts.SQLiteCacheKiB
		}
		return openSQLite(ctx, t.Path, cache, opts.MustExist || opts.ReadOnly, opts.ReadOnly)
	case Postgres:
		_, db, err := OpenPostgres(ctx, t, opts)
		return db, err
	}
	return nil, fmt.Errorf("unknown database dialect %q", t.Dialect)
}

func openSQLite(ctx context.Context, path string, cacheKiB int, mustExist, readOnly bool) (*sql.DB, error) {
	dir := filepath.Dir(path)
	if mustExist {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("SQLite database %s does not exist (check --database; only submit, work, run and migrate create one): %w: %w", path, ErrNoDatabase, claimcheck.ErrConfig)
		} else if err != nil {
			return nil, fmt.Errorf("SQLite database %s: %w", path, err)
		}
	}
	if readOnly {
		dsn := "file:" + path + "?mode=ro&_pragma=busy_timeout(10000)"
		if _, err := os.Stat(path + "-wal"); errors.Is(err, os.ErrNotExist) && dirReadOnly(dir) {
			dsn += "&immutable=1"
		}
		if cacheKiB > 0 {
			dsn += fmt.Sprintf("&_pragma=cache_size(-%d)", cacheKiB)
		}
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
		db.SetMaxOpenConns(1)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("open database %s read-only: %w", path, err)
		}
		return db, nil
	}
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
	if cacheKiB > 0 {
		dsn += fmt.Sprintf("&_pragma=cache_size(-%d)", cacheKiB)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db.SetMaxOpenConns(1)
	if err := pingSQLite(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, nil
}

// sqliteOpenBusy bounds how long opening a SQLite database waits for
// other processes opening it at the same moment. The first connection to
// a fresh file turns on WAL mode, which takes the database's exclusive
// lock; SQLite answers SQLITE_BUSY at once, without calling the busy
// handler, to a connection that meets that lock while it is being
// changed (https://www.sqlite.org/wal.html, "Sometimes Queries Return
// SQLITE_BUSY In WAL Mode"), so busy_timeout alone does not cover it.
const sqliteOpenBusy = 30 * time.Second

// pingSQLite opens db's connection, trying again while SQLite answers
// SQLITE_BUSY, for at most sqliteOpenBusy.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(sqliteOpenBusy)
	wait := 10 * time.Millisecond
	for {
		err := db.PingContext(ctx)
		if err == nil || !isSQLiteBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// isSQLiteBusy reports whether err is SQLite's SQLITE_BUSY (primary
// result code 5; https://www.sqlite.org/rescode.html#busy).
func isSQLiteBusy(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 5
}

// Bounds on PostgreSQL connections, so that a partitioned or silent server
// fails a call (claimcheck.ErrUnavailable, cause claimcheck.ErrTimeout,
// naming host:port) instead of blocking it: each TCP connection attempt
// within the URL's connect_timeout (pgx's and libpq's parameter, in
// seconds; default claimcheck.DefaultConnectTimeout, 10 s), and no
// connection silent for longer than its stall_timeout (claimcheck's
// parameter, a Go duration from 100ms to 1h; default
// claimcheck.DefaultStallTimeout, 20 s) while the start-up or a statement
// waits for its answer (ctxio.Dialer). claimcheck's statements are short,
// and River's LISTEN has a pool of its own (ListenerPool), so a connection
// silent that long has lost its server.
const (
	DefaultConnectTimeout = claimcheck.DefaultConnectTimeout
	DefaultStallTimeout   = claimcheck.DefaultStallTimeout
)

// pgConfig parses t's URL into pgx's configuration, with the bounds
// above, and returns the stall timeout.
func (t Target) pgConfig() (*pgx.ConnConfig, time.Duration, error) {
	stall := DefaultStallTimeout
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil, 0, fmt.Errorf("PostgreSQL URL %s does not parse", Redact(t.URL))
	}
	q := u.Query()
	if v := q.Get("stall_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond || d > time.Hour {
			return nil, 0, fmt.Errorf("PostgreSQL URL %s: stall_timeout=%q: use a duration from 100ms to 1h, such as 20s", Redact(t.URL), v)
		}
		stall = d
		q.Del("stall_timeout") // pgx would send it to the server as a setting
		u.RawQuery = q.Encode()
	}
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		// pgx's message quotes the URL; say what is wrong without it.
		return nil, 0, fmt.Errorf("PostgreSQL URL %s does not parse", Redact(t.URL))
	}
	connect := cfg.ConnectTimeout
	if connect == 0 {
		connect = DefaultConnectTimeout
	}
	// The dialer bounds the TCP connection and the stall watchdog the rest
	// of the start-up, so that each failure names its cause and endpoint
	// (pgx's own connect timeout would end it as a bare context deadline).
	cfg.ConnectTimeout = 0
	d := ctxio.Dialer{Connect: connect, Stall: stall, KeepAlive: 30 * time.Second}
	cfg.DialFunc = d.DialContext
	return cfg, stall, nil
}

// OpenPostgres opens the PostgreSQL database t names: a pgx pool of up to
// opts.MaxConns connections (default DefaultMaxConns), bounded as above,
// each with pq's arrays encoded directly (encodePQArrays), idle ones
// closed after 5 minutes; and a *sql.DB over the same pool, for
// database/sql callers (EnqueueTx's *sql.Tx), whose Close closes the pool
// too. The *sql.DB keeps no idle connection of its own: each statement or
// transaction borrows one of the pool's and gives it back, so that the
// two never hold more than MaxConns together. River's pgx driver works on
// the pool directly. It checks the database answers. Errors:
// claimcheck.ErrUnavailable (naming the server) when it does not; a URL
// that does not parse.
func OpenPostgres(ctx context.Context, t Target, opts *Options) (*pgxpool.Pool, *sql.DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	cfg, _, err := t.pgConfig()
	if err != nil {
		return nil, nil, err
	}
	n := opts.MaxConns
	if n <= 0 {
		n = DefaultMaxConns
	}
	pc, err := poolConfig(t, cfg, n)
	if err != nil {
		return nil, nil, err
	}
	pc.AfterConnect = encodePQArrays
	pc.MaxConnIdleTime = 5 * time.Minute
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, nil, fmt.Errorf("PostgreSQL %s: pool: %w", t, err)
	}
	db := sql.OpenDB(poolConnector{Connector: stdlib.GetPoolConnector(pool), pool: pool})
	db.SetMaxIdleConns(0) // the pool keeps them (stdlib.OpenDBFromPool does the same)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, claimcheck.Unavailable("connect to PostgreSQL "+t.String(), err)
	}
	return pool, db, nil
}

// poolConnector is pgx's database/sql connector on a pool, which DB.Close
// closes with the *sql.DB (database/sql calls a connector's Close).
type poolConnector struct {
	driver.Connector
	pool *pgxpool.Pool
}

func (c poolConnector) Close() error {
	c.pool.Close()
	return nil
}

// poolConfig is a pgx pool configuration of at most maxConns connections
// of cfg, none opened until one is needed.
func poolConfig(t Target, cfg *pgx.ConnConfig, maxConns int) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL URL %s: pool: %w", Redact(t.URL), err)
	}
	pc.ConnConfig = cfg
	pc.MaxConns, pc.MinConns = int32(min(maxConns, math.MaxInt32)), 0
	return pc, nil
}

// ListenerPool is a pgx pool for River's LISTEN connection on the
// PostgreSQL database t names (River's pgx listener): the
// same server, credentials and parameters (search_path among them) as
// OpenPostgres's pool, at most one connection, none opened until a River client
// that works jobs starts. Its connections are bounded at connect
// (Target's connect timeout) but have no stall watchdog: a listener waits
// in a read for as long as no job is inserted, which is not a stall (TCP
// keep-alives find a dead peer). Errors: a URL that does not parse (its
// credentials redacted).
func ListenerPool(t Target) (*pgxpool.Pool, error) {
	if t.Dialect != Postgres {
		return nil, fmt.Errorf("a listener needs PostgreSQL, not %s", t.Dialect)
	}
	cfg, _, err := t.pgConfig()
	if err != nil {
		return nil, err
	}
	connect := DefaultConnectTimeout
	if u, err := url.Parse(t.URL); err == nil {
		if c, err := pgx.ParseConfig(u.String()); err == nil && c.ConnectTimeout > 0 {
			connect = c.ConnectTimeout
		}
	}
	cfg.DialFunc = ctxio.Dialer{Connect: connect, KeepAlive: 30 * time.Second}.DialContext
	pc, err := poolConfig(t, cfg, 1)
	if err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(context.Background(), pc)
}

// DialectOf tells which kind of database an open *sql.DB is, from its
// driver: PostgreSQL for pgx's database/sql driver, SQLite otherwise (the
// only other driver Open uses).
func DialectOf(db *sql.DB) Dialect {
	if _, ok := db.Driver().(*stdlib.Driver); ok {
		return Postgres
	}
	return SQLite
}
