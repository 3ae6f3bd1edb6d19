// Package pipeline is claimcheck's job pipeline on River: the transactional
// outbox that enqueues tickets, and the workers that claim, verify and
// process their payloads.
//
// The embedded default is River on SQLite (pure Go, modernc.org/sqlite) in
// the data directory; at scale, River on PostgreSQL, shared by any number of
// producer and worker processes. Both are migrated automatically on Open
// (see Config.SkipMigrations and Migrate). Enqueueing checks the payload in
// first, then writes the claims-registry row and the job carrying the ticket
// in one transaction (docs/invariants.md, invariant 1). A claimcheck kind
// maps to a River queue and a River job kind of the same name, so a worker
// works exactly the kinds it has handlers for (docs/invariants.md, "River
// kinds"). Dead letters are River's cancelled jobs (permanent failure,
// on the attempt that failed) and discarded jobs (transient failures past the
// maximum attempts).
//
// The behaviour is the same on both databases; the conformance suite in
// package pipelinetest runs against each.
package pipeline

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/pipeline/internal/checkin"
	"github.com/claimcheck/claimcheck/pipeline/internal/enqueue"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobtel"
	"github.com/claimcheck/claimcheck/pipeline/internal/worker"
)

// Defaults, each overridable in Config.
const (
	// DefaultMaxAttempts bounds attempts of a job failing transiently.
	DefaultMaxAttempts = claimcheck.DefaultMaxAttempts
	// DefaultJobTimeout suits large payloads (River's own default is 1 min).
	DefaultJobTimeout = 30 * time.Minute
	// DefaultDeadLetterRetention keeps dead letters (cancelled and discarded
	// jobs) for 14 days; River's defaults are 24 h and 7 days.
	DefaultDeadLetterRetention = 14 * 24 * time.Hour
	// DefaultMaxMessageSize is the largest job argument, in bytes, the
	// pipeline accepts: 256 KiB, the SQS default, so tickets made for this
	// pipeline travel on any broker claimcheck supports.
	DefaultMaxMessageSize = 256 << 10
	// DefaultRetryBase is the first retry's delay; each later retry doubles
	// it, up to five minutes, with jitter.
	DefaultRetryBase = claimcheck.DefaultRetryBase
	// DefaultLease is how long a running job is held for its worker after
	// the worker last renewed it (every quarter lease while the handler
	// runs). A job whose worker died is rescued within the lease plus the
	// rescuer's interval (30 s, River's): 2.5 min with the defaults.
	DefaultLease = 2 * time.Minute
)

// DefaultRetryWindow is the retry window of a pipeline with the default job
// timeout and lease and maxAttempts attempts (claimcheck.RetryWindow): how
// long unavailable infrastructure is retried, and the retry window that
// retention must cover.
func DefaultRetryWindow(maxAttempts int) time.Duration {
	return claimcheck.RetryWindow(maxAttempts, DefaultJobTimeout, DefaultLease)
}

// Config configures a Pipeline.
type Config struct {
	// Database is where jobs live. Required. Either SQLite,
	// "sqlite:///abs/path/file.db" or a plain file path, or PostgreSQL,
	// "postgres://user:password@host:5432/dbname?sslmode=disable" (also
	// postgresql://; pgx's URL syntax and parameters). On PostgreSQL,
	// search_path=schema in the URL keeps River's and the registry's tables
	// in that schema, which must exist.
	Database string
	// SkipMigrations makes Open leave the schema alone, for operators who
	// run migrations separately (Migrate, `claimcheck migrate`). Open then
	// fails with ErrNotMigrated if River's or the registry's schema is
	// missing or behind.
	SkipMigrations bool
	// MaxConns bounds the PostgreSQL connection pool of this Pipeline
	// (River's fetches and completions, registry writes, EnqueueTx callers'
	// transactions). Default DefaultMaxConns; raise it with Work's
	// Concurrency. SQLite always uses one connection.
	MaxConns int
	// SQLiteCacheKiB caps SQLite's page cache, in KiB; 0 keeps SQLite's
	// default (2000 KiB). A relay, which reads each entry once, needs
	// little: the cache is what would otherwise let its memory grow with
	// the job table, up to the cap. Ignored for PostgreSQL.
	SQLiteCacheKiB int
	// Store holds the payloads: the default store, where a job goes when
	// EnqueueOptions.Store names none. Required; the Pipeline does not
	// close it.
	Store *claimcheck.Store
	// Stores are further named stores (each by its
	// claimcheck.Options.Name, valid per ValidateStoreName, no two alike
	// nor like Store's), for producers that name the store a job's
	// payload goes to (EnqueueOptions.Store) and for workers pinned to
	// their region: Work takes only jobs of Store and Stores, leaving the
	// others' jobs in their queues for workers that have those stores
	// (StoreQueue). Optional; the Pipeline does not close them.
	Stores []*claimcheck.Store
	// JobTimeout is how long one attempt may run. Default DefaultJobTimeout.
	JobTimeout time.Duration
	// DeadLetterRetention is how long dead jobs are kept before River prunes
	// them. Default DefaultDeadLetterRetention.
	DeadLetterRetention time.Duration
	// MaxMessageSize is the largest job argument in bytes; the store's
	// inline threshold must fit (ErrConfig otherwise). Default
	// DefaultMaxMessageSize.
	MaxMessageSize int64
	// Lease is how long a running job stays with its worker after the last
	// renewal; see DefaultLease. Default DefaultLease.
	Lease time.Duration
	// Retry is the retry policy: Retry.MaxAttempts bounds the attempts of
	// a job that fails transiently before it is discarded (dead), default
	// DefaultMaxAttempts; Retry.Base is the first retry's delay, default
	// DefaultRetryBase; Retry.Window defaults to
	// claimcheck.RetryWindow(Retry.MaxAttempts, JobTimeout, Lease); the
	// rest default as claimcheck.RetryPolicy's.
	Retry claimcheck.RetryPolicy
	// Logger receives River's and the workers' logs. Default: discard.
	Logger *slog.Logger
	// ReadOnly opens for reading only: Open writes no namespace marker and
	// no database identity (it still refuses a namespace another job
	// database owns).
	ReadOnly bool
	// MustExist refuses a SQLite Database file that does not exist
	// (ErrConfig, naming the file) instead of creating an empty one.
	MustExist bool
	// NoWrites opens for reading only and writes nothing at all: as
	// ReadOnly and MustExist, the SQLite file opened read-only
	// (dbopen.Options.ReadOnly: nothing written beside it, even on a
	// read-only directory), and the schema checked, never migrated (as
	// SkipMigrations). Use only the methods that read (Get, List, Stats,
	// DeadLetters...).
	NoWrites bool
}

// Pipeline enqueues and works claimcheck jobs on River.
type Pipeline struct {
	cfg     Config
	db      *sql.DB
	dialect dbopen.Dialect
	store   *claimcheck.Store // the default store (Config.Store)
	// stores are every store by name, the default one included;
	// storeNames their names, the default store's first.
	stores     map[string]*claimcheck.Store
	storeNames []string
	driver     riverdriver.Driver[*sql.Tx]
	listen     *pgxpool.Pool          // PostgreSQL: River's LISTEN connection (nil otherwise)
	client     *river.Client[*sql.Tx] // insert-only client
	jobs       *jobs.Jobs             // the jobs as List, Get, Cancel... read and change them (listing.go)
	tools      *river.Client[*sql.Tx] // RiverClient's: client, or on PostgreSQL one on River's database/sql driver alone (jobdb.PostgresDriver.Tools)
	logger     *slog.Logger
	tel        *jobtel.Instruments
	gauges     metric.Registration // the observable gauges' (registerGauges), nil if none
	gaugeNow   func() time.Time    // the gauges' clock (nil: time.Now), for tests
	dbID       string              // claimcheck_meta's database_id (checkin.DatabaseID)
	unchecked  []string            // stores whose namespace a read-only Open could not check (NamespaceUnchecked)
	ci         *checkin.Intents    // check-ins with their intents, key records (intent.go)
	work       *worker.Host        // what Work's and the relay's workers share (work.go)
	insert     *enqueue.Host       // the inserts of jobs and outbox entries (enqueue.go)
}

// Open opens the job database (creating a SQLite file if needed), applies
// River's and the claims registry's migrations unless SkipMigrations is set,
// and returns a Pipeline.
//
// Open then checks that this job database owns the store's namespace
// (claimcheck.NamespaceMarkerKey), claiming it on first use, before anything
// reads or deletes an object: a sweep driven by another database's registry
// would take this one's live payloads for orphans.
//
// Errors: claimcheck.ErrConfig for a missing store, a bad database URL, or an
// inline threshold whose tickets exceed MaxMessageSize;
// claimcheck.ErrNamespaceOwned (with ErrConfig) naming both databases when
// another job database owns the store's namespace; ErrNotMigrated (with
// ErrConfig) with SkipMigrations on an unmigrated database; otherwise the
// database's error, wrapped.
func Open(ctx context.Context, cfg Config) (*Pipeline, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("pipeline: no store: %w", claimcheck.ErrConfig)
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = DefaultJobTimeout
	}
	if cfg.DeadLetterRetention <= 0 {
		cfg.DeadLetterRetention = DefaultDeadLetterRetention
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = DefaultMaxMessageSize
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Retry.MaxAttempts <= 0 {
		cfg.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Retry.Window <= 0 {
		cfg.Retry.Window = claimcheck.RetryWindow(cfg.Retry.MaxAttempts, cfg.JobTimeout, cfg.Lease)
	}
	cfg.Retry = cfg.Retry.WithDefaults()
	stores, storeNames, err := initStores(&cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NoWrites {
		cfg.ReadOnly, cfg.MustExist, cfg.SkipMigrations = true, true, true
	}
	d, err := jobdb.Open(ctx, cfg.Database, jobdb.Options{Options: dbopen.Options{MaxConns: cfg.MaxConns, SQLiteCacheKiB: cfg.SQLiteCacheKiB, MustExist: cfg.MustExist, ReadOnly: cfg.NoWrites},
		Listen: !cfg.NoWrites})
	if err != nil {
		return nil, err
	}
	if cfg.SkipMigrations {
		err = d.CheckMigrated(ctx)
	} else {
		_, err = d.Migrate(ctx, logger)
	}
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	p := &Pipeline{cfg: cfg, db: d.DB, listen: d.Listen, dialect: d.Target.Dialect, store: cfg.Store, stores: stores, storeNames: storeNames, driver: d.Driver, logger: logger, tel: jobtel.New(cfg.Store)}
	p.ci = &checkin.Intents{DB: p.db, Dialect: p.dialect, Logger: logger, StoreFor: p.storeFor}
	if p.dbID, err = checkin.DatabaseID(ctx, d.DB, !cfg.ReadOnly); err == nil {
		for _, st := range p.Stores() {
			var unchecked string
			if unchecked, err = checkin.ClaimNamespace(ctx, p.db, logger, p.dbID, st, d.Target.String(), cfg.ReadOnly); err != nil {
				break
			}
			if unchecked != "" {
				p.unchecked = append(p.unchecked, unchecked)
			}
		}
	}
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	p.client, err = river.NewClient(p.driver, p.riverConfig(nil))
	p.tools = p.client
	if pd, ok := p.driver.(*jobdb.PostgresDriver); ok && err == nil {
		p.tools, err = river.NewClient(pd.Tools(), p.riverConfig(nil))
	}
	if err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	p.jobs = jobs.New(p.db, p.dialect, p.client, p.tools, p.storeFor)
	p.insert = &enqueue.Host{DB: p.db, Client: p.client, Intents: p.ci, Store: p.store, StoreFor: p.storeFor}
	p.work = &worker.Host{DB: p.db, Dialect: p.dialect, Driver: p.driver, RiverConfig: p.riverConfig, Client: p.client, Jobs: p.jobs,
		Store: p.store, Stores: p.stores, Intents: p.ci, Logger: logger, JobTimeout: cfg.JobTimeout, Lease: cfg.Lease, Retry: cfg.Retry}
	p.registerGauges()
	return p, nil
}

// FetchCooldown is the least time between two fetches of a River client
// (river.Config.FetchCooldown) of a pipeline: River's least
// (river.FetchCooldownMin, 1 ms). The comparisons with plain River
// (internal/benchlab) configure it the same.
const FetchCooldown = river.FetchCooldownMin

func (p *Pipeline) riverConfig(workers *river.Workers) *river.Config {
	return &river.Config{
		CancelledJobRetentionPeriod: p.cfg.DeadLetterRetention,
		DiscardedJobRetentionPeriod: p.cfg.DeadLetterRetention,
		// Workers apply the job timeout themselves; River's timeout is the
		// lease, after which its rescuer takes a job whose heartbeat stopped.
		JobTimeout:           p.cfg.Lease,
		RescueStuckJobsAfter: p.cfg.Lease,
		MaxAttempts:          p.cfg.Retry.MaxAttempts,
		RetryPolicy:          retryPolicy{p.cfg.Retry},
		Logger:               p.logger,
		Workers:              workers,
		// A worker fetches at most every FetchCooldown while jobs keep
		// coming, taking as many as it has free slots, and a slot freed
		// meanwhile waits: with 2 workers and small jobs, 20 ms capped
		// throughput at 2 jobs per 20 ms (97 jobs/s on SQLite and
		// PostgreSQL, bench workload, 400 jobs of 1 B-8 KiB, load 3), 5 ms
		// gave 225 (SQLite) and 320-350 (PostgreSQL) at less CPU per job.
		// At 5 ms the workers still fell behind 2 producers (bench
		// workload, 2,000 jobs of the default mix, PostgreSQL + S3):
		// enqueue → handler p50 196-484 ms against 8.2-10.8 ms at 1 ms
		// (15 ms at 2 ms), at the same jobs/s (216.7 against 219.5,
		// medians of 4, alternated) and the same database CPU. River's
		// default is 100 ms.
		FetchPollInterval: 100 * time.Millisecond,
		FetchCooldown:     FetchCooldown,
		// River's own spans and metrics (river.insert_many, river.work),
		// on the store's providers; the trace context of each insert goes
		// into the job's metadata (traceparent), never into its ticket.
		Plugins: []rivertype.Plugin{p.riverTelemetry()},
	}
}

// DB is the job database, for callers that enqueue inside their own
// transactions (EnqueueTx). With SQLite it has a single connection: finish
// a transaction before calling other methods. With PostgreSQL it is
// database/sql over the pgx pool River's own statements use (Config.MaxConns
// connections for both): each statement or transaction borrows one of the
// pool's connections, and closing the Pipeline closes the pool.
func (p *Pipeline) DB() *sql.DB { return p.db }

// Dialect is the job database's kind: "sqlite" or "postgres", for callers
// whose own SQL differs between them.
func (p *Pipeline) Dialect() string { return string(p.dialect) }

// Store is the pipeline's default object store (Config.Store); Stores
// lists every store.
func (p *Pipeline) Store() *claimcheck.Store { return p.store }

// DeadLetterRetention is how long dead jobs are kept before pruning.
func (p *Pipeline) DeadLetterRetention() time.Duration { return p.cfg.DeadLetterRetention }

// Close closes the job database. Stop any Work first.
func (p *Pipeline) Close() error {
	if p.gauges != nil {
		_ = p.gauges.Unregister()
	}
	if p.listen != nil {
		p.listen.Close()
	}
	return p.db.Close()
}

// retryPolicy is claimcheck.RetryPolicy as River's retry policy.
type retryPolicy struct{ p claimcheck.RetryPolicy }

func (r retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(r.p.Delay(job.Attempt))
}

// ArgsOverhead bounds the bytes, in the job table, that a job's arguments
// add around its ticket: field names, a 64-byte kind, a tenant, a 128-byte
// idempotency key and an outbox destination. Open refuses an inline
// threshold whose tickets plus this exceed Config.MaxMessageSize.
const ArgsOverhead = 64 + 64 + claimcheck.MaxTenantLen + MaxIdempotencyKeyLen + 16 + MaxDestinationLen

const argsOverhead = ArgsOverhead

// MaxIdempotencyKeyLen is the longest idempotency key, in bytes.
const MaxIdempotencyKeyLen = 128
