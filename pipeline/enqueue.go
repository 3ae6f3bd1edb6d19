package pipeline

// Enqueue's public names, validation and check-ins; the insert itself (a
// job or outbox entries with their registry rows, idempotency, broker
// bindings) is pipeline/internal/enqueue's.

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/semconv/v1.41.0/messagingconv"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/pipeline/internal/enqueue"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
)

// ErrIdempotencyConflict is returned (wrapped) by Enqueue and EnqueueTx
// for an idempotency key that an existing job already holds with a payload
// of other bytes: the caller's payload was not enqueued, and Enqueue leaves
// no object of it behind. The same key with the same bytes is not an
// error: it returns the first job with EnqueueResult.Duplicate set.
var ErrIdempotencyConflict = enqueue.ErrIdempotencyConflict

// ReasonIdempotencyConflict names ErrIdempotencyConflict in output.
const ReasonIdempotencyConflict = "idempotency-conflict"

// EnqueueOptions adjust one enqueue. The zero value is valid.
type EnqueueOptions struct {
	// IdempotencyKey makes a second enqueue of the same kind, tenant and key
	// a no-op that returns the first job, while that job is kept (until it is
	// pruned; dead jobs do not count). At most MaxIdempotencyKeyLen bytes.
	IdempotencyKey string
	// MaxAttempts overrides Config.MaxAttempts for this job.
	MaxAttempts int
	// Priority is River's job priority, from HighestPriority (1) to
	// LowestPriority (4); 0 means DefaultPriority (1, River's default, so
	// a job without one is worked as early as any). Of the available jobs
	// of a kind, workers take the highest priority first, oldest first
	// within one. An outbox entry keeps its priority: its relay publishes
	// it with broker.AttrPriority, which a broker with priorities honours
	// (RabbitMQ with max_priority) and the others carry unused; check the
	// destination's transport with broker.CheckPriority before enqueueing.
	Priority int
	// CheckIn is passed to the store's CheckIn (content type, named key).
	CheckIn claimcheck.CheckInOptions
	// Store names the store the payload goes to, one of the pipeline's
	// (Config.Store, Config.Stores, by claimcheck.Options.Name); "" is
	// the default store. The job's attachments and manifest go to the
	// same store, and so does its result; only workers that have the
	// store work the job (StoreQueue). For EnqueueTx, an offloaded
	// ticket's own store decides, and a Store naming another is refused.
	// Errors: ErrStoreNotConfigured, with claimcheck.ErrConfig, before
	// anything is stored.
	Store string
	// Attachments, if set, are the job's named documents, 1 to
	// claimcheck.MaxAttachments with names as
	// claimcheck.ValidateAttachmentNames: each is checked in (streamed,
	// hashed, sealed) as an object, then a manifest listing them and the
	// main payload, and the job carries the manifest's ticket (at most
	// claimcheck.MaxTicketBytes however many there are). The job is
	// enqueued only once every document is stored, and not at all if one
	// fails; what was stored by then is deleted, or, if the store cannot
	// delete it, left as an orphan for the sweeper. The main payload is
	// optional: Enqueue's r may be nil. Handlers get them as
	// claimcheck.Job.Attachments, each verified first.
	Attachments []Attachment
	// Destinations, if set, sends the ticket to broker destinations through
	// the transactional outbox instead of to this pipeline's workers: one
	// outbox entry per destination (fan-out: every subscriber claims the
	// same object), each with its claims-registry row, all in the one
	// transaction. Relay publishes each destination's entries. Names as
	// ValidateDestination; at most 16, no repeats. The idempotency key
	// applies per destination.
	Destinations []string
	// Broker, if set with Destinations, binds each outbox entry to the
	// broker (and queue or stream) it is for, as broker.Binding names it
	// from the broker's URL: a relay given another broker
	// (RelayOptions.Broker) leaves the entry, and an enqueue naming a
	// destination whose pending entries are bound to another broker is
	// refused with ErrDestinationBound before anything is stored.
	Broker string
}

// Attachment is one named document of a job (EnqueueOptions.Attachments).
type Attachment struct {
	// Name is how the handler asks for it (claimcheck.ValidateAttachmentName).
	Name string
	// Body is read to EOF once, streamed into the store.
	Body io.Reader
	// ContentType is its media type, optional.
	ContentType string
}

// ErrDestinationBound is returned (wrapped, with claimcheck.ErrConfig) by
// an enqueue for a destination whose pending outbox entries are bound to
// another broker (EnqueueOptions.Broker): its message names both.
var ErrDestinationBound = enqueue.ErrDestinationBound

// MaxDestinations is the most destinations one enqueue fans out to.
const MaxDestinations = 16

// EnqueueResult describes an enqueued job.
type EnqueueResult struct {
	// JobID is River's id for the job (the first destination's outbox
	// entry when there are Destinations).
	JobID int64
	// JobIDs are the outbox entries' ids, one per destination in order;
	// nil without Destinations.
	JobIDs []int64
	// Ticket is the job's ticket.
	Ticket *claimcheck.Ticket
	// TicketBytes is the encoded ticket's size in bytes.
	TicketBytes int
	// Duplicate is true when the idempotency key matched an existing job,
	// whose id and ticket are returned instead.
	Duplicate bool
}

// Enqueue checks r in for tenant, then in one transaction writes the claims
// registry row and a job of kind carrying the ticket. The store write is
// complete and durable before the transaction begins: a crash in between
// leaves an orphan object, never a job without its payload.
//
// With EnqueueOptions.Attachments, the main payload r (optional, nil for
// none) and each attachment are checked in first, then their manifest,
// whose ticket the job carries; the registry rows of all of them are
// written in the job's transaction.
//
// Errors: claimcheck.ErrTicketInvalid for a bad kind, tenant, idempotency
// key or attachment name; the check-in's errors (see
// claimcheck.Store.CheckIn), naming the attachment whose check-in failed;
// the database's errors, wrapped.
func (p *Pipeline) Enqueue(ctx context.Context, kind, tenant string, r io.Reader, opts *EnqueueOptions) (res *EnqueueResult, err error) {
	ctx, span, end := p.store.StartMessaging(ctx, claimcheck.Messaging{System: claimcheck.MessagingSystemRiver,
		Type: messagingconv.OperationTypeSend, Name: "enqueue", Destination: kind},
		[]attribute.KeyValue{claimcheck.AttrKind.String(kind), claimcheck.AttrTenant.String(tenant)})
	defer func() {
		if !span.IsRecording() { // no attribute list for a span that records nothing
			end(err)
			return
		}
		if res != nil {
			claimcheck.SetMessageID(span, strconv.FormatInt(res.JobID, 10))
			span.SetAttributes(claimcheck.AttrJob.Int64(res.JobID), attribute.Bool("claimcheck.duplicate", res.Duplicate))
			if res.Ticket != nil {
				span.SetAttributes(claimcheck.TicketAttributes(res.Ticket)...)
			}
		}
		if opts != nil && len(opts.Destinations) > 0 {
			span.SetAttributes(attribute.StringSlice("claimcheck.outbox", opts.Destinations))
		}
		end(err)
	}()
	return p.enqueue(ctx, kind, tenant, r, opts)
}

func (p *Pipeline) enqueue(ctx context.Context, kind, tenant string, r io.Reader, opts *EnqueueOptions) (*EnqueueResult, error) {
	if opts == nil {
		opts = &EnqueueOptions{}
	}
	if err := validateEnqueue(kind, opts); err != nil {
		return nil, err
	}
	if r == nil && len(opts.Attachments) == 0 {
		return nil, fmt.Errorf("pipeline: no payload and no attachments: %w", claimcheck.ErrTicketInvalid)
	}
	st, err := p.StoreNamed(opts.Store)
	if err != nil {
		return nil, err
	}
	if _, err := StoreQueue(st.Name(), kind); err != nil {
		return nil, fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrConfig)
	}
	for _, dest := range opts.Destinations {
		// Before the check-in, so that a refusal stores nothing; EnqueueTx
		// checks again inside the transaction.
		if err := p.insert.CheckBinding(ctx, p.db, dest, opts.Broker); err != nil {
			return nil, err
		}
	}
	var t *claimcheck.Ticket
	var m *claimcheck.Manifest
	if len(opts.Attachments) > 0 {
		t, m, err = p.checkInDocuments(ctx, st, tenant, r, opts)
	} else {
		t, err = p.ci.CheckIn(ctx, st, tenant, r, &opts.CheckIn)
	}
	if err != nil {
		return nil, err
	}
	res, err := p.enqueueChecked(ctx, kind, t, m, opts)
	if err != nil {
		// Leave nothing behind: the objects go unless something else
		// holds them (a committed registry row, if the commit's error lied).
		p.discardAll(ctx, "a failed enqueue", t, m)
		return nil, err
	}
	if res.Duplicate && res.Ticket.Key != t.Key {
		// The first job's payload is elsewhere (inline, or another key):
		// the objects this check-in stored are nobody's (those the first
		// job holds too are kept).
		p.discardAll(ctx, "", t, m)
	}
	return res, nil
}

// checkInDocuments checks in the main payload r (if not nil) and each of
// opts.Attachments, in order, then their manifest, and returns the
// manifest's ticket. If one fails, what was checked in before is
// discarded (left as an orphan for a sweep when the store cannot delete
// it) and the error names the document.
func (p *Pipeline) checkInDocuments(ctx context.Context, st *claimcheck.Store, tenant string, r io.Reader, opts *EnqueueOptions) (*claimcheck.Ticket, *claimcheck.Manifest, error) {
	m := &claimcheck.Manifest{Version: claimcheck.ManifestVersion}
	fail := func(err error) (*claimcheck.Ticket, *claimcheck.Manifest, error) {
		p.discardAll(ctx, "a failed check-in of attachments", nil, m)
		return nil, nil, err
	}
	if r != nil {
		o := opts.CheckIn
		o.Offload = true
		t, err := p.ci.CheckIn(ctx, st, tenant, r, &o)
		if err != nil {
			return fail(fmt.Errorf("pipeline: check in the main payload: %w", err))
		}
		m.Payload = t
	}
	for i, a := range opts.Attachments {
		t, err := p.ci.CheckIn(ctx, st, tenant, a.Body, &claimcheck.CheckInOptions{ContentType: a.ContentType, Offload: true})
		if err != nil {
			return fail(fmt.Errorf("pipeline: check in attachment %q (%d of %d): %w", a.Name, i+1, len(opts.Attachments), err))
		}
		m.Attachments = append(m.Attachments, claimcheck.Attachment{Name: a.Name, Ticket: t})
	}
	t, err := p.ci.CheckInManifest(ctx, st, tenant, m)
	if err != nil {
		return fail(fmt.Errorf("pipeline: check in the manifest of %d attachments: %w", len(m.Attachments), err))
	}
	return t, m, nil
}

// discardAll discards (discard) t's object, if t is not nil, and those of
// every document m lists, if m is not nil, best effort: an object it
// cannot delete is an orphan a sweep removes, and what names the failed
// step for the warning ("" for none).
func (p *Pipeline) discardAll(ctx context.Context, what string, t *claimcheck.Ticket, m *claimcheck.Manifest) {
	var ts []*claimcheck.Ticket
	if t != nil {
		ts = append(ts, t)
	}
	if m != nil {
		ts = append(ts, m.Tickets()...)
	}
	for _, t := range ts {
		if err := p.ci.Discard(ctx, t); err != nil && what != "" {
			p.logger.Warn("pipeline: could not delete the object of "+what+"; a sweep removes it", "ticket", t.String(), "error", err)
		}
	}
}

func (p *Pipeline) enqueueChecked(ctx context.Context, kind string, t *claimcheck.Ticket, m *claimcheck.Manifest, opts *EnqueueOptions) (*EnqueueResult, error) {
	if p.dialect == dbopen.Postgres && t.IsInline() && !t.Manifest && m == nil && len(opts.Destinations) == 0 {
		return p.enqueueNative(ctx, kind, t, opts)
	}
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("pipeline: begin: %w", err)
	}
	defer tx.Rollback()
	res, err := p.enqueueTx(ctx, tx, kind, t, m, opts)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("pipeline: commit enqueue of %s: %w", t, err)
	}
	return res, nil
}

// prepareEnqueue checks an enqueue of t as kind and returns what both
// insert paths (enqueueTx, enqueueNative) need: t encoded as the job's
// arguments carry it (validated, within its budget), the job's queue and
// its store.
func (p *Pipeline) prepareEnqueue(kind string, t *claimcheck.Ticket, opts *EnqueueOptions) ([]byte, string, *claimcheck.Store, error) {
	if err := validateEnqueue(kind, opts); err != nil {
		return nil, "", nil, err
	}
	enc, err := t.Marshal()
	if err != nil {
		return nil, "", nil, err
	}
	queue, st, err := p.jobQueue(kind, t, opts.Store)
	if err != nil {
		return nil, "", nil, err
	}
	return enc, queue, st, nil
}

// enqueueNative is enqueueChecked on PostgreSQL for a job whose
// transaction holds River's insert and nothing else (enqueue.Host.Native).
func (p *Pipeline) enqueueNative(ctx context.Context, kind string, t *claimcheck.Ticket, opts *EnqueueOptions) (*EnqueueResult, error) {
	enc, queue, _, err := p.prepareEnqueue(kind, t, opts)
	if err != nil {
		return nil, err
	}
	return enqueueResult(p.insert.Native(ctx, kind, queue, t, enc, insertOptions(opts)))
}

// EnqueueTx writes the claims-registry row and a job carrying t inside the
// caller's transaction, so a business row, the registry row and the job
// commit or roll back together (the transactional outbox). Check the payload
// in first with CheckIn, whose intent EnqueueTx turns into the registry
// row; never enqueue a ticket whose check-in has not returned. A ticket
// without a live intent (checked in with Store().CheckIn, or whose intent a
// sweep reclaimed after its grace period) is enqueued only if its object
// still exists, checked under the key's lock held until tx ends.
//
// A manifest's ticket (CheckInManifest) is read back from the store
// (ReadManifest) so that each document it lists gets its registry row
// too; opts.Attachments is for Enqueue and ignored here.
//
// Errors as for Enqueue, and claimcheck.ErrPayloadMissing when t's object,
// or one its manifest lists, is gone; ErrIdempotencyConflict leaves tx to
// be rolled back.
func (p *Pipeline) EnqueueTx(ctx context.Context, tx *sql.Tx, kind string, t *claimcheck.Ticket, opts *EnqueueOptions) (*EnqueueResult, error) {
	return p.enqueueTx(ctx, tx, kind, t, nil, opts)
}

// enqueueTx is EnqueueTx with t's manifest m when the caller has it (nil:
// read it from the store if t is a manifest's).
func (p *Pipeline) enqueueTx(ctx context.Context, tx *sql.Tx, kind string, t *claimcheck.Ticket, m *claimcheck.Manifest, opts *EnqueueOptions) (*EnqueueResult, error) {
	if opts == nil {
		opts = &EnqueueOptions{}
	}
	enc, queue, st, err := p.prepareEnqueue(kind, t, opts)
	if err != nil {
		return nil, err
	}
	return enqueueResult(p.insert.Tx(ctx, tx, kind, queue, st, t, m, enc, insertOptions(opts)))
}

// insertOptions are what pipeline/internal/enqueue uses of opts.
func insertOptions(opts *EnqueueOptions) *enqueue.Options {
	return &enqueue.Options{IdempotencyKey: opts.IdempotencyKey, MaxAttempts: opts.MaxAttempts, Priority: opts.Priority, Destinations: opts.Destinations, Broker: opts.Broker}
}

// enqueueResult is pipeline/internal/enqueue's result as an EnqueueResult.
func enqueueResult(res *enqueue.Result, err error) (*EnqueueResult, error) {
	return (*EnqueueResult)(res), err
}

func validateEnqueue(kind string, opts *EnqueueOptions) error {
	if err := ValidateKind(kind); err != nil {
		return fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrTicketInvalid)
	}
	if len(opts.IdempotencyKey) > MaxIdempotencyKeyLen {
		return fmt.Errorf("pipeline: idempotency key is %d bytes, at most %d allowed: %w", len(opts.IdempotencyKey), MaxIdempotencyKeyLen, claimcheck.ErrTicketInvalid)
	}
	if opts.MaxAttempts < 0 {
		return fmt.Errorf("pipeline: negative max attempts: %w", claimcheck.ErrTicketInvalid)
	}
	if err := ValidatePriority(opts.Priority); err != nil {
		return fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrTicketInvalid)
	}
	if opts.Broker != "" && len(opts.Destinations) == 0 {
		return fmt.Errorf("pipeline: a broker binding is for outbox entries: give Destinations: %w", claimcheck.ErrConfig)
	}
	if len(opts.Broker) > broker.MaxBindingLen {
		return fmt.Errorf("pipeline: broker binding of %d bytes, at most %d allowed: %w", len(opts.Broker), broker.MaxBindingLen, claimcheck.ErrConfig)
	}
	if len(opts.Attachments) > 0 {
		names := make([]string, len(opts.Attachments))
		for i, a := range opts.Attachments {
			if a.Body == nil {
				return fmt.Errorf("pipeline: attachment %q has no body: %w", a.Name, claimcheck.ErrTicketInvalid)
			}
			names[i] = a.Name
		}
		if err := claimcheck.ValidateAttachmentNames(names); err != nil {
			return fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrTicketInvalid)
		}
	}
	if len(opts.Destinations) > MaxDestinations {
		return fmt.Errorf("pipeline: %d destinations, at most %d allowed: %w", len(opts.Destinations), MaxDestinations, claimcheck.ErrTicketInvalid)
	}
	seen := map[string]bool{}
	for _, d := range opts.Destinations {
		if err := ValidateDestination(d); err != nil {
			return fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrTicketInvalid)
		}
		if seen[d] {
			return fmt.Errorf("pipeline: destination %q given twice: %w", d, claimcheck.ErrTicketInvalid)
		}
		seen[d] = true
	}
	return nil
}

// Job priorities, River's: 1 is worked first, 4 last.
const (
	HighestPriority = jobs.HighestPriority
	LowestPriority  = jobs.LowestPriority
	// DefaultPriority is a job's priority when EnqueueOptions.Priority is
	// 0: River's default, the highest.
	DefaultPriority = jobs.DefaultPriority
)

// ValidatePriority checks a job priority: 0 (the default) or
// HighestPriority (1) to LowestPriority (4).
func ValidatePriority(priority int) error {
	if priority < 0 || priority > LowestPriority {
		return fmt.Errorf("priority %d is invalid: use %d (highest, the default) to %d (lowest)", priority, HighestPriority, LowestPriority)
	}
	return nil
}

// jobQueue is the River queue of a job of kind carrying t, and the store
// its documents are in: an offloaded ticket's own store (which a store
// named by the caller must match), else the one named (the default store
// for ""). Errors: ErrStoreNotConfigured, a store name or kind too long
// for a queue name, and a named store other than the ticket's, each with
// claimcheck.ErrConfig.
func (p *Pipeline) jobQueue(kind string, t *claimcheck.Ticket, named string) (string, *claimcheck.Store, error) {
	name := named
	if !t.IsInline() {
		if named != "" && named != t.Store {
			return "", nil, fmt.Errorf("pipeline: enqueue %s: its ticket is for store %q, not %q: %w", t, t.Store, named, claimcheck.ErrConfig)
		}
		name = t.Store
	}
	st, err := p.StoreNamed(name)
	if err != nil {
		return "", nil, err
	}
	q, err := StoreQueue(st.Name(), kind)
	if err != nil {
		return "", nil, fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrConfig)
	}
	return q, st, nil
}
