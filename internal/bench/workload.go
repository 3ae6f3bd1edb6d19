package bench

// The workload: a fixed number of jobs of sizes drawn from a Mix, enqueued
// by several producers while several workers work them, through one
// target (claimcheck's pipeline here; plain River with the payload in its
// args, and the store's plain SDK, in the team's lab), measured end to
// end: jobs per second, payload MiB per second, enqueue-to-handler latency
// percentiles, and what the job table holds per job.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Workload defaults.
const (
	// DefaultWorkloadJobs is the jobs of a workload run: issue 29's 2,000.
	DefaultWorkloadJobs = 2000
	// DefaultWorkloadProducers and DefaultWorkloadWorkers are the
	// goroutines that enqueue and the jobs worked at once.
	DefaultWorkloadProducers = 2
	DefaultWorkloadWorkers   = 2
	// WorkloadKind and WorkloadTenant are the kind and tenant of the
	// workload's jobs.
	WorkloadKind   = "claimcheck-bench-workload"
	WorkloadTenant = "bench"
	// workloadTimeout bounds one workload run.
	workloadTimeout = 30 * time.Minute
)

// WorkloadTarget is what RunWorkload drives: a queue with workers.
type WorkloadTarget interface {
	// Enqueue hands job i, its payload r of size bytes, to the target and
	// returns the job's id (unique within the run).
	Enqueue(ctx context.Context, i int, r io.Reader, size int64) (id int64, err error)
	// Start starts the workers. Each job's handler calls h.Began(id) as
	// it starts (after any verification the target does before it), reads
	// the payload to the end, and calls h.Done(id, bytes read). stop stops
	// the workers and waits for them.
	Start(ctx context.Context, h *WorkloadHooks) (stop func() error, err error)
}

// WorkloadHooks receive the handlers' events of a workload run.
type WorkloadHooks struct {
	mu      sync.Mutex
	began   map[int64]time.Time
	read    map[int64]int64
	done    atomic.Int64
	want    int64
	last    atomic.Int64 // unix nanos of the last Done
	all     chan struct{}
	failed  chan error
	failure sync.Once
}

func newWorkloadHooks(jobs int) *WorkloadHooks {
	return &WorkloadHooks{began: make(map[int64]time.Time, jobs), read: make(map[int64]int64, jobs), want: int64(jobs),
		all: make(chan struct{}), failed: make(chan error, 1)}
}

// Began records that job id's handler started (the first start of a
// retried job counts).
func (h *WorkloadHooks) Began(id int64) {
	now := time.Now()
	h.mu.Lock()
	if _, ok := h.began[id]; !ok {
		h.began[id] = now
	}
	h.mu.Unlock()
}

// Done records that job id's handler read n bytes and finished.
func (h *WorkloadHooks) Done(id int64, n int64) {
	h.mu.Lock()
	_, again := h.read[id]
	h.read[id] = n
	h.mu.Unlock()
	if again {
		return
	}
	h.last.Store(time.Now().UnixNano())
	if h.done.Add(1) == h.want {
		close(h.all)
	}
}

// Fail ends the run with err (a handler that cannot read its payload).
func (h *WorkloadHooks) Fail(err error) {
	h.failure.Do(func() { h.failed <- err })
}

// WorkloadSpec is one workload run.
type WorkloadSpec struct {
	// Sizes are the jobs' payload sizes in bytes, one per job (Mix.Sizes).
	Sizes []int64
	// Content is job i's payload: Sizes[i] bytes.
	Content func(i int) io.Reader
	// Producers enqueue the jobs, each taking the next job in turn.
	Producers int
	// Rate, if positive, paces the jobs: job i is enqueued no earlier
	// than i/Rate seconds after the first (an arrival rate in jobs per
	// second, as long as the producers keep up). 0: each producer
	// enqueues its next job as soon as the last is in, so the queue
	// grows as fast as they go and the latency includes the wait in it.
	Rate float64
}

// WorkloadSample is what one workload run measured.
type WorkloadSample struct {
	Jobs  int
	Bytes int64
	// Seconds is from the first enqueue's start to the last handler's end.
	Seconds float64
	// LatencyMs are the enqueue-to-handler latencies in milliseconds,
	// sorted: from the start of a job's enqueue to its handler's start.
	LatencyMs []float64
	// IDs are the jobs' ids, in job order.
	IDs []int64
}

// JobsPerSec is Jobs over Seconds.
func (s WorkloadSample) JobsPerSec() float64 { return float64(s.Jobs) / s.Seconds }

// MiBPerSec is the payload bytes over Seconds, in MiB/s.
func (s WorkloadSample) MiBPerSec() float64 { return float64(s.Bytes) / MiB / s.Seconds }

// Percentile is the p-th percentile (0 to 100, nearest rank) of the
// latencies in ms; NaN without any.
func (s WorkloadSample) Percentile(p float64) float64 { return Percentile(s.LatencyMs, p) }

// Percentile is the p-th percentile (0 to 100) of sorted xs by nearest
// rank; NaN when xs is empty.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// RunWorkload starts t's workers, then enqueues len(spec.Sizes) jobs from
// spec.Producers goroutines, and returns once every job's handler has
// finished, with the workers stopped. It checks that each handler read
// its job's size. Errors: an enqueue's, a handler's (Fail), a size read
// that does not match, the workers' start or stop, or ctx's; a run still
// going after 30 minutes fails.
func RunWorkload(ctx context.Context, t WorkloadTarget, spec WorkloadSpec) (s WorkloadSample, err error) {
	n := len(spec.Sizes)
	if n == 0 || spec.Content == nil {
		return s, errors.New("bench: workload: no jobs")
	}
	ctx, cancel := context.WithTimeout(ctx, workloadTimeout)
	defer cancel()
	h := newWorkloadHooks(n)
	stop, err := t.Start(ctx, h)
	if err != nil {
		return s, fmt.Errorf("bench: workload: start the workers: %w", err)
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = fmt.Errorf("bench: workload: stop the workers: %w", serr)
		}
	}()
	enqueued := make([]time.Time, n)
	ids := make([]int64, n)
	var next atomic.Int64
	pctx, pcancel := context.WithCancelCause(ctx)
	defer pcancel(nil)
	start := time.Now()
	var wg sync.WaitGroup
	for range max(spec.Producers, 1) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || pctx.Err() != nil {
					return
				}
				if spec.Rate > 0 {
					due := start.Add(time.Duration(float64(i) / spec.Rate * float64(time.Second)))
					select {
					case <-time.After(time.Until(due)):
					case <-pctx.Done():
						return
					}
				}
				t0 := time.Now()
				id, err := t.Enqueue(pctx, i, spec.Content(i), spec.Sizes[i])
				if err != nil {
					pcancel(fmt.Errorf("bench: workload: enqueue job %d of %s: %w", i+1, FormatSize(spec.Sizes[i]), err))
					return
				}
				enqueued[i], ids[i] = t0, id
			}
		})
	}
	wg.Wait()
	if err := context.Cause(pctx); err != nil {
		return s, err
	}
	select {
	case <-h.all:
	case err := <-h.failed:
		return s, fmt.Errorf("bench: workload: %w", err)
	case <-ctx.Done():
		return s, fmt.Errorf("bench: workload: %d of %d jobs worked: %w", h.done.Load(), n, ctx.Err())
	}
	s = WorkloadSample{Jobs: n, Seconds: time.Unix(0, h.last.Load()).Sub(start).Seconds(), IDs: ids}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, id := range ids {
		if got := h.read[id]; got != spec.Sizes[i] {
			return s, fmt.Errorf("bench: workload: job %d's handler read %d bytes of %d", i+1, got, spec.Sizes[i])
		}
		s.Bytes += spec.Sizes[i]
		s.LatencyMs = append(s.LatencyMs, float64(h.began[id].Sub(enqueued[i]))/float64(time.Millisecond))
	}
	slices.Sort(s.LatencyMs)
	return s, nil
}

// PipelineTarget is claimcheck's job pipeline as a WorkloadTarget: each
// job enqueued with Pipeline.Enqueue (checked in, then the job in its
// transaction), worked by Pipeline.Work with Workers at once, whose
// handler, run once the payload is claimed and verified, reads the
// payload to the end (Payload.Open, into io.Discard).
type PipelineTarget struct {
	P       *pipeline.Pipeline
	Kind    string
	Tenant  string
	Workers int

	mu      sync.Mutex
	keys    []string // the objects written (offloaded payloads)
	ids     []int64
	offload atomic.Int64
}

// Enqueue checks job i's payload in and enqueues it.
func (t *PipelineTarget) Enqueue(ctx context.Context, i int, r io.Reader, size int64) (int64, error) {
	res, err := t.P.Enqueue(ctx, t.Kind, t.Tenant, r, nil)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	t.ids = append(t.ids, res.JobID)
	if !res.Ticket.IsInline() {
		t.keys = append(t.keys, res.Ticket.Key)
		t.offload.Add(1)
	}
	t.mu.Unlock()
	return res.JobID, nil
}

// Offloaded is how many of the jobs enqueued since the last Cleanup had
// their payload stored as an object (the others travelled inline, in the
// ticket).
func (t *PipelineTarget) Offloaded() int64 { return t.offload.Load() }

// Start runs Pipeline.Work on Kind until stopped.
func (t *PipelineTarget) Start(ctx context.Context, h *WorkloadHooks) (func() error, error) {
	handler := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		id, err := strconv.ParseInt(job.ID, 10, 64)
		if err != nil {
			h.Fail(fmt.Errorf("job id %q: %w", job.ID, err))
			return nil, claimcheck.Permanent(err)
		}
		h.Began(id)
		r, err := job.Payload.Open(ctx)
		if err != nil {
			h.Fail(err)
			return nil, err
		}
		defer r.Close()
		n, err := io.Copy(io.Discard, r)
		if err != nil {
			h.Fail(err)
			return nil, err
		}
		h.Done(id, n)
		return nil, nil
	})
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		done <- t.P.Work(wctx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{t.Kind: handler}, Concurrency: max(t.Workers, 1)})
	}()
	return func() error { cancel(); return <-done }, nil
}

// Cleanup deletes the jobs enqueued since the last Cleanup
// (Pipeline.Delete: the jobs and their registry rows) and their objects.
func (t *PipelineTarget) Cleanup(ctx context.Context) error {
	t.mu.Lock()
	ids, keys := t.ids, t.keys
	t.ids, t.keys = nil, nil
	t.offload.Store(0)
	t.mu.Unlock()
	if _, err := deleteJobs(ctx, t.P, ids); err != nil {
		return err
	}
	st := t.P.Store()
	for _, key := range keys {
		if err := st.Bucket().Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("bench: delete the workload's objects: %w", err)
		}
	}
	return nil
}

// Table-size methods, as TableBytes reports them.
const (
	// TableMethodRows (PostgreSQL): the sum of pg_column_size of the job
	// rows of the kind, and of their claims-registry rows: the bytes the
	// rows hold, TOASTed values at their stored (compressed) size,
	// indexes not counted.
	TableMethodRows = "sum of pg_column_size(row) of the kind's river_job rows and their claimcheck_claim rows (TOAST as stored, indexes not counted)"
	// TableMethodPages (SQLite): the pages of river_job and
	// claimcheck_claim and of their indexes (dbstat's pgsize), whoever's
	// rows they hold: measure before and after, with nothing else
	// writing.
	TableMethodPages = "pages of river_job and claimcheck_claim and their indexes (SQLite dbstat, pgsize), after minus before"
)

// TableBytes is how many bytes the job tables hold for jobs of kind, by
// dialect (pipeline.Pipeline.Dialect: "postgres" or "sqlite"): on
// PostgreSQL TableMethodRows, for the kind's rows alone; on SQLite
// TableMethodPages, for every row (take the difference of a reading
// before and after). It returns the figure and the method. Errors: the
// database's.
func TableBytes(ctx context.Context, db *sql.DB, dialect, kind string) (int64, string, error) {
	var n sql.NullInt64
	if dialect == "sqlite" {
		err := db.QueryRowContext(ctx, `SELECT sum(pgsize) FROM dbstat WHERE name IN
			(SELECT name FROM sqlite_master WHERE tbl_name IN ('river_job', 'claimcheck_claim'))`).Scan(&n)
		if err != nil {
			return 0, "", fmt.Errorf("bench: the job tables' size (dbstat): %w", err)
		}
		return n.Int64, TableMethodPages, nil
	}
	err := db.QueryRowContext(ctx, `SELECT
		(SELECT coalesce(sum(pg_column_size(j.*)), 0) FROM river_job j WHERE j.kind = $1) +
		(SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM claimcheck_claim c JOIN river_job j ON j.id = c.job_id WHERE j.kind = $1)`, kind).Scan(&n)
	if err != nil {
		return 0, "", fmt.Errorf("bench: the job rows' size: %w", err)
	}
	return n.Int64, TableMethodRows, nil
}
