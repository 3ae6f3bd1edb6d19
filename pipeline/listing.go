package pipeline

// Reading and operating on the job database's jobs (listing, counting,
// statistics, cancel, replay, delete) lives in pipeline/internal/jobs, as
// does what a claimcheck job is in River's table; these are its public
// names, and the names the rest of this package uses.

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"time"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
)

// The job model (pipeline/internal/jobs, model.go) under the names this
// package's code uses.
type (
	jobArgs    = jobs.Args
	insertArgs = jobs.InsertArgs
)

const (
	outboxQueuePrefix = jobs.OutboxQueuePrefix
	storeQueuePrefix  = jobs.StoreQueuePrefix
	legacyRiverKind   = jobs.LegacyRiverKind
	ownJobsSQL        = jobs.OwnJobsSQL
)

func riverKind(kind, dest string) string { return jobs.RiverKind(kind, dest) }
func outboxQueue(dest string) string     { return jobs.OutboxQueue(dest) }
func compactJSON(b []byte) []byte        { return jobs.CompactJSON(b) }
func queueStore(q string) string         { return jobs.QueueStore(q) }

// pipeline/internal/jobs/model.go:

// ValidateKind checks a job kind: 2 to 64 lowercase letters and digits,
// single '-' or '_' between them (River's queue-name rule, plus its 2-byte
// minimum for kinds), not starting with "claimcheck-outbox-" (the outbox's
// queues) or "claimcheck-store-" (named stores' queues, StoreQueue).
func ValidateKind(kind string) error { return jobs.ValidateKind(kind) }

// ErrJobNotFound is returned (wrapped) for a job id that does not exist.
var ErrJobNotFound = jobs.ErrJobNotFound

// pipeline/internal/jobs/jobs.go:

// StateDead selects dead letters in ListOptions: River's cancelled
// (permanent failure) and discarded (attempts exhausted) jobs.
const StateDead = jobs.StateDead

// StateWaiting is the State JobInfo shows for a job waiting for
// unavailable infrastructure (the store, the keeper, the job database):
// its attempt given back, due again within RetryPolicy.MaxWaitDelay;
// Reason and Error say what it waits for. In River it is scheduled.
const StateWaiting = jobs.StateWaiting

// JobInfo is a job as listings show it. It never holds payload bytes.
type JobInfo = jobs.JobInfo

// ListOptions select jobs for List. The zero value lists every job, oldest
// first (by id).
type ListOptions = jobs.ListOptions

// DeadIDs returns the ids of the dead letters of kind ("" for every kind)
// that died before cutoff (zero: whenever), oldest first, listing a page
// at a time. Errors: those of List.
func (p *Pipeline) DeadIDs(ctx context.Context, kind string, cutoff time.Time) ([]int64, error) {
	return p.jobs.DeadIDs(ctx, kind, cutoff)
}

// ValidateState returns nil for a state ListOptions.State takes, else an
// error of class claimcheck.ErrConfig listing them.
func ValidateState(state string) error { return jobs.ValidateState(state) }

// States returns the states ListOptions.State takes, sorted (for shell
// completion and messages).
func States() []string { return jobs.States() }

// List calls fn for each job matching opts, fetching PageSize rows at a time
// so memory does not grow with the number of jobs. It stops at fn's first
// error and returns it.
//
// Errors: claimcheck.ErrConfig for an unknown state or invalid kind.
func (p *Pipeline) List(ctx context.Context, opts ListOptions, fn func(*JobInfo) error) error {
	return p.jobs.List(ctx, opts, fn)
}

// JobNotFound is Get's error for job id when there is no such job
// (ErrJobNotFound), for callers that must answer a job they may not show
// exactly as a missing one.
func JobNotFound(id int64) error { return jobs.JobNotFound(id) }

// Get returns one job. Errors: ErrJobNotFound.
//
// A sent outbox entry shows its consumer's latest outcome from the inbox
// (Pipeline.Inbox): StateSent, completed with its result, StateRetrying,
// or dead with the reason its message was dead-lettered for.
func (p *Pipeline) Get(ctx context.Context, id int64) (*JobInfo, error) { return p.jobs.Get(ctx, id) }

// StateSent: the broker confirmed the entry; no consumer has recorded
// an outcome in the inbox yet, or the latest was a release (a stopping
// consumer returned it unworked, attempt not spent).
const StateSent = jobs.StateSent

// StateRetrying: a consumer's attempt failed and the broker holds the
// message for a later one.
const StateRetrying = jobs.StateRetrying

// ErrJobFinished is returned by Cancel for a job that has finished: it
// completed, died (a dead letter: replay it instead), or is an outbox entry
// the broker has confirmed.
var ErrJobFinished = jobs.ErrJobFinished

// Cancel cancels a job that has not finished: one waiting in its queue is
// cancelled at once; a running one when its handler returns, its context
// cancelled meanwhile (River's JobCancel), so the JobInfo returned may
// still say running. A cancelled job is a dead letter (reason
// "cancelled"), which Replay sends back.
// Errors: ErrJobNotFound; ErrJobFinished; the database's errors, wrapped.
func (p *Pipeline) Cancel(ctx context.Context, id int64) (*JobInfo, error) {
	return p.jobs.Cancel(ctx, id)
}

// ErrNotDead is returned by Replay for a job that is not a dead letter.
var ErrNotDead = jobs.ErrNotDead

// ErrNoResult is returned by OpenResult for a job without a result.
var ErrNoResult = jobs.ErrNoResult

// ErrPayloadGone is returned by Replay for a dead letter whose payload
// object no longer exists (expired by lifecycle, swept, or deleted), with
// claimcheck.ErrPayloadMissing.
var ErrPayloadGone = jobs.ErrPayloadGone

// Replay sends a dead letter back to its queue to be worked again now,
// after checking that its payload object still exists (an inline payload
// always does), and, for a job with attachments, every document its
// manifest lists.
// Errors: ErrJobNotFound; ErrNotDead for a job in any other state;
// ErrPayloadGone (with claimcheck.ErrPayloadMissing) when the payload
// object, or a document of a job with attachments, is gone (then an
// *AttachmentGoneError, naming it); the store's errors when it cannot tell.
func (p *Pipeline) Replay(ctx context.Context, id int64) (*JobInfo, error) {
	return p.jobs.Replay(ctx, id)
}

// AttachmentGoneError is Replay's refusal of a job with attachments one of
// whose documents is gone; errors.Is matches it with ErrPayloadGone and
// claimcheck.ErrPayloadMissing. Its message names the document, never its
// key.
type AttachmentGoneError = jobs.AttachmentGoneError

// OpenResult returns the verified bytes of a job's result (see
// claimcheck.Payload.Open). Close the returned reader when done.
// Errors: ErrJobNotFound; ErrNoResult; the claim's errors.
func (p *Pipeline) OpenResult(ctx context.Context, id int64) (io.ReadCloser, *claimcheck.Ticket, error) {
	return p.jobs.OpenResult(ctx, id)
}

// WriteResult claims a job's result into the file at path, verified, in
// one pass, renamed over path only once verified (see
// claimcheck.Payload.WriteFile: on a failure nothing is left at path).
// Errors: ErrJobNotFound; ErrNoResult; the claim's errors.
func (p *Pipeline) WriteResult(ctx context.Context, id int64, path string) (*claimcheck.Ticket, error) {
	return p.jobs.WriteResult(ctx, id, path)
}

// Delete removes jobs and their claims-registry rows in one transaction, so
// an object only they referenced becomes an orphan that the sweeper collects
// after its grace period. A running job is not deleted (River refuses it);
// an id that does not exist is skipped. It returns how many jobs it deleted.
func (p *Pipeline) Delete(ctx context.Context, ids ...int64) (int, error) {
	return p.jobs.Delete(ctx, ids...)
}

// ParseJobID parses a job id argument. Errors: ErrJobNotFound for anything
// that is not a positive integer.
func ParseJobID(s string) (int64, error) { return jobs.ParseJobID(s) }

// pipeline/internal/jobs/jobcount.go:

// Count returns how many jobs List would list for opts (PageSize, Limit,
// AfterID and Newest are ignored): one COUNT statement over the job
// table, by state, kind and tenant (read from the job's arguments) and
// Since, with the broker dead letters recorded in the inbox counted among
// the dead. For the states an outbox entry's consumer outcome decides
// (completed, StateSent, StateRetrying) it counts by listing, which reads
// the inbox for each entry: exact, but as slow as the list.
// Errors: claimcheck.ErrConfig for an unknown state or invalid kind; the
// job database's, wrapped.
func (p *Pipeline) Count(ctx context.Context, opts ListOptions) (int64, error) {
	return p.jobs.Count(ctx, opts)
}

// ActivityPoint is one step of Activity: what happened to the job table's
// jobs (outbox entries left out, as QueueStats leaves them) from At to
// At plus the step.
type ActivityPoint = jobs.ActivityPoint

// Activity returns the job table's activity from since to now, in steps
// of step (at least a second; since is rounded down to a step): three
// grouped statements over created_at and finalized_at, reading no job's
// arguments. Depth is reconstructed from the jobs still in the table (the
// jobs unfinished at since, plus those enqueued, minus those finished), so
// jobs deleted or pruned since are not in it; River prunes completed jobs
// after a day by default.
// Errors: claimcheck.ErrConfig for a step under a second or over a day;
// the job database's, wrapped.
func (p *Pipeline) Activity(ctx context.Context, since, now time.Time, step time.Duration) ([]ActivityPoint, error) {
	return p.jobs.Activity(ctx, since, now, step)
}

// pipeline/internal/jobs/queue.go:

const QueueStatsCachePeriod = jobs.QueueStatsCachePeriod

const StorageCachePeriod = jobs.StorageCachePeriod

// KindQueue is one kind's jobs in the job database, as QueueStats counts
// them. Outbox entries (jobs relayed to a broker) are not counted here:
// OutboxStats counts them by destination.
type KindQueue = jobs.KindQueue

// QueueStats counts the jobs of the job database by kind and state, the
// dead letters by kind and reason, and finds each kind's oldest job still
// to be worked, in three statements on one snapshot: every job by queue
// and state (on PostgreSQL an index-only scan of River's fetch index, once
// vacuum has marked the table's pages visible), the jobs not yet finished
// nor running (their metadata, to tell StateWaiting), and the dead
// letters (their last error, for the reason). No job's arguments, where
// inline payloads are, are read. A job's kind is its queue's (StoreQueue);
// in a job database shared with River jobs of another program, those show
// under their queues' names. Kinds are sorted by name. Outbox entries are
// left to OutboxStats; broker dead letters recorded in the inbox are not
// counted.
// Errors: the job database's, wrapped.
func (p *Pipeline) QueueStats(ctx context.Context) ([]KindQueue, error) {
	return p.jobs.QueueStats(ctx)
}

// pipeline/internal/jobs/overview.go:

// RiverClient is the pipeline's River client, insert-only (it works no
// job), for River's own tools such as River UI (riverui.NewEndpoints).
// The transactions it begins are database/sql's (*sql.Tx), on PostgreSQL
// too, where the pipeline's own statements go through River's pgx driver:
// River UI unwraps them (TestRiverUIRedacted).
// Replay dead letters with Replay and delete jobs with Delete, not through
// it: River's JobRetry does not check that the payload still exists, and
// its JobDelete leaves the job's claims-registry rows behind. Show job
// arguments and metadata only through RedactArgs and RedactMetadata: they
// hold tickets, whose keys, inline payloads and wrapped keys no page shows.
func (p *Pipeline) RiverClient() *river.Client[*sql.Tx] { return p.jobs.RiverClient() }

// RegisterQueuesEvery is how often RegisterQueues looks for queues at
// most; a call sooner after the last does nothing.
const RegisterQueuesEvery = jobs.RegisterQueuesEvery

// RegisterQueues adds to River's queue table (river_queue) each queue
// that holds a job still to be worked (available, pending, retryable,
// running or scheduled) and has no row there, and returns how many it
// added. River adds a queue's row only when a client starts working it,
// and drops it a day after the last one stopped; River UI's Queues page
// lists that table, so without this a queue whose jobs wait for a worker
// that never ran is missing from it. Rows are only added, never changed:
// a paused queue stays paused. One statement over River's fetch index;
// calls within RegisterQueuesEvery of the last do nothing.
// Errors: the job database's, wrapped.
func (p *Pipeline) RegisterQueues(ctx context.Context) (int64, error) {
	return p.jobs.RegisterQueues(ctx)
}

// OutboxStats is one outbox destination's queue.
type OutboxStats = jobs.OutboxStats

// OutboxStats returns every outbox destination that holds an entry, in
// any state, by name. One query counts them; the oldest pending entry of
// each is read through River (its creation time).
// Errors: the job database's, wrapped.
func (p *Pipeline) OutboxStats(ctx context.Context) ([]OutboxStats, error) {
	return p.jobs.OutboxStats(ctx)
}

// TenantStorage is what the claims registry records for one tenant and
// role: the distinct objects jobs refer to and their payload bytes.
type TenantStorage = jobs.TenantStorage

// StorageByTenant sums the claims registry per tenant and role: objects
// jobs still refer to, each counted once however many jobs share it.
// Inline payloads have no object and are not counted; orphans (objects no
// row refers to) are the sweeper's to find (claimcheck sweep --dry-run).
// Errors: the job database's, wrapped.
func (p *Pipeline) StorageByTenant(ctx context.Context) ([]TenantStorage, error) {
	return p.jobs.StorageByTenant(ctx)
}

// RedactedTicket is a ticket as a page may show it: no key beyond the
// tenant's prefix, no payload bytes, no wrapped key, no signature.
type RedactedTicket = jobs.RedactedTicket

// Redact returns t as a page may show it.
func Redact(t *claimcheck.Ticket) *RedactedTicket { return jobs.Redact(t) }

// RedactArgs returns a job's encoded River arguments with the ticket
// replaced by its RedactedTicket, for River UI and other pages that show
// arguments. Arguments that are not a claimcheck job's, or whose ticket does
// not parse, are replaced whole: nothing unread is shown.
func RedactArgs(encoded []byte) json.RawMessage { return jobs.RedactArgs(encoded) }

// RedactMetadata returns a job's River metadata with the result ticket in
// River's recorded output (Output) replaced by its RedactedTicket. The
// other keys (trace context, the outbox entry's broker binding, which holds
// no credentials) are kept. Metadata that does not parse as a JSON object is
// replaced whole.
func RedactMetadata(metadata []byte) json.RawMessage { return jobs.RedactMetadata(metadata) }

// pipeline/internal/jobs/history.go:

// Attempt is one failed attempt of a job as River recorded it.
type Attempt = jobs.Attempt

// History is what the job database recorded about a job's attempts and
// trace.
type History = jobs.History

// JobHistory returns a job's recorded attempts and trace context.
// Errors: ErrJobNotFound; the job database's, wrapped.
func (p *Pipeline) JobHistory(ctx context.Context, id int64) (*History, error) {
	return p.jobs.JobHistory(ctx, id)
}

// Exists reports whether the document t refers to still exists in its
// store (an inline ticket's always does): the store's existence check,
// reading no byte of it.
// Errors: the store's (ErrUnavailable, ErrAccessDenied, ...);
// ErrStoreNotConfigured for a ticket naming a store this pipeline lacks.
func (p *Pipeline) Exists(ctx context.Context, t *claimcheck.Ticket) (bool, error) {
	return p.jobs.Exists(ctx, t)
}
