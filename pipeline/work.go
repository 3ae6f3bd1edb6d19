package pipeline

// Work's public names; the worker's machinery (an attempt, the retry
// policy, the outcome records, the lease, the drain) is
// pipeline/internal/worker's.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
	"github.com/claimcheck/claimcheck/pipeline/internal/worker"
)

// DefaultDrainTimeout is how long Work lets running handlers finish once
// it is asked to stop.
const DefaultDrainTimeout = 30 * time.Second

// WorkOptions configure Work.
type WorkOptions struct {
	// Handlers maps each kind to work to its handler. Required, non-empty.
	Handlers map[string]claimcheck.Handler
	// Concurrency is the number of jobs worked at once per kind. Default 1.
	Concurrency int
	// UntilEmpty returns once no job of the handled kinds is waiting,
	// running or due for a retry. Otherwise Work runs until ctx is done.
	UntilEmpty bool
	// DrainTimeout is how long, once ctx is done, running handlers may
	// finish: Work takes no more jobs, and a job still running at the
	// deadline goes back to its queue without spending an attempt (its
	// handler's context is cancelled). Default DefaultDrainTimeout;
	// negative: release at once.
	DrainTimeout time.Duration
	// Abort, if set, ends a drain at once when closed: running handlers'
	// contexts are cancelled and their jobs go back to the queue without
	// spending an attempt (the command's second interrupt).
	Abort <-chan struct{}
	// Notify, if set, receives one line for an operator each time Work
	// waits on something: the jobs a drain waits for, the jobs it returns
	// to the queue, the jobs UntilEmpty waits for and when each would be
	// rescued.
	Notify func(msg string)
	// OnDone, if set, is called after each attempt with its outcome.
	OnDone func(Outcome)
	// Broker, if set, is where the jobs come from instead of the job
	// database's queues.
	Broker *BrokerSource
}

// JobState is the state of a job after an attempt, the same for jobs from
// the job database and from a broker.
type JobState string

const (
	// JobCompleted: the handler succeeded and its result is recorded.
	JobCompleted JobState = "completed"
	// JobRetrying: the attempt failed transiently; the job is retried with
	// backoff and the attempt is spent.
	JobRetrying JobState = "retrying"
	// JobWaiting: infrastructure was unavailable; the job is retried with
	// backoff without spending the attempt (RetryPolicy.Window).
	JobWaiting JobState = "waiting"
	// JobDead: the job is in the dead letters (Reason says why).
	JobDead JobState = "dead"
	// JobReleased: the worker stopped before the handler finished (drain
	// deadline, abort); the job is back in its queue, attempt not spent.
	JobReleased JobState = "released"
	// JobLeft: the job is for a tenant this worker does not serve
	// (claimcheck.Options.Tenants): it went back to its queue, nothing
	// fetched and no attempt spent, for a worker that serves the tenant.
	JobLeft JobState = "left"
)

// Outcome is what one attempt came to.
type Outcome struct {
	JobID   int64
	Kind    string
	Attempt int
	State   JobState
	// Reason is claimcheck.Reason(Err) for a failed attempt.
	Reason string
	// Err is the attempt's error, nil on success.
	Err error
	// MessageID is the broker message's id, for a job from a broker.
	MessageID string
	// Tenant, SHA256 (the digest prefix of Ticket.DigestPrefix) and Size
	// (bytes) are the job's payload's, from its ticket ("", 0 when the
	// ticket could not be read).
	Tenant string
	SHA256 string
	Size   int64
	// Timings are how long the claim, verification and handler took.
	Timings claimcheck.Timings
	// FromOutcome: the job was settled from the outcome record of an
	// earlier attempt whose handler had finished; its handler did not run
	// on this attempt (docs/invariants.md, invariant 12).
	FromOutcome bool
	// NextTry is, for a JobWaiting or JobRetrying attempt, how long until
	// the job's next attempt (the retry policy's delay).
	NextTry time.Duration
}

// Work runs workers for the given kinds. Each job's payload is claimed and
// verified before its handler runs (see claimcheck.Store.Work). Failures
// follow the pipeline's claimcheck.RetryPolicy: a permanent failure
// (missing or corrupt payload, bad ticket, a handler's claimcheck.Permanent
// error) dead-letters the job on that attempt, with its reason recorded; a
// transient one is retried with backoff up to the maximum attempts, then
// dead-lettered; unavailable infrastructure is retried without spending an
// attempt for the policy's window. Once the handler has succeeded with a
// result, the result's check-in, registry row and the job's completion
// are retried on their own until they succeed or the job timeout runs
// out: the handler is not run again for a later step's transient failure.
// A job without a result is completed by River's completer, as any River
// job is, which retries for 7 to 37 s; should the job database refuse the
// completion for longer, the job is rescued after its lease and its
// handler runs again.
//
// While a handler runs, its job's lease (Config.Lease) is renewed; a job
// whose worker died is rescued by any running worker once its lease has
// expired, and a job on a live worker is never taken from it.
//
// Work returns nil when ctx is done (after draining, see DrainTimeout) or,
// with UntilEmpty, when the kinds' queues are empty. Errors: ErrConfig for
// no handlers or an invalid kind; River's start and stop errors, wrapped.
func (p *Pipeline) Work(ctx context.Context, opts WorkOptions) error {
	if len(opts.Handlers) == 0 {
		return fmt.Errorf("pipeline: work: no handlers: %w", claimcheck.ErrConfig)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	queues := make(map[string]river.QueueConfig, len(opts.Handlers)*len(p.storeNames))
	names := make([]string, 0, len(opts.Handlers)*len(p.storeNames))
	for kind := range opts.Handlers {
		if err := ValidateKind(kind); err != nil {
			return fmt.Errorf("pipeline: work: %v: %w", err, claimcheck.ErrConfig)
		}
		// Only the queues of the stores this pipeline has: the jobs of
		// any other store are never fetched here.
		for _, store := range p.storeNames {
			q, err := StoreQueue(store, kind)
			if err != nil {
				return fmt.Errorf("pipeline: work: %v: %w", err, claimcheck.ErrConfig)
			}
			queues[q] = river.QueueConfig{MaxWorkers: opts.Concurrency}
			names = append(names, q)
		}
	}
	slices.Sort(names)
	if opts.Broker != nil {
		if len(p.storeNames) > 1 {
			return fmt.Errorf("pipeline: work: a broker worker works the tickets of one store, and this pipeline has %d (%s): run one worker per store, each with that store alone and its own queue: %w",
				len(p.storeNames), p.storeList(), claimcheck.ErrConfig)
		}
		return p.workBroker(ctx, opts)
	}
	onDone := func(wo worker.Outcome) {
		o := outcomeOf(wo)
		p.observe(context.Background(), o)
		if opts.OnDone != nil {
			opts.OnDone(o)
		}
	}
	w := worker.New(p.work, opts.Handlers, onDone, opts.Notify)
	workers, err := worker.RiverWorkers[jobs.WorkArgs](w, jobs.WorkArgsOf, slices.Collect(maps.Keys(opts.Handlers))...)
	if err != nil {
		return fmt.Errorf("pipeline: work: %w", err)
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	return p.work.RunClient(ctx, workers, queues, names, opts.UntilEmpty, worker.Drain{Timeout: opts.DrainTimeout, Abort: opts.Abort, Notify: opts.Notify, Running: w.Running(),
		Filter: func(lp *river.JobListParams) *river.JobListParams { return worker.TenantFilter(lp, p.store.Tenants()) }})
}

// outcomeOf is a worker's outcome as Work's Outcome.
func outcomeOf(o worker.Outcome) Outcome {
	return Outcome{JobID: o.JobID, Kind: o.Kind, Attempt: o.Attempt, State: JobState(o.State), Reason: o.Reason, Err: o.Err, MessageID: o.MessageID,
		Tenant: o.Tenant, SHA256: o.SHA256, Size: o.Size, Timings: o.Timings, FromOutcome: o.FromOutcome, NextTry: o.NextTry}
}

// ErrReturnToQueue, returned (wrapped or not) by a handler, gives its job
// back unworked: it goes back to its queue without spending an attempt,
// available again after the same delay as a job left for another tenant's
// worker (250 ms, doubling each time up to 10 s), and the attempt's Outcome
// is JobLeft. For a handler that hands jobs on and found no taker (serve's
// HTTP API, whose remote workers claim jobs through it). A handler must
// not return it after its payload's side effects began.
var ErrReturnToQueue = worker.ErrReturnToQueue
