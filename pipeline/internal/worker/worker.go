// Package worker is package pipeline's River worker: one attempt at a job
// (claim and verify the payload, run the handler, keep its result), the
// retry policy applied to a failed attempt, the outcome records that let a
// later attempt settle a finished job without running its handler again
// (docs/invariants.md, invariant 12), the job's lease renewal (heartbeat),
// the wake-up of jobs waiting for an outage that ended, and the River
// client that runs workers until their queues are empty or a stop, then
// drains (RunClient, which the relay uses too). Package pipeline wires it
// to its database, stores and check-ins (Host) and keeps the public names
// (Pipeline.Work, WorkOptions, Outcome, JobState, ErrReturnToQueue).
package worker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/semconv/v1.41.0/messagingconv"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/pipeline/internal/checkin"
	"github.com/claimcheck/claimcheck/pipeline/internal/inbox"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobtel"
)

// Host is what the workers need of their pipeline, and what the workers of
// one pipeline share (the wake-ups of waiting jobs). Set up once by
// pipeline.Open; not to be copied.
type Host struct {
	// DB is the job database, Dialect its kind.
	DB      *sql.DB
	Dialect dbopen.Dialect
	// Driver is River's driver on DB; RiverConfig the pipeline's River
	// configuration with workers (pipeline's riverConfig).
	Driver      riverdriver.Driver[*sql.Tx]
	RiverConfig func(workers *river.Workers) *river.Config
	// Client is the pipeline's insert-only River client (listing and
	// retrying jobs); Jobs the pipeline's jobs (WaitingSQL).
	Client *river.Client[*sql.Tx]
	Jobs   *jobs.Jobs
	// Store is the default store (the attempts' spans); Stores every store
	// by name, the default one included.
	Store  *claimcheck.Store
	Stores map[string]*claimcheck.Store
	// Intents checks results in with their intents (checkin.Intents).
	Intents *checkin.Intents
	// Logger receives the workers' logs.
	Logger *slog.Logger
	// JobTimeout, Lease and Retry are Config's (defaults applied).
	JobTimeout time.Duration
	Lease      time.Duration
	Retry      claimcheck.RetryPolicy

	lastWake atomic.Int64 // unix nanos of the last wakeWaiting
	back     backSignal   // wakes UntilDone's waits
}

// State is the state of a job after an attempt: pipeline.JobState's
// values (package pipeline documents them).
type State string

// The states of pipeline.JobState, the same strings.
const (
	Completed State = "completed"
	Retrying  State = "retrying"
	Waiting   State = "waiting"
	Dead      State = "dead"
	Released  State = "released"
	Left      State = "left"
)

// Outcome is what one attempt came to: pipeline.Outcome's fields (package
// pipeline documents them), State as a State.
type Outcome struct {
	JobID       int64
	Kind        string
	Attempt     int
	State       State
	Reason      string
	Err         error
	MessageID   string
	Tenant      string
	SHA256      string
	Size        int64
	Timings     claimcheck.Timings
	FromOutcome bool
	NextTry     time.Duration
}

// Worker is River's worker of claimcheck jobs for one Work call.
type Worker struct {
	river.WorkerDefaults[jobs.WorkArgs]
	h        *Host
	handlers map[string]claimcheck.Handler
	onDone   func(Outcome)
	notify   func(string) // WorkOptions.Notify, or nil
	running  *Running
	mw       []rivertype.WorkerMiddleware // Middleware's
}

// Middleware implements river.Worker: undecodable, which works a job whose
// ticket does not decode.
func (w *Worker) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware { return w.mw }

// undecodable is the middleware that gives a job whose arguments River
// could not decode as jobs.WorkArgs (a ticket of the wrong JSON shape: a
// string, an array, a field of the wrong type) to the worker all the same,
// its arguments decoded as jobs.Args and its ticket's bytes in Raw, so
// that it fails as a ticket ParseTicket refuses (ticket-invalid, a dead
// letter on its first attempt) rather than as River's decode error. Work
// never returns a bare encoding/json error (its errors are wrapped), so
// one is River's decode's.
type undecodable struct {
	river.MiddlewareDefaults
	w *Worker
}

func (m *undecodable) Work(ctx context.Context, row *rivertype.JobRow, doInner func(context.Context) error) error {
	err := doInner(ctx)
	switch err.(type) {
	case *json.UnmarshalTypeError, *json.SyntaxError:
	default:
		return err
	}
	var args jobs.Args
	if jobs.Unmarshal(row.EncodedArgs, &args) != nil {
		return err
	}
	return m.w.Work(ctx, &river.Job[jobs.WorkArgs]{JobRow: row, Args: jobs.WorkArgs{
		JobKind: args.JobKind, Tenant: args.Tenant, IdempotencyKey: args.IdempotencyKey, Destination: args.Destination, Raw: args.Ticket}})
}

// New is a worker of h running handlers (by kind), telling onDone each
// attempt's outcome and notify (nil: nobody) what it waits for.
func New(h *Host, handlers map[string]claimcheck.Handler, onDone func(Outcome), notify func(string)) *Worker {
	w := &Worker{h: h, handlers: handlers, onDone: onDone, notify: notify, running: NewRunning()}
	w.mw = []rivertype.WorkerMiddleware{&undecodable{w: w}}
	return w
}

// Running is the set of jobs w is running, for the drain (Drain.Running).
func (w *Worker) Running() *Running { return w.running }

// Timeout is the job's lease, not its timeout: River's rescuer leaves a
// running job alone for this long after its last renewal (attempted_at,
// which the heartbeat moves), and Work applies the job timeout itself.
func (w *Worker) Timeout(*river.Job[jobs.WorkArgs]) time.Duration { return w.h.Lease }

// ErrReturnToQueue, returned (wrapped or not) by a handler, gives its job
// back unworked: it goes back to its queue without spending an attempt,
// available again after the same delay as a job left for another tenant's
// worker (250 ms, doubling each time up to 10 s), and the attempt's Outcome
// is Left. For a handler that hands jobs on and found no taker (serve's
// HTTP API, whose remote workers claim jobs through it). A handler must
// not return it after its payload's side effects began.
var ErrReturnToQueue = errors.New("handler returned the job to its queue unworked")

// errCancelled cancels a handler whose job was cancelled.
var errCancelled = errors.New("job cancelled (Pipeline.Cancel) while it ran")

// ErrReleased cancels a handler whose job goes back to the queue.
var ErrReleased = errors.New("worker stopping: job released to the queue")

// errLeaseLost cancels a handler whose job was taken from this worker.
var errLeaseLost = errors.New("job lease lost: rescued or released while this worker could not renew it")

func (w *Worker) Work(rctx context.Context, job *river.Job[jobs.WorkArgs]) (err error) {
	st := w.h.Stores[jobs.QueueStore(job.Queue)]
	if st == nil {
		// A job of a store this worker lacks. Work subscribes only to its
		// stores' queues, so this should not happen; if it does, the job
		// is left untouched, nothing fetched and no attempt spent, for a
		// worker that has the store.
		if w.onDone != nil {
			w.onDone(Outcome{JobID: job.ID, Kind: job.Args.JobKind, Attempt: job.Attempt, State: Left})
		}
		return river.JobSnooze(LeaveDelay(job.Metadata))
	}
	if !st.Serves(job.Args.Tenant) {
		// Another tenant's job: back to its queue untouched, nothing
		// fetched, no attempt spent (River's snooze), for a worker that
		// serves the tenant. A ticket whose own tenant this worker does
		// not serve, under a job of a tenant it does, is still refused
		// (ticket-forbidden) by the claim, before any fetch.
		if w.onDone != nil {
			w.onDone(Outcome{JobID: job.ID, Kind: job.Args.JobKind, Tenant: job.Args.Tenant, Attempt: job.Attempt, State: Left})
		}
		return river.JobSnooze(LeaveDelay(job.Metadata))
	}
	// The handler runs on a context of its own: River's carries the lease
	// as a deadline, and is cancelled by a hard stop.
	ctx, cancelTimeout := context.WithTimeout(context.WithoutCancel(rctx), w.h.JobTimeout)
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
	stopBeat := w.h.heartbeat(ctx, job.ID, job.Attempt, cancel)
	defer stopBeat()

	o := Outcome{JobID: job.ID, Kind: job.Args.JobKind, Tenant: job.Args.Tenant, Attempt: job.Attempt}
	// The attempt's span continues the producer's trace (River's metadata).
	sctx, link := jobtel.FromMetadata(ctx, job.Metadata)
	ctx, span, end := w.h.Store.StartMessaging(sctx, claimcheck.Messaging{System: claimcheck.MessagingSystemRiver,
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
		o.State = Completed
		if waited(job) {
			// The infrastructure this job waited for is back: the others
			// waiting in its queue need not sit out their waits.
			w.h.back.wake()
			w.h.wakeWaiting(ctx, job.Queue)
		}
	case errors.Is(cause, errCancelled):
		// Cancelled while it ran: River records the job cancelled (a
		// dead letter) from its own context's cause.
		o.State, o.Err, o.Reason = Dead, errCancelled, "cancelled"
	case errors.Is(cause, ErrReleased):
		o.State, o.Err = Released, ErrReleased
		err = river.JobSnooze(0)
	case errors.Is(err, ErrReturnToQueue):
		// The handler gave the job back unworked: as for another tenant's
		// job, back to its queue after the leave delay, no attempt spent.
		o.State, o.Err = Left, err
		err = river.JobSnooze(LeaveDelay(job.Metadata))
	default:
		// A job that ran out of its time, or lost its lease, failed as a
		// job, whatever its last call reported: it spends its attempt.
		switch {
		case errors.Is(cause, errLeaseLost):
			err = fmt.Errorf("%w: %v", errLeaseLost, err)
		case errors.Is(cause, context.DeadlineExceeded):
			err = fmt.Errorf("pipeline: job timeout of %s: %v", w.h.JobTimeout, err)
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
func LeaveDelay(metadata []byte) time.Duration {
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
func (w *Worker) settleFailure(ctx context.Context, job *river.Job[jobs.WorkArgs], err error, o *Outcome) error {
	var prev jobs.Output
	if out := job.Output(); len(out) > 0 {
		_ = json.Unmarshal(out, &prev)
	}
	dec := w.h.Retry.Decide(err, job.Attempt, job.MaxAttempts, prev.UnavailableSince, time.Now())
	switch {
	case dec.Dead && dec.Failure == claimcheck.FailureTransient:
		o.State = Dead
		return &reasonError{err: err} // River discards it: attempts exhausted
	case dec.Dead:
		o.State = Dead
		return DeadLetter(err)
	case dec.Failure == claimcheck.FailureUnavailable:
		o.State, o.NextTry = Waiting, dec.Delay
		since := prev.UnavailableSince
		if since.IsZero() {
			since = time.Now().UTC()
		}
		_ = river.RecordOutput(ctx, jobs.Output{UnavailableSince: since, WaitReason: claimcheck.Reason(err), WaitError: err.Error()})
		return &waitError{snooze: river.JobSnooze(dec.Delay), err: &reasonError{err: err}}
	}
	o.State, o.NextTry = Retrying, dec.Delay
	if !prev.UnavailableSince.IsZero() {
		_ = river.RecordOutput(ctx, jobs.Output{}) // the outage is over
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
func (w *Worker) attempt(ctx context.Context, st *claimcheck.Store, job *river.Job[jobs.WorkArgs], o *Outcome) error {
	// Decoded with the arguments (jobs.WorkArgs), validated here.
	t, err := job.Args.ParseTicket()
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
			w.h.Logger.WarnContext(ctx, "pipeline: a job's outcome record names a result whose object is gone: running its handler again", "job", job.ID, "error", err.Error())
			inbox.DeleteOutcome(ctx, w.h.Logger, st, okey, id)
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
func attemptedBefore(job *river.Job[jobs.WorkArgs]) bool {
	return job.Attempt > 1 || len(job.AttemptedBy) > 1 || len(job.Errors) > 0
}

// settleFromOutcome completes job from the outcome record an earlier
// attempt wrote, without running its handler: the recorded result is
// registered and the job completed as finish would have, then the record
// is deleted. Errors: claimcheck.ErrPayloadMissing when the recorded
// result's object is gone; the completion's errors as finish's.
func (w *Worker) settleFromOutcome(ctx context.Context, st *claimcheck.Store, job *river.Job[jobs.WorkArgs], rec *inbox.OutcomeRecord, okey string) error {
	var rt *claimcheck.Ticket
	if len(rec.Result) > 0 {
		var err error
		if rt, err = claimcheck.ParseTicket(rec.Result); err != nil {
			return fmt.Errorf("pipeline: job %d: the result ticket of its outcome record: %w", job.ID, err)
		}
	}
	w.h.Logger.InfoContext(ctx, "pipeline: job settled from the outcome record of an earlier attempt, handler not run again", "job", job.ID, "attempt", job.Attempt, "recorded_attempt", rec.Attempt)
	gone := func() error {
		return fmt.Errorf("pipeline: job %d: the result its outcome record names is gone: %w", job.ID, claimcheck.ErrPayloadMissing)
	}
	if err := w.complete(ctx, job, &rt, gone); err != nil {
		return err
	}
	inbox.DeleteOutcome(ctx, w.h.Logger, st, okey, rec.Job)
	return nil
}

// deadLetter cancels the job now: River records the error and moves the job
// to cancelled, where it stays as a dead letter.
func DeadLetter(err error) error { return river.JobCancel(&reasonError{err: err}) }

// deadLetterAs is deadLetter with reason instead of claimcheck.Reason(err).
func DeadLetterAs(reason string, err error) error {
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

// waited reports whether job's previous attempt waited for unavailable
// infrastructure (its output's unavailable_since is set).
func waited(job *river.Job[jobs.WorkArgs]) bool {
	var prev jobs.Output
	out := job.Output()
	return len(out) > 0 && jobs.Unmarshal(out, &prev) == nil && !prev.UnavailableSince.IsZero()
}
