package pipeline

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/semconv/v1.41.0/messagingconv"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline/internal/inbox"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobtel"
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
	onDone := func(o Outcome) {
		p.observe(context.Background(), o)
		if opts.OnDone != nil {
			opts.OnDone(o)
		}
	}
	w := &worker{p: p, handlers: opts.Handlers, onDone: onDone, notify: opts.Notify, running: newRunning()}
	workers, err := riverWorkers(w, slices.Collect(maps.Keys(opts.Handlers))...)
	if err != nil {
		return fmt.Errorf("pipeline: work: %w", err)
	}
	return p.runClient(ctx, workers, queues, names, opts.UntilEmpty, drainOptions{timeout: opts.DrainTimeout, abort: opts.Abort, notify: opts.Notify, running: w.running,
		filter: func(lp *river.JobListParams) *river.JobListParams { return tenantFilter(lp, p.store.Tenants()) }})
}

// riverWorkers registers w under each of River kinds kinds and under
// legacyRiverKind, for jobs enqueued before River kinds were claimcheck
// kinds: one worker for them all, which finds a job's handler by its
// arguments' kind. Errors: River's, for a kind it refuses.
func riverWorkers(w river.Worker[jobArgs], kinds ...string) (workers *river.Workers, err error) {
	workers = river.NewWorkers()
	defer func() { // AddWorkerArgs panics where AddWorkerSafely errs
		if v := recover(); v != nil {
			workers, err = nil, fmt.Errorf("register workers: %v", v)
		}
	}()
	seen := map[string]bool{}
	for _, k := range append(kinds, legacyRiverKind) {
		if !seen[k] {
			seen[k] = true
			// River registers a worker under its args' Kind; AddWorkerArgs
			// (which River's docs keep for edge cases) is its one way to
			// register a type under kinds known only at run time.
			river.AddWorkerArgs(workers, jobArgs{JobKind: k}, w)
		}
	}
	return workers, nil
}

// drainOptions say how runClient stops.
type drainOptions struct {
	timeout time.Duration
	abort   <-chan struct{}
	notify  func(string)
	running *running // nil: the relay, whose publishes end on their own
	// filter, when set, narrows the jobs UntilEmpty waits for to those
	// this client works (a tenant-restricted worker leaves the others'
	// jobs, a relay the entries bound to another broker).
	filter func(*river.JobListParams) *river.JobListParams
}

// sayStopping says that a stop began, and which of what is running it
// waits for.
func (d drainOptions) sayStopping(what, running string) {
	if running == "" {
		d.say("stopping: taking no more %s; nothing is running", what)
		return
	}
	d.say("stopping: taking no more %s; waiting up to %s for %s to finish (interrupt again to stop at once)", what, d.timeout, running)
}

func (d drainOptions) say(format string, args ...any) {
	if d.notify != nil {
		d.notify(fmt.Sprintf(format, args...))
	}
}

// runClient runs a River client working queues until ctx is done or, with
// untilEmpty, until none of them holds a pending job; then it drains.
func (p *Pipeline) runClient(ctx context.Context, workers *river.Workers, queues map[string]river.QueueConfig, names []string, untilEmpty bool, d drainOptions) error {
	cfg := p.riverConfig(workers)
	cfg.Queues = queues
	client, err := river.NewClient(p.driver, cfg)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	// River cancels running jobs when Start's context is done: detach it,
	// so that ctx only starts the drain below.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("pipeline: start workers: %w", err)
	}
	if untilEmpty {
		err = p.waitEmpty(ctx, names, d)
	} else {
		<-ctx.Done()
	}
	if d.timeout == 0 {
		d.timeout = DefaultDrainTimeout
	}
	stopped := make(chan error, 1)
	go func() { stopped <- client.Stop(context.WithoutCancel(ctx)) }()
	if ctx.Err() != nil && d.running != nil {
		d.sayStopping("jobs", d.running.list())
	}
	var serr error
	if d.running == nil {
		serr = <-stopped
	} else {
		deadline := time.NewTimer(max(d.timeout, 0))
		defer deadline.Stop()
		select {
		case serr = <-stopped:
		case <-deadline.C:
			if ids := d.running.release(); ids != "" {
				d.say("drain timeout of %s: %s go back to the queue, attempt not spent", d.timeout, ids)
			}
			serr = <-stopped
		case <-d.abort:
			if ids := d.running.release(); ids != "" {
				d.say("stopping at once: %s go back to the queue, attempt not spent", ids)
			}
			serr = <-stopped
		}
	}
	if serr != nil && err == nil {
		err = fmt.Errorf("pipeline: stop workers: %w", serr)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// pendingStates are the states in which a job still has work ahead of it.
var pendingStates = jobs.PendingStates

// waitNotice is how often waitEmpty says what it waits for, when that is
// a job running elsewhere.
const waitNotice = 30 * time.Second

// waitEmpty polls, one row at a time, until no job of the queues kinds is
// pending.
// Every waitNotice it names the jobs running on other workers it waits
// for, and when each would be rescued if its worker is gone.
func (p *Pipeline) waitEmpty(ctx context.Context, kinds []string, d drainOptions) error {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	lastNotice := time.Now()
	failing := false
	params := river.NewJobListParams().Queues(kinds...).States(pendingStates...).First(1)
	if d.filter != nil {
		params = d.filter(params)
	}
	for {
		res, err := p.client.JobList(ctx, params)
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			// The database is unavailable: the running jobs wait it out
			// (RetryPolicy), and so does the poll.
			if !failing {
				d.say("the job database does not answer (%v); waiting for it", err)
			}
			failing = true
		case len(res.Jobs) == 0:
			return nil
		case failing:
			failing = false
			d.say("the job database answers again")
		}
		if time.Since(lastNotice) >= waitNotice {
			lastNotice = time.Now()
			p.noticeRunning(ctx, kinds, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// tenantFilter restricts params to the jobs of tenants (all when none):
// the tenant in the job's arguments, read with ->> (PostgreSQL's jsonb
// operator, and SQLite's since 3.38).
func tenantFilter(params *river.JobListParams, tenants []string) *river.JobListParams {
	if len(tenants) == 0 {
		return params
	}
	names := make([]string, len(tenants))
	args := river.NamedArgs{}
	for i, t := range tenants {
		names[i] = fmt.Sprintf("@tenant%d", i)
		args[fmt.Sprintf("tenant%d", i)] = t
	}
	return params.Where("args ->> 'tenant' IN ("+strings.Join(names, ", ")+")", args)
}

// noticeRunning says which running jobs of kinds held by other workers
// waitEmpty waits for, and when each is rescued if its worker died.
func (p *Pipeline) noticeRunning(ctx context.Context, kinds []string, d drainOptions) {
	res, err := p.client.JobList(ctx, river.NewJobListParams().Queues(kinds...).States(rivertype.JobStateRunning).First(20))
	if err != nil || d.notify == nil {
		return
	}
	for _, row := range res.Jobs {
		if d.running != nil && d.running.has(row.ID) {
			continue
		}
		if row.AttemptedAt == nil {
			continue
		}
		beat := *row.AttemptedAt
		d.say("waiting for job %d (queue %s), running on another worker, lease renewed %s ago; if that worker is gone it is rescued by %s (lease %s + rescuer interval %s), or now with: claimcheck jobs release %d",
			row.ID, row.Queue, time.Since(beat).Round(time.Second), beat.Add(p.cfg.Lease+rescuerInterval).Local().Format(time.TimeOnly), p.cfg.Lease, rescuerInterval, row.ID)
	}
}

type worker struct {
	river.WorkerDefaults[jobArgs]
	p        *Pipeline
	handlers map[string]claimcheck.Handler
	onDone   func(Outcome)
	notify   func(string) // WorkOptions.Notify, or nil
	running  *running
}

// Timeout is the job's lease, not its timeout: River's rescuer leaves a
// running job alone for this long after its last renewal (attempted_at,
// which the heartbeat moves), and Work applies the job timeout itself.
func (w *worker) Timeout(*river.Job[jobArgs]) time.Duration { return w.p.cfg.Lease }

// ErrReturnToQueue, returned (wrapped or not) by a handler, gives its job
// back unworked: it goes back to its queue without spending an attempt,
// available again after the same delay as a job left for another tenant's
// worker (250 ms, doubling each time up to 10 s), and the attempt's Outcome
// is JobLeft. For a handler that hands jobs on and found no taker (serve's
// HTTP API, whose remote workers claim jobs through it). A handler must
// not return it after its payload's side effects began.
var ErrReturnToQueue = errors.New("handler returned the job to its queue unworked")

// errReleased cancels a handler whose job goes back to the queue.
var errCancelled = errors.New("job cancelled (Pipeline.Cancel) while it ran")

var errReleased = errors.New("worker stopping: job released to the queue")

// errLeaseLost cancels a handler whose job was taken from this worker.
var errLeaseLost = errors.New("job lease lost: rescued or released while this worker could not renew it")

func (w *worker) Work(rctx context.Context, job *river.Job[jobArgs]) (err error) {
	st := w.p.stores[queueStore(job.Queue)]
	if st == nil {
		// A job of a store this worker lacks. Work subscribes only to its
		// stores' queues, so this should not happen; if it does, the job
		// is left untouched, nothing fetched and no attempt spent, for a
		// worker that has the store.
		if w.onDone != nil {
			w.onDone(Outcome{JobID: job.ID, Kind: job.Args.JobKind, Attempt: job.Attempt, State: JobLeft})
		}
		return river.JobSnooze(leaveDelay(job.Metadata))
	}
	if !st.Serves(job.Args.Tenant) {
		// Another tenant's job: back to its queue untouched, nothing
		// fetched, no attempt spent (River's snooze), for a worker that
		// serves the tenant. A ticket whose own tenant this worker does
		// not serve, under a job of a tenant it does, is still refused
		// (ticket-forbidden) by the claim, before any fetch.
		if w.onDone != nil {
			w.onDone(Outcome{JobID: job.ID, Kind: job.Args.JobKind, Tenant: job.Args.Tenant, Attempt: job.Attempt, State: JobLeft})
		}
		return river.JobSnooze(leaveDelay(job.Metadata))
	}
	// The handler runs on a context of its own: River's carries the lease
	// as a deadline, and is cancelled by a hard stop.
	ctx, cancelTimeout := context.WithTimeout(context.WithoutCancel(rctx), w.p.cfg.JobTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A cancel (Pipeline.Cancel, River's JobCancel) does reach it: River
	// cancels its own context with ErrJobCancelledRemotely.
	stopCancelWatch := context.AfterFunc(rctx, func() {
		if errors.Is(context.Cause(rctx), river.ErrJobCancelledRemotely) {
			cancel(errCancelled)
		}
	})
	defer stopCancelWatch()
	w.running.add(job.ID, job.Args.JobKind, cancel)
	defer w.running.remove(job.ID)
	stopBeat := w.p.heartbeat(ctx, job.ID, job.Attempt, cancel)
	defer stopBeat()

	o := Outcome{JobID: job.ID, Kind: job.Args.JobKind, Tenant: job.Args.Tenant, Attempt: job.Attempt}
	// The attempt's span continues the producer's trace (River's metadata).
	sctx, link := jobtel.FromMetadata(ctx, job.Metadata)
	ctx, span, end := w.p.store.StartMessaging(sctx, claimcheck.Messaging{System: claimcheck.MessagingSystemRiver,
		Type: messagingconv.OperationTypeProcess, Name: "work", Destination: job.Args.JobKind, MessageID: strconv.FormatInt(job.ID, 10)},
		jobtel.JobAttrs(job.ID, job.Args.JobKind, job.Args.Tenant, job.Attempt), link)
	defer func() {
		span.SetAttributes(claimcheck.AttrOutcome.String(string(o.State)))
		end(o.Err)
	}()
	err = w.attempt(ctx, st, job, &o)
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		o.State = JobCompleted
		if waited(job) {
			// The infrastructure this job waited for is back: the others
			// waiting in its queue need not sit out their waits.
			w.p.back.wake()
			w.p.wakeWaiting(ctx, job.Queue)
		}
	case errors.Is(cause, errCancelled):
		// Cancelled while it ran: River records the job cancelled (a
		// dead letter) from its own context's cause.
		o.State, o.Err, o.Reason = JobDead, errCancelled, "cancelled"
	case errors.Is(cause, errReleased):
		o.State, o.Err = JobReleased, errReleased
		err = river.JobSnooze(0)
	case errors.Is(err, ErrReturnToQueue):
		// The handler gave the job back unworked: as for another tenant's
		// job, back to its queue after the leave delay, no attempt spent.
		o.State, o.Err = JobLeft, err
		err = river.JobSnooze(leaveDelay(job.Metadata))
	default:
		// A job that ran out of its time, or lost its lease, failed as a
		// job, whatever its last call reported: it spends its attempt.
		switch {
		case errors.Is(cause, errLeaseLost):
			err = fmt.Errorf("%w: %v", errLeaseLost, err)
		case errors.Is(cause, context.DeadlineExceeded):
			err = fmt.Errorf("pipeline: job timeout of %s: %v", w.p.cfg.JobTimeout, err)
		}
		o.Err, o.Reason = err, claimcheck.Reason(err)
		err = w.settleFailure(ctx, job, err, &o)
	}
	if w.onDone != nil {
		w.onDone(o)
	}
	return err
}

// Bounds of the delay before a job left for another tenant's worker is
// fetched again: leaveMinDelay after the first time, doubling each time
// it is left (River counts a job's snoozes), up to leaveMaxDelay. It is
// the most a worker serving the tenant may wait for the job because a
// worker that does not serve it fetched it first; the doubling keeps
// workers that serve none of a backlog's tenants from fetching it in a
// loop. Tenants given kinds (queues) of their own never meet this.
const (
	leaveMinDelay = 250 * time.Millisecond
	leaveMaxDelay = 10 * time.Second
)

// leaveDelay is the snooze of a job left for another tenant's worker,
// from its River metadata's snooze count.
func leaveDelay(metadata []byte) time.Duration {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &m)
	d := leaveMinDelay
	for i := 0; i < m.Snoozes && d < leaveMaxDelay; i++ {
		d *= 2
	}
	return min(d, leaveMaxDelay)
}

// settleFailure applies the retry policy to a failed attempt and returns
// what River is to do with the job.
func (w *worker) settleFailure(ctx context.Context, job *river.Job[jobArgs], err error, o *Outcome) error {
	var prev jobOutput
	if out := job.Output(); len(out) > 0 {
		_ = json.Unmarshal(out, &prev)
	}
	dec := w.p.cfg.Retry.Decide(err, job.Attempt, job.MaxAttempts, prev.UnavailableSince, time.Now())
	switch {
	case dec.Dead && dec.Failure == claimcheck.FailureTransient:
		o.State = JobDead
		return &reasonError{err: err} // River discards it: attempts exhausted
	case dec.Dead:
		o.State = JobDead
		return deadLetter(err)
	case dec.Failure == claimcheck.FailureUnavailable:
		o.State, o.NextTry = JobWaiting, dec.Delay
		since := prev.UnavailableSince
		if since.IsZero() {
			since = time.Now().UTC()
		}
		_ = river.RecordOutput(ctx, jobOutput{UnavailableSince: since, WaitReason: claimcheck.Reason(err), WaitError: err.Error()})
		return &waitError{snooze: river.JobSnooze(dec.Delay), err: &reasonError{err: err}}
	}
	o.State, o.NextTry = JobRetrying, dec.Delay
	if !prev.UnavailableSince.IsZero() {
		_ = river.RecordOutput(ctx, jobOutput{}) // the outage is over
	}
	return &reasonError{err: err}
}

// waitError is River's snooze (the attempt given back) carrying the
// unavailability for the logs.
type waitError struct {
	snooze error // *rivertype.JobSnoozeError
	err    error
}

func (e *waitError) Error() string   { return "unavailable, waiting: " + e.err.Error() }
func (e *waitError) Unwrap() []error { return []error{e.snooze, e.err} }

// attempt is one attempt at job: validate its ticket, claim and verify the
// payload, run the handler, then keep its result (finish).
func (w *worker) attempt(ctx context.Context, st *claimcheck.Store, job *river.Job[jobArgs], o *Outcome) error {
	// Parsed as it is: whitespace (PostgreSQL's jsonb reformats the
	// arguments) is no part of the ticket, and compacting it first would
	// scan it once more.
	t, err := claimcheck.ParseTicket(job.Args.Ticket)
	if err != nil {
		return err
	}
	o.SHA256, o.Size = t.DigestPrefix(), t.Size
	h, ok := w.handlers[job.Args.JobKind]
	if !ok {
		return fmt.Errorf("pipeline: no handler for kind %q in this worker", job.Args.JobKind)
	}
	id := strconv.FormatInt(job.ID, 10)
	okey := inbox.OutcomeKey(id, job.CreatedAt)
	if attemptedBefore(job) {
		// An earlier attempt's handler may have finished and its
		// completion failed: its outcome record settles the job without
		// running the handler again (docs/invariants.md, invariant 12).
		rec, err := inbox.ReadOutcome(ctx, st, okey, id)
		if err != nil {
			return err
		}
		if rec != nil {
			err := w.settleFromOutcome(ctx, st, job, rec, okey)
			if err == nil {
				o.FromOutcome = true
				return nil
			}
			if !errors.Is(err, claimcheck.ErrPayloadMissing) {
				return err
			}
			// The recorded result's object is gone (swept after its
			// intent's grace period): nothing is left to complete the job
			// with, so the handler runs again.
			w.p.logger.WarnContext(ctx, "pipeline: a job's outcome record names a result whose object is gone: running its handler again", "job", job.ID, "error", err.Error())
			inbox.DeleteOutcome(ctx, w.p.logger, st, okey, id)
		}
	}
	cj := &claimcheck.Job{ID: id, Kind: job.Args.JobKind, Tenant: job.Args.Tenant, Attempt: job.Attempt}
	res, done, err := st.Run(ctx, cj, t, h)
	o.Timings = cj.Timings
	if err != nil {
		return err
	}
	defer done()
	return w.finish(ctx, st, job, res, okey)
}

// attemptedBefore reports whether an earlier attempt of job may have run
// its handler: River counts the attempt (a rescued or retried job's is
// above 1) and lists each worker that fetched it (a job released without
// spending its attempt, ReleaseJob, is on its first attempt again but
// fetched twice).
func attemptedBefore(job *river.Job[jobArgs]) bool {
	return job.Attempt > 1 || len(job.AttemptedBy) > 1 || len(job.Errors) > 0
}

// settleFromOutcome completes job from the outcome record an earlier
// attempt wrote, without running its handler: the recorded result is
// registered and the job completed as finish would have, then the record
// is deleted. Errors: claimcheck.ErrPayloadMissing when the recorded
// result's object is gone; the completion's errors as finish's.
func (w *worker) settleFromOutcome(ctx context.Context, st *claimcheck.Store, job *river.Job[jobArgs], rec *inbox.OutcomeRecord, okey string) error {
	var rt *claimcheck.Ticket
	if len(rec.Result) > 0 {
		var err error
		if rt, err = claimcheck.ParseTicket(rec.Result); err != nil {
			return fmt.Errorf("pipeline: job %d: the result ticket of its outcome record: %w", job.ID, err)
		}
	}
	w.p.logger.InfoContext(ctx, "pipeline: job settled from the outcome record of an earlier attempt, handler not run again", "job", job.ID, "attempt", job.Attempt, "recorded_attempt", rec.Attempt)
	gone := func() error {
		return fmt.Errorf("pipeline: job %d: the result its outcome record names is gone: %w", job.ID, claimcheck.ErrPayloadMissing)
	}
	if err := w.complete(ctx, job, &rt, gone); err != nil {
		return err
	}
	inbox.DeleteOutcome(ctx, w.p.logger, st, okey, rec.Job)
	return nil
}

// finish keeps a handler's finished work: the result's check-in, its
// registry row and the job's completion (in one transaction, River's
// JobCompleteTx) are each retried on their own, with the policy's backoff,
// until they succeed or the job's time runs out. Only a permanent failure
// (a result too large, say) ends it early.
//
// The result is checked in as a payload is (CheckIn): its check-in intent
// is committed before the upload and turned into its registry row by the
// completion (anchor), so no sweep deletes a result about to be committed,
// whatever the clocks. Should the completion find the object gone (its
// intent outlived the sweeper's grace period, a stall that long, and a
// sweep removed it), the result is checked in again and the completion
// retried. If finish gives up, the result's intent goes: its object is
// litter a sweep removes, and the next attempt checks the result in anew.
//
// Should the first try of the completion fail, the job's outcome record
// (the result ticket) is written to the store at okey before it is
// retried, so that a later attempt completes the job from it rather than
// run the handler again (docs/invariants.md, invariant 12).
func (w *worker) finish(ctx context.Context, st *claimcheck.Store, job *river.Job[jobArgs], res *claimcheck.Result, okey string) (ferr error) {
	if res == nil || res.Body == nil {
		// No result: nothing to register with the completion, so River's
		// completer completes the job (batched, as for any River job),
		// rather than a transaction of our own that River's completer
		// then repeats: the second completion was a quarter of a small
		// job's CPU on SQLite. River retries its completion for 7 to 37 s
		// (three tries); a job whose completion the database refuses for
		// longer is rescued after its lease and run again.
		var prev jobOutput
		if out := job.Output(); len(out) > 0 {
			_ = json.Unmarshal(out, &prev)
		}
		if !prev.UnavailableSince.IsZero() {
			if err := river.RecordOutput(ctx, jobOutput{}); err != nil { // the outage is over
				return fmt.Errorf("pipeline: record the job's output: %w", err)
			}
		}
		return nil
	}
	var rt *claimcheck.Ticket
	recorded := false // the outcome record is written
	id := strconv.FormatInt(job.ID, 10)
	// writeRecord writes the job's outcome record, naming rt, because of
	// cause (the database's failure).
	writeRecord := func(cause error) {
		rec := &inbox.OutcomeRecord{Job: id, Kind: job.Args.JobKind, Attempt: job.Attempt}
		if rt != nil {
			enc, err := rt.Marshal()
			if err != nil {
				return
			}
			rec.Result = enc
		}
		if err := inbox.WriteOutcome(ctx, st, okey, rec); err != nil {
			w.p.logger.WarnContext(ctx, "pipeline: write a finished job's outcome record", "job", job.ID, "error", err.Error())
			return
		}
		recorded = true
		w.say("job %d: its handler's outcome is recorded in the store (%v): no later attempt runs the handler again", job.ID, cause)
	}
	checkIn := func() error { return nil }
	if res != nil && res.Body != nil {
		body, cleanup, err := rewindable(res.Body, "")
		if err != nil {
			return err
		}
		defer cleanup()
		checkIn = func() error {
			return w.untilDone(ctx, job.ID, "check in the result", func() error {
				if _, err := body.Seek(0, io.SeekStart); err != nil {
					return claimcheck.Permanent(fmt.Errorf("pipeline: rewind the result: %w", err))
				}
				copts := &claimcheck.CheckInOptions{ContentType: res.ContentType, Result: true}
				var err error
				rt, err = w.p.ci.CheckInResult(ctx, st, job.Args.Tenant, body, copts)
				if err != nil {
					return fmt.Errorf("claimcheck: check in result of %s: %w", job.Args.JobKind, err)
				}
				return nil
			})
		}
		if err := checkIn(); err != nil {
			return err
		}
		defer func() {
			if ferr != nil && !recorded {
				// The result's object is litter a sweep removes; the next
				// attempt checks the result in anew. Not so once the
				// outcome record names it: the next attempt completes
				// the job with it (anchor finds the object).
				w.p.ci.DropIntent(ctx, rt)
			}
		}()
	}
	first := true
	err := w.complete(ctx, job, &rt, checkIn, func(err error) {
		if !first || err == nil || claimcheck.IsPermanent(err) {
			return
		}
		first = false
		if !recorded {
			writeRecord(err)
		}
	})
	if err == nil && recorded {
		inbox.DeleteOutcome(ctx, w.p.logger, st, okey, id)
	}
	return err
}

// complete records *result (nil: no result) as job's result and completes
// the job: the result's registry row (anchored, see finish) and River's
// completion in one transaction, retried by untilDone. checkIn checks the
// result in again, setting *result, should its object be found gone.
// afterTry, if given, is called with each try's error (nil on success).
func (w *worker) complete(ctx context.Context, job *river.Job[jobArgs], result **claimcheck.Ticket, checkIn func() error, afterTry ...func(error)) error {
	record := func() error {
		var out jobOutput
		if rt := *result; rt != nil {
			enc, err := rt.Marshal()
			if err != nil {
				return err
			}
			out.Result = enc
		}
		if err := river.RecordOutput(ctx, out); err != nil {
			return fmt.Errorf("pipeline: record result ticket: %w", err)
		}
		return nil
	}
	if err := record(); err != nil {
		return err
	}
	return w.untilDone(ctx, job.ID, "record the result and complete the job", func() error {
		err := w.completeTx(ctx, job, *result, checkIn, record)
		for _, f := range afterTry {
			f(err)
		}
		return err
	})
}

// completeTx is one try of complete.
func (w *worker) completeTx(ctx context.Context, job *river.Job[jobArgs], rt *claimcheck.Ticket, checkIn, record func() error) error {
	err := w.p.inTx(ctx, func(tx *sql.Tx) error {
		if rt != nil {
			if err := w.p.ci.Anchor(ctx, tx, rt, "record the result"); err != nil {
				return err
			}
			if err := register(ctx, tx, job.ID, roleResult, rt); err != nil {
				return err
			}
		}
		_, err := river.JobCompleteTx[riverdriver.Driver[*sql.Tx]](ctx, tx, job)
		return err
	})
	if rt != nil && errors.Is(err, claimcheck.ErrPayloadMissing) {
		if err := checkIn(); err != nil {
			return err
		}
		if err := record(); err != nil {
			return err
		}
		return fmt.Errorf("pipeline: job %d: its result's object was deleted before its registry row was written (its check-in intent outlived the sweeper's grace period); checked in again", job.ID)
	}
	return err
}

// untilDone runs step, a step of finishing job id's finished work, until
// it succeeds, fails permanently, or ctx (the job's time) is done, pausing
// by the retry policy's WaitDelay between tries: each failure is a wait for
// infrastructure (the store, the job database), so the job resumes within
// seconds of its return (claimcheck.RetryPolicy.MaxWaitDelay). The first
// failure and every one after the 2nd, 4th, 8th... try in a row are said
// on w's Notify (WorkOptions.Notify: the command's standard error), with
// the job, the cause and the next try.
func (w *worker) untilDone(ctx context.Context, id int64, what string, step func() error) error {
	for n := 1; ; n++ {
		back := w.p.back.wait()
		err := step()
		if err == nil || claimcheck.IsPermanent(err) {
			if err == nil && n > 1 {
				w.say("job %d: %s succeeded on try %d", id, what, n)
				w.p.back.wake() // what it waited for is back
			}
			return err
		}
		pause := w.p.cfg.Retry.WaitDelay(n)
		w.p.logger.WarnContext(ctx, "pipeline: finishing a job failed, retrying", "job", id, "step", what, "try", n, "error", err.Error(), "next_try_in", pause.String())
		if n&(n-1) == 0 { // 1, 2, 4, 8...
			w.say("job %d: waiting: %s failed (try %d, %s): %v; next try in %s", id, what, n, claimcheck.Reason(err), err, pause.Round(100*time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pipeline: %s: gave up when the job's time ran out: %w", what, err)
		case <-time.After(pause):
		case <-back:
			// Another job's wait just ended: try now.
		}
	}
}

// backSignal wakes, at once, the jobs of one process that wait in place
// for unavailable infrastructure (untilDone) when another job of the
// process finds it back (its wait ended in success), so that they do not
// sit out the rest of their pauses (up to
// claimcheck.RetryPolicy.MaxWaitDelay).
type backSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed by the next wake.
func (b *backSignal) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// wake closes the channel wait returned, if any.
func (b *backSignal) wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// say passes one line to WorkOptions.Notify, if set.
func (w *worker) say(format string, args ...any) {
	if w.notify != nil {
		w.notify(fmt.Sprintf(format, args...))
	}
}

// rewindable returns r as a seekable reader: r itself if it is an
// *os.File or another io.ReadSeeker, else a copy spooled to an unlinked
// temporary file in dir, so that a check-in can be retried.
func rewindable(r io.Reader, dir string) (io.ReadSeeker, func(), error) {
	if rs, ok := r.(io.ReadSeeker); ok {
		return rs, func() {}, nil
	}
	f, err := os.CreateTemp(dir, "claimcheck-result-*")
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: spool the result: %w", err)
	}
	os.Remove(f.Name()) // unlinked: nothing is left behind
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("pipeline: spool the result: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// deadLetter cancels the job now: River records the error and moves the job
// to cancelled, where it stays as a dead letter.
func deadLetter(err error) error { return river.JobCancel(&reasonError{err: err}) }

// deadLetterAs is deadLetter with reason instead of claimcheck.Reason(err).
func deadLetterAs(reason string, err error) error {
	return river.JobCancel(&reasonError{err: err, reason: reason})
}

// reasonError prefixes the recorded error with its machine-readable reason,
// "payload-missing: …", which JobInfo.Reason reads back: reason if set,
// else claimcheck.Reason(err).
type reasonError struct {
	err    error
	reason string
}

func (e *reasonError) Error() string {
	r := e.reason
	if r == "" {
		r = claimcheck.Reason(e.err)
	}
	return r + ": " + e.err.Error()
}
func (e *reasonError) Unwrap() error { return e.err }

// running is the set of jobs this worker is running, for the drain.
type running struct {
	mu   sync.Mutex
	jobs map[int64]*runningJob
}

type runningJob struct {
	kind    string
	started time.Time
	cancel  context.CancelCauseFunc
}

func newRunning() *running { return &running{jobs: map[int64]*runningJob{}} }

func (r *running) add(id int64, kind string, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[id] = &runningJob{kind: kind, started: time.Now(), cancel: cancel}
}

func (r *running) remove(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, id)
}

func (r *running) has(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.jobs[id]
	return ok
}

// list describes the running jobs, "job 7 (pdf-info, running 3s)", "" if
// none.
func (r *running) list() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int64, 0, len(r.jobs))
	for id := range r.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		j := r.jobs[id]
		parts = append(parts, fmt.Sprintf("job %d (%s, running %s)", id, j.kind, time.Since(j.started).Round(time.Second)))
	}
	return strings.Join(parts, ", ")
}

// release cancels every running handler with errReleased, so that its job
// goes back to the queue, and describes them.
func (r *running) release() string {
	desc := r.list()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		j.cancel(errReleased)
	}
	return desc
}

// waited reports whether job's previous attempt waited for unavailable
// infrastructure (its output's unavailable_since is set).
func waited(job *river.Job[jobArgs]) bool {
	var prev jobOutput
	out := job.Output()
	return len(out) > 0 && jsonUnmarshal(out, &prev) == nil && !prev.UnavailableSince.IsZero()
}

// wakeEvery is how often wakeWaiting runs in one process: when an outage
// ends, every job that waited succeeds at about the same time, and one
// wake-up serves them all.
const wakeEvery = time.Second

// wakeWaiting makes the jobs of queue that wait for unavailable
// infrastructure available at once (River's JobRetry): a job of the queue
// has just succeeded after waiting, so the store, keeper or database is
// back, and the others resume within seconds instead of at the end of
// their waits (up to claimcheck.RetryPolicy.MaxWaitDelay each,
// docs/invariants.md, invariant 12). Jobs retrying a failure of their own
// keep their backoff. Best effort: a failure leaves the jobs to their own
// timers.
func (p *Pipeline) wakeWaiting(ctx context.Context, queue string) {
	now := time.Now().UnixNano()
	last := p.lastWake.Load()
	if now-last < int64(wakeEvery) || !p.lastWake.CompareAndSwap(last, now) {
		return
	}
	// Ids only: the arguments, where inline payloads live, are not read.
	// The queue's own jobs have its kind as River kind, or the legacy one
	// (ownJobsSQL without the arguments).
	rows, err := p.db.QueryContext(ctx, `SELECT id FROM river_job WHERE state = 'scheduled' AND queue = $1 AND kind IN ($2, $3) AND `+p.jobs.WaitingSQL(),
		queue, queueKind(queue), legacyRiverKind)
	var ids []int64
	if err == nil {
		for rows.Next() {
			var id int64
			if err = rows.Scan(&id); err != nil {
				break
			}
			ids = append(ids, id)
		}
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		p.logger.WarnContext(ctx, "pipeline: list the jobs waiting for the outage that just ended (they resume at their next try)", "queue", queue, "error", err.Error())
		return
	}
	woken := 0
	for _, id := range ids {
		if _, err := p.client.JobRetry(ctx, id); err == nil {
			woken++
		}
	}
	if woken > 0 {
		p.logger.InfoContext(ctx, "pipeline: an outage ended: waiting jobs resume now", "queue", queue, "jobs", woken)
	}
}
