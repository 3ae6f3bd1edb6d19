package bench

// Small jobs through the job pipeline: enqueue one at a time, work a
// backlog, and the latency of one job at a time, the measurement behind
// `claimcheck bench jobs` and the claimcheck half of the lab's comparison
// with plain River (internal/benchlab).

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Small-job defaults.
const (
	// DefaultJobs is the jobs of an enqueue and of a work phase.
	DefaultJobs = 2000
	// DefaultLatencyJobs is the jobs of a latency phase, enqueued one at a
	// time, each after the previous one reached its handler.
	DefaultLatencyJobs = 200
	// DefaultJobSize is each job's payload: 4 KiB, inline in its ticket
	// under the default inline threshold.
	DefaultJobSize = 4 * KiB
	// DefaultJobWorkers is the jobs worked at once (Work's Concurrency).
	DefaultJobWorkers = 4
	// JobsKind and JobsTenant are the small jobs' kind (and queue) and
	// tenant.
	JobsKind   = "bench-jobs"
	JobsTenant = "bench"
	// handlerTimeout is how long a latency phase waits for a handler.
	handlerTimeout = 30 * time.Second
	// workTimeout bounds a work phase.
	workTimeout = 10 * time.Minute
)

// Probe counts the handlers that began and, while a latency phase
// listens, hands over when each began.
type Probe struct {
	began chan time.Time
	count atomic.Int64
	mu    sync.Mutex
}

// Began records that a handler began.
func (p *Probe) Began() {
	p.count.Add(1)
	p.mu.Lock()
	ch := p.began
	p.mu.Unlock()
	if ch != nil {
		select {
		case ch <- time.Now():
		default:
		}
	}
}

// StartFunc starts workers; stop stops them and waits.
type StartFunc func(ctx context.Context) (stop func() error, err error)

// WorkN starts the workers and waits until n handlers began, then stops
// them: the time of a backlog of n waiting jobs. Errors: start's and
// stop's; more than 10 minutes, or ctx done, before n began.
func WorkN(ctx context.Context, p *Probe, n int64, start StartFunc) error {
	p.count.Store(0)
	stop, err := start(ctx)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(workTimeout)
	for p.count.Load() < n {
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = stop()
			return fmt.Errorf("bench: %d of %d jobs worked before the deadline", p.count.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	return stop()
}

// LatencyRun starts the workers, enqueues a warm-up job and waits for its
// handler, then enqueues n jobs one at a time, each once the previous one
// reached its handler, and returns the times in ms from the start of each
// enqueue to its handler's start, sorted. Errors: start's, enqueue's and
// stop's; no handler within 30 s of an enqueue.
func LatencyRun(ctx context.Context, p *Probe, n int, start StartFunc, enqueue func(context.Context) error) (lat []float64, err error) {
	p.mu.Lock()
	p.began = make(chan time.Time, 1)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.began = nil
		p.mu.Unlock()
	}()
	stop, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := stop(); err == nil {
			err = serr
		}
	}()
	one := func() (time.Duration, error) {
		t0 := time.Now()
		if err := enqueue(ctx); err != nil {
			return 0, err
		}
		select {
		case t1 := <-p.began:
			return t1.Sub(t0), nil
		case <-time.After(handlerTimeout):
			return 0, fmt.Errorf("bench: no handler ran within %s of an enqueue", handlerTimeout)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if _, err := one(); err != nil { // warm-up: workers started and fetching
		return nil, err
	}
	lat = make([]float64, 0, n)
	for range n {
		d, err := one()
		if err != nil {
			return nil, err
		}
		lat = append(lat, float64(d)/float64(time.Millisecond))
	}
	slices.Sort(lat)
	return lat, nil
}

// JobRig runs small jobs through a pipeline: Size-byte payloads of kind
// JobsKind for tenant JobsTenant, worked by Workers at once, whose
// handler, run once the payload is claimed and verified, reads it to the
// end.
type JobRig struct {
	p       *pipeline.Pipeline
	size    int64
	workers int
	base    []byte
	seq     atomic.Uint64
	probe   Probe

	mu    sync.Mutex
	ids   []int64
	began map[int64]time.Time
	done  []float64 // handler → outcome, ms, while a latency phase runs
}

// NewJobRig is a JobRig on p for payloads of size bytes (default
// DefaultJobSize) and workers at once (default DefaultJobWorkers). The
// payloads are pseudo-random bytes of a random seed, each with a counter
// in front, so no two jobs share bytes.
func NewJobRig(p *pipeline.Pipeline, size int64, workers int) *JobRig {
	if size <= 0 {
		size = DefaultJobSize
	}
	if workers <= 0 {
		workers = DefaultJobWorkers
	}
	r := &JobRig{p: p, size: size, workers: workers, base: make([]byte, max(size, 8))}
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], NewContentSeed())
	_, _ = rand.NewChaCha8(key).Read(r.base)
	return r
}

// Pipeline is the rig's pipeline.
func (r *JobRig) Pipeline() *pipeline.Pipeline { return r.p }

// Probe counts the rig's handlers (and a reference's, for LatencyRun).
func (r *JobRig) Probe() *Probe { return &r.probe }

// Payload is a fresh payload of the rig's size.
func (r *JobRig) Payload() []byte {
	b := bytes.Clone(r.base)
	binary.LittleEndian.PutUint64(b, r.seq.Add(1))
	return b[:r.size]
}

// EnqueueOne enqueues one job (Pipeline.Enqueue: check in, then the job
// in its transaction).
func (r *JobRig) EnqueueOne(ctx context.Context) error {
	res, err := r.p.Enqueue(ctx, JobsKind, JobsTenant, bytes.NewReader(r.Payload()), nil)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.ids = append(r.ids, res.JobID)
	r.mu.Unlock()
	return nil
}

// Enqueue enqueues n jobs one at a time.
func (r *JobRig) Enqueue(ctx context.Context, n int64) error {
	for range n {
		if err := r.EnqueueOne(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Start starts Pipeline.Work on JobsKind.
func (r *JobRig) Start(ctx context.Context) (func() error, error) {
	h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		r.probe.Began()
		if id, err := strconv.ParseInt(job.ID, 10, 64); err == nil {
			r.mu.Lock()
			if r.began != nil {
				r.began[id] = time.Now()
			}
			r.mu.Unlock()
		}
		rd, err := job.Payload.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer rd.Close()
		if _, err := io.Copy(io.Discard, rd); err != nil {
			return nil, err
		}
		return nil, nil
	})
	onDone := func(o pipeline.Outcome) {
		now := time.Now()
		r.mu.Lock()
		if t, ok := r.began[o.JobID]; ok {
			r.done = append(r.done, float64(now.Sub(t))/float64(time.Millisecond))
		}
		r.mu.Unlock()
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		done <- r.p.Work(wctx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{JobsKind: h}, Concurrency: r.workers, OnDone: onDone})
	}()
	return func() error { cancel(); return <-done }, nil
}

// Work works n waiting jobs: from the workers' start until n handlers
// began, and the workers stopped (WorkN).
func (r *JobRig) Work(ctx context.Context, n int64) error { return WorkN(ctx, &r.probe, n, r.Start) }

// Latency enqueues n jobs one at a time with the workers running
// (LatencyRun) and returns, in ms and sorted, each job's time from the
// start of its enqueue to its handler's start, and from its handler's
// start to its attempt's outcome (pipeline.WorkOptions.OnDone: the
// handler returned and the pipeline took its outcome; River completes
// the job in the database in batches after).
func (r *JobRig) Latency(ctx context.Context, n int) (enqueueToHandler, handlerToDone []float64, err error) {
	r.mu.Lock()
	r.began, r.done = map[int64]time.Time{}, nil
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.began = nil
		r.mu.Unlock()
	}()
	lat, err := LatencyRun(ctx, &r.probe, n, r.Start, r.EnqueueOne)
	if err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	done := slices.Clone(r.done)
	r.mu.Unlock()
	slices.Sort(done)
	return lat, done, nil
}

// Cleanup deletes the jobs the rig enqueued (Pipeline.Delete: the jobs
// and their registry rows). Their objects, if any were offloaded, are
// left to the sweeper.
func (r *JobRig) Cleanup(ctx context.Context) error {
	r.mu.Lock()
	ids := r.ids
	r.ids = nil
	r.mu.Unlock()
	_, err := deleteJobs(ctx, r.p, ids)
	return err
}

// Forget drops the rig's record of the jobs it enqueued, for a caller
// that deleted them itself.
func (r *JobRig) Forget() {
	r.mu.Lock()
	r.ids = nil
	r.mu.Unlock()
}

// DeleteKind deletes every job of kind in p's job database (a killed
// run's, whose handlers would otherwise run among the measured ones),
// with Pipeline.List and Pipeline.Delete; a running job is left (River
// refuses it). It returns how many it deleted.
func DeleteKind(ctx context.Context, p *pipeline.Pipeline, kind string) (int, error) {
	var ids []int64
	if err := p.List(ctx, pipeline.ListOptions{Kind: kind, PageSize: 500}, func(j *pipeline.JobInfo) error {
		ids = append(ids, j.ID)
		return nil
	}); err != nil {
		return 0, fmt.Errorf("bench: list the jobs of %s: %w", kind, err)
	}
	return deleteJobs(ctx, p, ids)
}

// deleteJobs deletes jobs ids with Pipeline.Delete, 500 per transaction,
// and returns how many it deleted.
func deleteJobs(ctx context.Context, p *pipeline.Pipeline, ids []int64) (int, error) {
	n := 0
	for len(ids) > 0 {
		k := min(len(ids), 500)
		d, err := p.Delete(ctx, ids[:k]...)
		if err != nil {
			return n, fmt.Errorf("bench: delete the bench's jobs: %w", err)
		}
		n += d
		ids = ids[k:]
	}
	return n, nil
}
