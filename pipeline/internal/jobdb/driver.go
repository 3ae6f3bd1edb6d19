package jobdb

import (
	"database/sql"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// PostgresDriver is River's driver for a PostgreSQL job database, on one
// pgx pool and the *sql.DB over it (dbopen.OpenPostgres): River's own
// statements (fetch, completion, rescue, leadership, the maintenance, a
// non-transactional Insert, JobList...) go through its pgx driver on the
// pool, and a caller's *sql.Tx (EnqueueTx, the completion of a job with a
// result, JobCompleteTx) through its database/sql driver, so that
// transactions stay database/sql's. Through River's database/sql driver
// (database/sql's layers, its lib/pq array parameters) River's fetch and
// completer were a fifth of a small worked job's CPU, the fetch alone 12%
// (9% through the pgx driver).
//
// River's client calls UnwrapTx only on what UnwrapExecutor returned (it
// never hands a pool executor's transaction back as a TTx), so the two
// executors never meet there. River UI does unwrap the transactions it
// begins: it gets a client on the database/sql driver alone (Tools,
// Pipeline.RiverClient).
type PostgresDriver struct {
	*riverpgxv5.Driver
	tx *riverdatabasesql.Driver
	// listen is River's pgx driver on the listener pool (dbopen.ListenerPool,
	// no stall watchdog), for the LISTEN connection; nil: no listener.
	listen *riverpgxv5.Driver
}

var _ riverdriver.Driver[*sql.Tx] = (*PostgresDriver)(nil)

// newPostgresDriver is the driver over pool and db (the same pool), with
// River's LISTEN connection from listen (nil: none; the workers poll).
func newPostgresDriver(pool *pgxpool.Pool, db *sql.DB, listen *pgxpool.Pool) *PostgresDriver {
	d := &PostgresDriver{Driver: riverpgxv5.New(pool), tx: riverdatabasesql.New(db)}
	if listen != nil {
		d.listen = riverpgxv5.New(listen)
	}
	return d
}

func (d *PostgresDriver) UnwrapExecutor(tx *sql.Tx) riverdriver.ExecutorTx {
	return d.tx.UnwrapExecutor(tx)
}

func (d *PostgresDriver) UnwrapTx(execTx riverdriver.ExecutorTx) *sql.Tx {
	return d.tx.UnwrapTx(execTx)
}

func (d *PostgresDriver) SupportsListener() bool {
	return d.listen != nil && d.Driver.SupportsListener()
}

func (d *PostgresDriver) GetListener(params *riverdriver.GetListenenerParams) riverdriver.Listener {
	if d.listen == nil {
		panic(riverdriver.ErrNotImplemented)
	}
	return d.listen.GetListener(params)
}

// Tools is River's database/sql driver alone, over the same *sql.DB: for
// a client whose callers unwrap the transactions it begins into *sql.Tx
// (River UI: Pipeline.RiverClient). This driver's own executor begins
// pgx transactions, which UnwrapTx cannot turn into one.
func (d *PostgresDriver) Tools() *riverdatabasesql.Driver { return d.tx }
