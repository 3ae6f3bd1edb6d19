// Package pipeline is claimcheck's job pipeline on River: the transactional
// outbox that enqueues tickets, and the workers that claim, verify and
// process their payloads.
//
// The embedded default is River on SQLite (pure Go, modernc.org/sqlite) in
// the data directory, migrated automatically. Enqueueing checks the payload
// in first, then writes the claims-registry row and the job carrying the
// ticket in one transaction (DESIGN.md invariant 1). A claimcheck kind maps to
// a River queue of the same name, so a worker works exactly the kinds it has
// handlers for. Dead letters are River's cancelled jobs (permanent failure,
// on the attempt that failed) and discarded jobs (transient failures past the
// maximum attempts).
package pipeline

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/sqlitedb"
)

// Defaults, each overridable in Config.
const (
	// DefaultMaxAttempts bounds attempts of a job failing transiently.
	DefaultMaxAttempts = 5
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
	DefaultRetryBase = time.Second
)

// riverKind is the River job kind of every claimcheck job; the claimcheck
// kind travels in the args and names the queue.
const riverKind = "claimcheck"

// Config configures a Pipeline.
type Config struct {
	// Database is where jobs live: "sqlite:///abs/path/file.db", or a plain
	// file path. Required.
	Database string
	// Store holds the payloads. Required; the Pipeline does not close it.
	Store *claimcheck.Store
	// MaxAttempts of a job that fails transiently, before it is discarded
	// (dead). Default DefaultMaxAttempts.
	MaxAttempts int
	// JobTimeout is how long one attempt may run. Default DefaultJobTimeout.
	JobTimeout time.Duration
	// DeadLetterRetention is how long dead jobs are kept before River prunes
	// them. Default DefaultDeadLetterRetention.
	DeadLetterRetention time.Duration
	// MaxMessageSize is the largest job argument in bytes; the store's
	// inline threshold must fit (ErrConfig otherwise). Default
	// DefaultMaxMessageSize.
	MaxMessageSize int64
	// RetryBase is the first retry's delay. Default DefaultRetryBase.
	RetryBase time.Duration
	// Logger receives River's and the workers' logs. Default: discard.
	Logger *slog.Logger
}

// Pipeline enqueues and works claimcheck jobs on River.
type Pipeline struct {
	cfg    Config
	db     *sql.DB
	store  *claimcheck.Store
	driver *riversqlite.Driver
	client *river.Client[*sql.Tx] // insert-only client
	logger *slog.Logger
}

// Open opens (creating if needed) the job database, applies River's and the
// claims registry's migrations, and returns a Pipeline.
//
// Errors: claimcheck.ErrConfig for a missing store, a bad database URL, or an
// inline threshold whose tickets exceed MaxMessageSize; otherwise the
// database's error, wrapped.
func Open(ctx context.Context, cfg Config) (*Pipeline, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("pipeline: no store: %w", claimcheck.ErrConfig)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
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
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if need := claimcheck.InlineTicketSize(cfg.Store.InlineThreshold()) + argsOverhead; need > cfg.MaxMessageSize {
		return nil, fmt.Errorf("pipeline: inline threshold of %d bytes makes job arguments of up to %d bytes, above the maximum message size of %d bytes: %w",
			cfg.Store.InlineThreshold(), need, cfg.MaxMessageSize, claimcheck.ErrConfig)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if _, err := sqlitedb.Path(cfg.Database); err != nil {
		return nil, fmt.Errorf("pipeline: database: %v: %w", err, claimcheck.ErrConfig)
	}
	db, err := sqlitedb.Open(cfg.Database)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg, db: db, store: cfg.Store, driver: riversqlite.New(db), logger: logger}
	if err := p.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	p.client, err = river.NewClient(p.driver, p.riverConfig(nil))
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return p, nil
}

func (p *Pipeline) riverConfig(workers *river.Workers) *river.Config {
	return &river.Config{
		CancelledJobRetentionPeriod: p.cfg.DeadLetterRetention,
		DiscardedJobRetentionPeriod: p.cfg.DeadLetterRetention,
		JobTimeout:                  p.cfg.JobTimeout,
		RescueStuckJobsAfter:        p.cfg.JobTimeout + time.Minute,
		MaxAttempts:                 p.cfg.MaxAttempts,
		RetryPolicy:                 retryPolicy{base: p.cfg.RetryBase},
		Logger:                      p.logger,
		Workers:                     workers,
		FetchPollInterval:           100 * time.Millisecond,
		FetchCooldown:               20 * time.Millisecond,
	}
}

func (p *Pipeline) migrate(ctx context.Context) error {
	m, err := rivermigrate.New(p.driver, nil)
	if err != nil {
		return fmt.Errorf("pipeline: migrate: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("pipeline: migrate River schema: %w", err)
	}
	for _, stmt := range registrySchema {
		if _, err := p.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("pipeline: migrate claims registry: %w", err)
		}
	}
	return nil
}

// DB is the job database, for callers that enqueue inside their own
// transactions (EnqueueTx). With SQLite it has a single connection: finish
// a transaction before calling other methods.
func (p *Pipeline) DB() *sql.DB { return p.db }

// Store is the pipeline's object store.
func (p *Pipeline) Store() *claimcheck.Store { return p.store }

// DeadLetterRetention is how long dead jobs are kept before pruning.
func (p *Pipeline) DeadLetterRetention() time.Duration { return p.cfg.DeadLetterRetention }

// Close closes the job database. Stop any Work first.
func (p *Pipeline) Close() error { return p.db.Close() }

var kindRegexp = regexp.MustCompile(`^[a-z0-9]+(?:[_-]?[a-z0-9]+)*$`)

// ValidateKind checks a job kind: 2 to 64 lowercase letters and digits,
// single '-' or '_' between them (River's queue-name rule, plus its 2-byte
// minimum for kinds).
func ValidateKind(kind string) error {
	if len(kind) < 2 || len(kind) > 64 || !kindRegexp.MatchString(kind) {
		return fmt.Errorf("kind %q is invalid: use 2 to 64 characters a-z, 0-9, single '-' or '_' between them", kind)
	}
	return nil
}

// retryPolicy doubles the delay from base per attempt, capped at five
// minutes, with up to 20% jitter so retries of a burst spread out.
type retryPolicy struct{ base time.Duration }

func (r retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := r.base
	for i := 1; i < job.Attempt && d < 5*time.Minute; i++ {
		d *= 2
	}
	d = min(d, 5*time.Minute)
	d += time.Duration(rand.Int64N(int64(d)/5 + 1))
	return time.Now().Add(d)
}

// jobArgs are the River arguments of every claimcheck job: the ticket and
// what routing needs, nothing else.
type jobArgs struct {
	JobKind        string          `json:"kind"`
	Tenant         string          `json:"tenant" river:"unique"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" river:"unique"`
	Ticket         json.RawMessage `json:"ticket"`
}

// argsOverhead bounds the bytes jobArgs adds around a ticket: field names,
// a 64-byte kind, a tenant and a 128-byte idempotency key.
const argsOverhead = 64 + 64 + claimcheck.MaxTenantLen + MaxIdempotencyKeyLen

// MaxIdempotencyKeyLen is the longest idempotency key, in bytes.
const MaxIdempotencyKeyLen = 128

func (jobArgs) Kind() string { return riverKind }

// jobOutput is what a completed job records as its River output.
type jobOutput struct {
	Result json.RawMessage `json:"result,omitempty"`
}

// ErrJobNotFound is returned (wrapped) for a job id that does not exist.
var ErrJobNotFound = errors.New("job not found")
