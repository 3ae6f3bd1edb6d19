// Package jobs is the job database's claimcheck jobs as package pipeline
// reads and changes them outside its workers: what a job is in River's
// table (model.go: its arguments and output, River kind and queue, which
// rows are claimcheck's), listing and counting (List, Count, Activity),
// one job (Get, JobHistory, Cancel, Replay, Delete, OpenResult), and the
// statistics a console and the metrics read (QueueStats, OutboxStats,
// StorageByTenant). Pipeline forwards to it; its public types are
// pipeline's, by alias.
package jobs

import (
	"database/sql"
	"sync/atomic"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
)

// Jobs reads and operates on the claimcheck jobs of one job database:
// List, Count, Get, Cancel, Replay, Delete, the queue and outbox
// statistics. Package pipeline's Pipeline holds one and forwards its
// methods; their documentation is Pipeline's.
type Jobs struct {
	db      *sql.DB
	dialect dbopen.Dialect
	client  *river.Client[*sql.Tx] // insert-only client
	tools   *river.Client[*sql.Tx] // RiverClient's
	// storeFor is the store a ticket's payload is in (Pipeline's stores).
	storeFor   func(*claimcheck.Ticket) (*claimcheck.Store, error)
	lastQueues atomic.Int64 // unix nanos of the last RegisterQueues
}

// New is the jobs of db (of dialect), through River's clients client
// (insert-only) and tools (Pipeline.RiverClient's), payloads in the stores
// storeFor picks.
func New(db *sql.DB, dialect dbopen.Dialect, client, tools *river.Client[*sql.Tx], storeFor func(*claimcheck.Ticket) (*claimcheck.Store, error)) *Jobs {
	return &Jobs{db: db, dialect: dialect, client: client, tools: tools, storeFor: storeFor}
}

// DBNow is the database's current time, in SQL, in the form River stores
// it.
func DBNow(dialect dbopen.Dialect) string {
	if dialect == dbopen.SQLite {
		return "datetime('now', 'subsec')"
	}
	return "now()"
}

func (p *Jobs) dbNow() string { return DBNow(p.dialect) }
