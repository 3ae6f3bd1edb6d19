package jobs

// The job queue as an operator's gauges read it (claimcheck.queue.*,
// claimcheck.storage.held*: docs/observability.md): jobs per kind and
// state, the oldest job still to be worked, dead letters per reason, and
// the bytes the claims registry records per tenant. Each is one bounded
// statement over the job table or the registry, read at most once per
// cache period however often /metrics is scraped, and none reads a job's
// arguments (where inline payloads live) or an object of the store.

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/riverqueue/river/rivertype"
)

// QueueStatsCachePeriod is how long the queue gauges reuse a QueueStats
// reading; StorageCachePeriod the same for StorageByTenant's sums.
const (
	QueueStatsCachePeriod = 5 * time.Second
	StorageCachePeriod    = 30 * time.Second
)

// KindQueue is one kind's jobs in the job database, as QueueStats counts
// them. Outbox entries (jobs relayed to a broker) are not counted here:
// OutboxStats counts them by destination.
type KindQueue struct {
	Kind string `json:"kind"`
	// States counts the kind's jobs by the state List shows: River's
	// (available, running, retryable, scheduled, completed, cancelled,
	// discarded, pending), and StateWaiting for a job whose attempt was
	// given back while infrastructure is unavailable.
	States map[string]int64 `json:"states"`
	// Oldest is when the oldest job still to be worked was enqueued: of
	// those available, retryable or waiting (not running, not scheduled
	// for later). Zero when there is none.
	Oldest time.Time `json:"oldest,omitzero"`
	// Dead counts the kind's dead letters (cancelled and discarded jobs)
	// by the reason List shows for them.
	Dead map[string]int64 `json:"dead,omitempty"`
}

// QueueStats is Pipeline.QueueStats (package pipeline documents it).
func (p *Jobs) QueueStats(ctx context.Context) ([]KindQueue, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if p.dialect != "sqlite" { // SQLite's read transaction is a snapshot
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := p.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("pipeline: count jobs: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if p.dialect != "sqlite" {
		// Parallel workers cost more to start than the scans take (a
		// count of 100,000 jobs: 160 ms with two, under load, against
		// 40 ms without), and take cores from the workers.
		if _, err := tx.ExecContext(ctx, `SET LOCAL max_parallel_workers_per_gather = 0`); err != nil {
			return nil, fmt.Errorf("pipeline: count jobs: %w", err)
		}
	}
	q := p.queueStatsSQL()
	byKind := map[string]*KindQueue{}
	kindOf := func(queue string) *KindQueue {
		kind := QueueKind(queue)
		k := byKind[kind]
		if k == nil {
			k = &KindQueue{Kind: kind, States: map[string]int64{}}
			byKind[kind] = k
		}
		return k
	}
	err = scanAll(ctx, tx, q.jobs, func(scan func(...any) error) error {
		var queue, state string
		var n int64
		if err := scan(&queue, &state, &n); err != nil {
			return err
		}
		kindOf(queue).States[state] += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pipeline: count jobs by kind and state: %w", err)
	}
	err = scanAll(ctx, tx, q.pending, func(scan func(...any) error) error {
		var queue, state string
		var waiting bool
		var n int64
		var oldest *float64
		if err := scan(&queue, &state, &waiting, &n, &oldest); err != nil {
			return err
		}
		k := kindOf(queue)
		if waiting {
			k.States[state] = max(k.States[state]-n, 0)
			if k.States[state] == 0 {
				delete(k.States, state)
			}
			k.States[StateWaiting] += n
		}
		if waiting || state == string(rivertype.JobStateAvailable) || state == string(rivertype.JobStateRetryable) {
			if oldest != nil && !math.IsNaN(*oldest) {
				sec, frac := math.Modf(*oldest)
				if t := time.Unix(int64(sec), int64(frac*1e9)); k.Oldest.IsZero() || t.Before(k.Oldest) {
					k.Oldest = t
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pipeline: find the oldest jobs to work: %w", err)
	}
	err = scanAll(ctx, tx, q.dead, func(scan func(...any) error) error {
		var queue, reason string
		var n int64
		if err := scan(&queue, &reason, &n); err != nil {
			return err
		}
		k := kindOf(queue)
		if k.Dead == nil {
			k.Dead = map[string]int64{}
		}
		k.Dead[reason] += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pipeline: count dead letters by kind and reason: %w", err)
	}
	out := make([]KindQueue, 0, len(byKind))
	for _, k := range byKind {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out, nil
}

// queueStatements are QueueStats' statements for one dialect.
type queueStatements struct {
	// jobs: queue, state, count.
	jobs string
	// pending: queue, state, waiting (StateWaiting), count, the oldest
	// one's creation in Unix seconds, of jobs not finished nor running.
	pending string
	// dead: queue, reason, count of dead letters.
	dead string
}

// QueueStatements are QueueStats' three statements, for a test that
// explains them.
func (p *Jobs) QueueStatements() (jobs, pending, dead string) {
	q := p.queueStatsSQL()
	return q.jobs, q.pending, q.dead
}

// WaitingSQL is the condition on river_job of InfoOf's StateWaiting: the
// job's recorded output says since when infrastructure has been
// unavailable (River keeps SQLite's JSON as JSONB).
func (p *Jobs) WaitingSQL() string {
	if p.dialect == "sqlite" {
		return `metadata->>'$.output.unavailable_since' IS NOT NULL`
	}
	return `metadata->'output'->>'unavailable_since' IS NOT NULL`
}

func (p *Jobs) queueStatsSQL() queueStatements {
	waiting, created, reason := p.WaitingSQL(), `EXTRACT(EPOCH FROM MIN(created_at))::float8`,
		`split_part(CASE WHEN e LIKE 'JobCancelError: %' THEN substr(e, 17) ELSE e END, ': ', 1)`
	lastError := `substr(errors[array_length(errors, 1)]->>'error', 1, 256)`
	if p.dialect == "sqlite" {
		// River keeps SQLite's timestamps as text in UTC ('2006-01-02
		// 15:04:05.000'), its JSON as JSONB.
		created = `(julianday(MIN(created_at)) - 2440587.5) * 86400.0`
		reason = `CASE WHEN instr(e2, ': ') > 0 THEN substr(e2, 1, instr(e2, ': ') - 1) ELSE e2 END`
		lastError = `substr(errors->>'$[#-1].error', 1, 256)`
	}
	notOutbox := `queue NOT LIKE '` + OutboxQueuePrefix + `%'`
	// A dead letter's reason is InfoOf's: the first word of its last
	// error, River's "JobCancelError: " taken off, "cancelled" if none.
	dead := `SELECT queue, ` + lastError + ` AS e FROM river_job WHERE state IN ('cancelled', 'discarded') AND ` + notOutbox
	if p.dialect == "sqlite" {
		dead = `SELECT queue, CASE WHEN substr(e, 1, 16) = 'JobCancelError: ' THEN substr(e, 17) ELSE e END AS e2 FROM (` + dead + `) d0`
	}
	return queueStatements{
		jobs: `SELECT queue, CAST(state AS TEXT), COUNT(*) FROM river_job WHERE ` + notOutbox + ` GROUP BY state, queue`,
		pending: `SELECT queue, CAST(state AS TEXT), w, COUNT(*), ` + created + ` FROM (
			SELECT queue, state, created_at, CASE WHEN ` + waiting + ` THEN TRUE ELSE FALSE END AS w FROM river_job
			WHERE state IN ('available', 'retryable', 'scheduled', 'pending') AND ` + notOutbox + `) j GROUP BY state, queue, w`,
		dead: `SELECT queue, COALESCE(NULLIF(` + reason + `, ''), 'cancelled') AS reason, COUNT(*) FROM (` + dead + `) d GROUP BY queue, reason`,
	}
}

// scanAll runs query on tx and calls fn with each row's Scan.
func scanAll(ctx context.Context, tx *sql.Tx, query string, fn func(scan func(...any) error) error) error {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			rows.Close()
			return err
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	return rows.Err()
}

// Cached is a reading kept for a period (NewCached). The first Get reads;
// a later Get returns the kept reading at once and, once it is older than period
// (by now), starts one reading in the background (bounded by
// refreshTimeout) that replaces it: a scrape never waits on the job
// database after the first. A failed background reading drops the kept
// one, so the next Get reads again and reports the error rather than show
// stale values.
type Cached[T any] struct {
	period time.Duration
	now    func() time.Time
	read   func(context.Context) (T, error)

	mu      sync.Mutex
	at      time.Time
	have    bool
	reading bool
	val     T
}

// NewCached is a Cached reading read, kept for period by the clock now.
func NewCached[T any](period time.Duration, now func() time.Time, read func(context.Context) (T, error)) *Cached[T] {
	return &Cached[T]{period: period, now: now, read: read}
}

// refreshTimeout bounds a background reading of the gauges' statistics.
const refreshTimeout = 30 * time.Second

// Get is the reading: see Cached.
func (c *Cached[T]) Get(ctx context.Context) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.have {
		v, err := c.read(ctx)
		if err != nil {
			return v, err
		}
		c.val, c.at, c.have = v, c.now(), true
		return v, nil
	}
	if !c.reading && c.now().Sub(c.at) >= c.period {
		c.reading = true
		go c.refresh(context.WithoutCancel(ctx))
	}
	return c.val, nil
}

func (c *Cached[T]) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	v, err := c.read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = false
	if err != nil {
		var zero T
		c.val, c.have = zero, false
		return
	}
	c.val, c.at = v, c.now()
}
