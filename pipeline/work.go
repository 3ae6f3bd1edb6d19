package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/claimcheck/claimcheck"
)

// WorkOptions configure Work.
type WorkOptions struct {
	// Handlers maps each kind to work to its handler. Required, non-empty.
	Handlers map[string]claimcheck.Handler
	// Concurrency is the number of jobs worked at once per kind. Default 1.
	Concurrency int
	// UntilEmpty returns once no job of the handled kinds is waiting,
	// running or due for a retry. Otherwise Work runs until ctx is done.
	UntilEmpty bool
	// OnDone, if set, is called after each attempt with the job id, its
	// kind and the attempt's error (nil on success).
	OnDone func(jobID int64, kind string, err error)
}

// Work runs workers for the given kinds. Each job's payload is claimed and
// verified before its handler runs (see claimcheck.Store.Work). A permanent
// failure (missing or corrupt payload, bad ticket, a handler's
// claimcheck.Permanent error) dead-letters the job on that attempt, with its
// reason recorded; a transient one is retried with backoff up to the maximum
// attempts, then dead-lettered. A result is checked in under the results
// prefix and its ticket recorded as the job's output.
//
// Work returns nil when ctx is done or, with UntilEmpty, when the kinds'
// queues are empty. Errors: ErrConfig for no handlers or an invalid kind;
// River's start and stop errors, wrapped.
func (p *Pipeline) Work(ctx context.Context, opts WorkOptions) error {
	if len(opts.Handlers) == 0 {
		return fmt.Errorf("pipeline: work: no handlers: %w", claimcheck.ErrConfig)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	queues := make(map[string]river.QueueConfig, len(opts.Handlers))
	kinds := make([]string, 0, len(opts.Handlers))
	for kind := range opts.Handlers {
		if err := ValidateKind(kind); err != nil {
			return fmt.Errorf("pipeline: work: %v: %w", err, claimcheck.ErrConfig)
		}
		queues[kind] = river.QueueConfig{MaxWorkers: opts.Concurrency}
		kinds = append(kinds, kind)
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely[jobArgs](workers, &worker{p: p, handlers: opts.Handlers, onDone: opts.OnDone}); err != nil {
		return fmt.Errorf("pipeline: work: %w", err)
	}
	return p.runClient(ctx, workers, queues, kinds, opts.UntilEmpty)
}

// runClient runs a River client working queues until ctx is done or, with
// untilEmpty, until none of them holds a pending job.
func (p *Pipeline) runClient(ctx context.Context, workers *river.Workers, queues map[string]river.QueueConfig, names []string, untilEmpty bool) error {
	cfg := p.riverConfig(workers)
	cfg.Queues = queues
	client, err := river.NewClient(p.driver, cfg)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := client.Start(runCtx); err != nil {
		return fmt.Errorf("pipeline: start workers: %w", err)
	}
	if untilEmpty {
		err = p.waitEmpty(runCtx, names)
	} else {
		<-runCtx.Done()
	}
	stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.JobTimeout)
	defer stopCancel()
	if serr := client.Stop(stopCtx); serr != nil && err == nil && ctx.Err() == nil {
		err = fmt.Errorf("pipeline: stop workers: %w", serr)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// pendingStates are the states in which a job still has work ahead of it.
var pendingStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}

// waitEmpty polls, one row at a time, until no job of kinds is pending.
func (p *Pipeline) waitEmpty(ctx context.Context, kinds []string) error {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := p.client.JobList(ctx, river.NewJobListParams().Queues(kinds...).States(pendingStates...).First(1))
		if err != nil {
			return fmt.Errorf("pipeline: poll queue: %w", err)
		}
		if len(res.Jobs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

type worker struct {
	river.WorkerDefaults[jobArgs]
	p        *Pipeline
	handlers map[string]claimcheck.Handler
	onDone   func(int64, string, error)
}

func (w *worker) Timeout(*river.Job[jobArgs]) time.Duration { return w.p.cfg.JobTimeout }

func (w *worker) Work(ctx context.Context, job *river.Job[jobArgs]) (err error) {
	if w.onDone != nil {
		defer func() { w.onDone(job.ID, job.Args.JobKind, err) }()
	}
	t, err := claimcheck.ParseTicket(compactJSON(job.Args.Ticket))
	if err != nil {
		return deadLetter(err)
	}
	h, ok := w.handlers[job.Args.JobKind]
	if !ok {
		return fmt.Errorf("pipeline: no handler for kind %q in this worker", job.Args.JobKind)
	}
	cj := &claimcheck.Job{ID: strconv.FormatInt(job.ID, 10), Kind: job.Args.JobKind, Tenant: job.Args.Tenant, Attempt: job.Attempt}
	if t.Tenant != job.Args.Tenant {
		return deadLetter(fmt.Errorf("pipeline: job tenant %q does not match ticket %s: %w", job.Args.Tenant, t, claimcheck.ErrTicketInvalid))
	}
	rt, err := w.p.store.Work(ctx, cj, t, h)
	if err != nil {
		if claimcheck.IsPermanent(err) {
			return deadLetter(err)
		}
		return &reasonError{err: err}
	}
	if rt == nil {
		return nil
	}
	if err := register(ctx, w.p.db, job.ID, roleResult, rt); err != nil {
		return &reasonError{err: err}
	}
	enc, err := rt.Marshal()
	if err != nil {
		return &reasonError{err: err}
	}
	if err := river.RecordOutput(ctx, jobOutput{Result: enc}); err != nil {
		return &reasonError{err: fmt.Errorf("pipeline: record result ticket: %w", err)}
	}
	return nil
}

// deadLetter cancels the job now: River records the error and moves the job
// to cancelled, where it stays as a dead letter.
func deadLetter(err error) error { return river.JobCancel(&reasonError{err: err}) }

// reasonError prefixes the recorded error with its machine-readable reason,
// "payload-missing: …", which JobInfo.Reason reads back.
type reasonError struct{ err error }

func (e *reasonError) Error() string { return claimcheck.Reason(e.err) + ": " + e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("pipeline: decode job arguments: %w", err)
	}
	return nil
}
