package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/semconv/v1.41.0/messagingconv"

	"github.com/claimcheck/claimcheck"
)

// Action is how Consume settled a delivery.
type Action string

const (
	Acked        Action = "acked"
	Retried      Action = "retried"
	DeadLettered Action = "dead-lettered"
	// Released: the consumer stopped before the handler finished (its
	// context was cancelled: a drain deadline, an abort), or before it
	// started a delivery it had received; the delivery goes back to the
	// queue (Transport.Retry after 2 s) without spending an attempt. The
	// broker counts the delivery all the same (its next Attempt is one
	// more), so Consume records the release in the Inbox and takes the
	// releases recorded for a delivery off its Attempt (Outcome.Attempt).
	Released Action = "released"
)

// Outcome is what Consume did with one delivery, passed to OnDone.
type Outcome struct {
	// ID is the message's idempotency key: its AttrIdempotencyKey
	// attribute, else its AttrID attribute, else the transport's id. The
	// Inbox is keyed by it and Queue.
	ID string
	// Queue is the queue the delivery came from (QueueName of the
	// transport), "" if the transport does not name it.
	Queue string
	// Job is the outbox entry the message was relayed from (its AttrJob
	// attribute), 0 if it has none.
	Job    int64
	Kind   string
	Tenant string
	// Delivery is the transport's id of the message (Delivery.ID): that of
	// one publish, where ID is the same for every replay of an outbox
	// entry.
	Delivery string
	// Attempt is the attempt this delivery is: the transport's
	// Delivery.Attempt less the releases (Released) the Inbox recorded for
	// this Delivery, at least 1. It is the handler's Job.Attempt and what
	// MaxAttempts is compared with.
	Attempt int
	// MaxAttempts is the limit applied: the message's AttrMaxAttempts, or
	// ConsumeOptions.Policy.MaxAttempts.
	MaxAttempts int
	// Ticket is the ticket the delivery carried (for an AWS pointer, the
	// ticket it was claimed with), nil if the body was not recognised.
	Ticket *claimcheck.Ticket
	// Result is the handler's result ticket (checked in under the results
	// prefix), nil if none. Consume publishes it nowhere: recording
	// (Inbox) or forwarding it is the caller's business.
	Result *claimcheck.Ticket
	// Err is the attempt's error, nil on success.
	Err error
	// Action is how the delivery was settled.
	Action Action
	// Reason is claimcheck.Reason(Err) when the delivery was retried or
	// dead-lettered.
	Reason string
	// Delay is the retry delay when Action is Retried.
	Delay time.Duration
	// Duplicate is true when the Inbox had already recorded this message as
	// processed: it was acked without running the handler.
	Duplicate bool
	// Deleted is true when DeleteOnAck deleted the payload's object before
	// this acknowledgement (the last reference to it).
	Deleted bool
	// FromOutcome is true when the delivery was settled from an outcome
	// kept by an earlier delivery (OutcomeKeeper), without running the
	// handler again.
	FromOutcome bool
	// Adopted is the key (within the store's namespace) of the foreign
	// object an AWS payload pointer named, when the payload was adopted
	// (ConsumeOptions.AdoptTenant); "" otherwise. With DeleteOnAck the
	// foreign object is deleted before the acknowledgement, as the AWS
	// consumers do, so the adopted payload is not kept twice.
	Adopted string
	// Timings are how long the claim, verification and handler took
	// (claimcheck.Job.Timings), zero for steps that did not run.
	Timings claimcheck.Timings
}

// Inbox records which messages have been processed, so that a message
// published or delivered twice (a relay retrying after a lost confirm, a
// broker redelivering after a lost ack) runs its handler once: the
// idempotent receiver. pipeline.Pipeline implements it on the job
// database.
//
// Outcomes are recorded per message (Outcome.ID) and consuming queue
// (Outcome.Queue): a message the broker copies to several queues is
// processed once in each.
type Inbox interface {
	// Seen reports what is recorded for message id from queue: whether an
	// outcome with Action Acked is, and how many releases (Action
	// Released) of its publish delivery (Outcome.Delivery) are.
	Seen(ctx context.Context, queue, id, delivery string) (Seen, error)
	// Record records o, the outcome of one attempt at message o.ID from
	// queue o.Queue, before the delivery is settled. Recording Acked makes
	// Seen's Processed true for that message and queue; recording Released
	// counts one more release of o.Delivery.
	Record(ctx context.Context, o Outcome) error
}

// ResultCheckIn is implemented by an Inbox that checks handlers' results
// in itself, so it can protect a result from the time its object is
// written until Record commits the reference to it (the Outcome's Result).
// Consume uses CheckInResult instead of the store's CheckIn when the Inbox
// has it. pipeline.Pipeline's Inbox commits a check-in intent before the
// object is written, and Record turns it into the result's registry row:
// no sweep deletes the result in between, whatever the clocks
// (docs/invariants.md).
type ResultCheckIn interface {
	// CheckInResult checks r in for tenant with opts (Result set), as
	// claimcheck.Store.CheckIn does, with its errors.
	CheckInResult(ctx context.Context, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error)
}

// OutcomeKeeper is implemented by an Inbox that can keep a processed
// message's outcome outside its database (pipeline: an outcome record in
// the store, docs/invariants.md, invariant 12), so that a handler that
// finished while the database was down never runs again: when recording
// an acked outcome fails on its first try, Consume keeps it first; a
// redelivery (Delivery.Attempt above 1) that the Inbox has not seen
// processed is settled from a kept outcome, recorded and acked, without
// running the handler.
type OutcomeKeeper interface {
	// KeepOutcome keeps o (its Result ticket, never payload bytes), keyed
	// by o.Queue and o.ID.
	KeepOutcome(ctx context.Context, o Outcome) error
	// KeptOutcome returns the outcome kept for o.Queue and o.ID: found
	// false when there is none; result nil for a handler that returned
	// none.
	KeptOutcome(ctx context.Context, o Outcome) (result *claimcheck.Ticket, found bool, err error)
	// ForgetOutcome drops the kept outcome once the Inbox recorded it;
	// best effort (a sweep removes what is left).
	ForgetOutcome(ctx context.Context, o Outcome)
}

// Seen is what an Inbox holds for one message and consuming queue.
type Seen struct {
	// Processed: an outcome with Action Acked is recorded.
	Processed bool
	// Released is the number of releases recorded for the delivery asked
	// about: deliveries the broker counted that spent no attempt.
	Released int
}

// Releaser drops one reference to a payload once its message is
// processed, and deletes the object when no reference is left (opt-in
// deletion on acknowledgement; see ConsumeOptions.DeleteOnAck).
// pipeline.Pipeline implements it with the claims registry.
type Releaser interface {
	// Release drops the reference of outbox entry job (AttrJob) held for
	// queue (the consuming queue, as QueueNamer names it) to t's object,
	// and deletes the object if no reference is left. Releasing a
	// reference already released only retries the deletion. It reports
	// whether the object was deleted.
	Release(ctx context.Context, job int64, queue string, t *claimcheck.Ticket) (bool, error)
}

// ConsumeOptions configure Consume.
type ConsumeOptions struct {
	// Handlers maps each kind to its handler. Required, non-empty.
	Handlers map[string]claimcheck.Handler
	// Policy is the retry policy, the job pipeline's: transient failures
	// are retried with its backoff (Transport.Retry) up to
	// Policy.MaxAttempts (for messages without AttrMaxAttempts; default
	// claimcheck.DefaultMaxAttempts), then dead-lettered;
	// unavailable infrastructure (store, keeper, the inbox's database) is
	// retried in place, the delivery held and its lease extended, so that
	// no attempt is spent, for the policy's Window. The zero value is the
	// defaults (claimcheck.RetryPolicy).
	Policy claimcheck.RetryPolicy
	// Batch is the most messages received at once. Default 10.
	Batch int
	// Lease is how long each Extend asks the broker to keep a delivery
	// from being redelivered. Default: the transport's own lease (Leaser:
	// the SQS queue's visibility timeout, the JetStream consumer's
	// AckWait), or DefaultLease for a transport without one; negative:
	// never extend. Consume extends every delivery it holds, from its
	// receipt until it is settled, every third of the shorter of Lease and
	// the transport's lease, so a long job (or one waiting behind others of
	// its batch) is never redelivered to another consumer meanwhile.
	Lease time.Duration
	// Inbox, if set, suppresses a second processing of a message already
	// processed from the same queue (same idempotency key, MessageKey)
	// and records every outcome.
	Inbox Inbox
	// DeleteOnAck, if set, releases the reference of a processed message's
	// queue to its payload, and deletes the object once every other
	// reference to it (the other queues a broker copied the message to,
	// other subscribers' outbox entries, other jobs) is released too. It
	// needs an Inbox: the release happens after the outcome is recorded and
	// before the delivery is acknowledged, and a release that fails leaves
	// the delivery to be redelivered (Retry), when the Inbox recognises it
	// as processed and the release is tried again. Consume refuses it
	// (ErrConfig) for a transport whose broker fans out to queues it cannot
	// count (CheckFanOut). With AdoptTenant, the foreign original of an
	// adopted payload is deleted too (Store.DeleteAdopted), as the AWS
	// consumers delete it; without DeleteOnAck it is never deleted, and an
	// adopted payload sits in the bucket twice (the original and
	// claimcheck's copy) until the producer's own rules remove the
	// original. Nil (the default) deletes nothing: retention rules and the
	// sweeper clean up.
	DeleteOnAck Releaser
	// DefaultKind is the kind of a message without AttrKind, such as one
	// an AWS extended client wrote. Empty: such a message is dead-lettered
	// (ticket-invalid).
	DefaultKind string
	// PointerBucket is the bucket the store reads, as AWS payload pointers
	// name it. A pointer naming another bucket is dead-lettered
	// (ticket-invalid). Empty: pointers are refused.
	PointerBucket string
	// AdoptTenant, if set, accepts foreign AWS payload pointers (without
	// claimcheck's AttrSHA256 digest) for this tenant: the object is read
	// once, its size checked against the pointer's marker attribute, and
	// checked in under the tenant (computing the digest the format lacks),
	// then worked like any ticket. Empty: foreign pointers are
	// dead-lettered (ticket-invalid), since their bytes cannot be verified.
	AdoptTenant string
	// RawTenant, if set, accepts a body in none of the formats DecodeBody
	// knows (Unrecognised: not a ticket, a pointer or an SNS envelope, nor
	// a malformed one of those) as the payload itself, for this tenant and
	// DefaultKind (required): an AWS-format producer (the extended clients,
	// sns-sqs-big-payload) sends a payload below its size threshold as the
	// raw message body. Such a body is checked in as it is (inline up to
	// the store's inline threshold, else as an object no registry row
	// refers to, which the sweeper removes as an orphan) and worked like any
	// ticket. It is verified by nothing but its own bytes: the producer sent
	// no digest, so the handler gets whatever the broker delivered. Empty:
	// such bodies are dead-lettered (ticket-invalid).
	RawTenant string
	// Drain, if set, stops Consume gracefully when closed: it stops
	// receiving, lets the running handler finish, releases the deliveries
	// it received but has not started (Released), and returns nil.
	Drain <-chan struct{}
	// OnDone, if set, is called after each delivery is settled.
	OnDone func(d *Delivery, o Outcome)
	// OnError, if set, receives errors Consume survives: a failed Receive
	// (Consume waits and receives again), a failed settlement (the broker
	// redelivers the message), a failed release.
	OnError func(err error)

	// system is the transport's messaging.system (System), set by Consume.
	system string
}

// ErrUnknownKind is the error of a delivery whose kind has no handler in
// this consumer. It is transient: see Consume.
var ErrUnknownKind = errors.New("no handler for kind")

// Consume receives from tr and works each delivery through store.Work until
// ctx is done, then returns nil. Deliveries are worked one at a time, in
// the order received; run several Consume calls for concurrency. Once ctx
// is done or Drain closed, deliveries received but not started go back to
// the queue without spending an attempt (Released); cancelling ctx also
// cancels a running handler's context, and its delivery is released the
// same way: close Drain instead to let a running handler finish.
// The handler's Job.ID is the outbox entry's job id (AttrJob) when the
// message has one, else the message id.
//
// Bodies are decoded by DecodeBody: a claimcheck ticket, an AWS payload
// pointer (see PointerBucket and AdoptTenant), either inside an SNS
// envelope. Each delivery is settled exactly as the job pipeline settles a
// job:
//   - a body DecodeBody does not recognise, or whose AttrTenant differs from
//     the ticket's tenant, is dead-lettered at once (ticket-invalid) and
//     never reaches a handler;
//   - a message without AttrKind (and no DefaultKind) is dead-lettered at
//     once (ticket-invalid): no consumer can route it;
//   - a kind with no handler here is retried like a transient failure
//     (other consumers on a shared queue may handle it, and a deployment
//     may be rolling out), so it is dead-lettered after MaxAttempts with
//     reason "transient";
//   - a message the Inbox has recorded as processed is acked at once;
//   - success acks the delivery; the result ticket is passed to OnDone;
//   - a permanent error (claimcheck.IsPermanent) dead-letters the delivery
//     on this attempt with reason claimcheck.Reason(err);
//   - any other error is retried after Policy.Base·2^(attempt-1) until
//     attempt MaxAttempts, then dead-lettered with its reason.
//
// From its receipt until it is settled, each delivery's lease is extended
// (Transport.Extend) every third of the transport's lease (Leaser) or of
// Lease, whichever is shorter, so a long job is not redelivered meanwhile.
//
// Consume survives broker outages: a failed Receive is reported to OnError
// and retried after a pause (1 s doubling to 30 s); a failed settlement is
// reported and the delivery left to the broker to redeliver. It returns
// early only for ErrConfig: no handlers, a RawTenant that is not a valid
// tenant or comes without DefaultKind, or a Receive error of that class.
func Consume(ctx context.Context, tr Transport, store *claimcheck.Store, opts ConsumeOptions) error {
	if len(opts.Handlers) == 0 {
		return fmt.Errorf("broker: consume: no handlers: %w", claimcheck.ErrConfig)
	}
	if opts.RawTenant != "" {
		if err := claimcheck.ValidateTenant(opts.RawTenant); err != nil {
			return fmt.Errorf("broker: consume: raw tenant: %v: %w", err, claimcheck.ErrConfig)
		}
		if opts.DefaultKind == "" {
			return fmt.Errorf("broker: consume: raw payloads need a default kind (their producers set none): %w", claimcheck.ErrConfig)
		}
	}
	opts.Policy = opts.Policy.WithDefaults()
	opts.system = System(tr)
	if opts.Batch <= 0 {
		opts.Batch = 10
	}
	if opts.DeleteOnAck != nil {
		if opts.Inbox == nil {
			return fmt.Errorf("broker: consume: deletion on acknowledgement needs an inbox: %w", claimcheck.ErrConfig)
		}
		if err := CheckFanOut(tr); err != nil {
			return fmt.Errorf("broker: consume: deletion on acknowledgement refused, its references could not be counted: %w", err)
		}
	}
	report := func(err error) {
		if opts.OnError != nil {
			opts.OnError(err)
		}
	}
	// Receiving stops on ctx or Drain; work stops only on ctx.
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	if opts.Drain != nil {
		go func() {
			select {
			case <-opts.Drain:
				rcancel()
			case <-rctx.Done():
			}
		}()
	}
	queue := QueueName(tr)
	var lease, every time.Duration
	failures := 0
	for {
		if lease == 0 && opts.Lease >= 0 {
			var err error
			if lease, every, err = leaseOf(rctx, tr, opts.Lease); err != nil {
				if rctx.Err() != nil {
					return nil
				}
				if errors.Is(err, claimcheck.ErrConfig) {
					return fmt.Errorf("broker: consume: %w", err)
				}
				failures++
				report(fmt.Errorf("broker: consume: lease (will retry): %w", err))
				select {
				case <-rctx.Done():
					return nil
				case <-time.After(receiveRetry.Backoff(failures)):
				}
				continue
			}
		}
		ds, err := tr.Receive(rctx, opts.Batch)
		if err != nil {
			if rctx.Err() != nil {
				return nil
			}
			if errors.Is(err, claimcheck.ErrConfig) {
				return fmt.Errorf("broker: consume: receive: %w", err)
			}
			failures++
			report(fmt.Errorf("broker: consume: receive (will retry): %w", err))
			select {
			case <-rctx.Done():
				return nil
			case <-time.After(receiveRetry.Backoff(failures)):
			}
			continue
		}
		failures = 0
		held := holdLeases(ctx, tr, ds, lease, every, report)
		for i, d := range ds {
			if ctx.Err() != nil || closed(opts.Drain) {
				// Stopping: deliveries received but not started go back
				// to the queue at once, their attempts not spent.
				for _, d := range ds[i:] {
					held.release(d)
					o := released(ctx, tr, queue, opts, d, nil, report)
					if opts.OnDone != nil && o != nil {
						opts.OnDone(d, *o)
					}
				}
				held.stop()
				return nil
			}
			o := consumeOne(ctx, tr, queue, store, opts, d, held, report)
			if opts.OnDone != nil && o != nil {
				opts.OnDone(d, *o)
			}
		}
		held.stop()
	}
}

// closed reports whether ch is closed (false for nil).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return ch != nil
	default:
		return false
	}
}

// DefaultLease is the lease Consume extends by for a transport that
// reports none (see ConsumeOptions.Lease).
const DefaultLease = time.Minute

// leaseOf returns how long each extension asks for (lease) and how often
// extensions are sent (every): a third of the shorter of the configured
// lease and the transport's, so the first extension goes out well before
// the broker's own timeout whatever was configured. lease is negative when
// Consume never extends.
func leaseOf(ctx context.Context, tr Transport, configured time.Duration) (lease, every time.Duration, err error) {
	if configured < 0 {
		return -1, 0, nil
	}
	lease = configured
	var own time.Duration // the transport's
	if l, ok := tr.(Leaser); ok {
		if own, err = l.Lease(ctx); err != nil {
			return 0, 0, err
		}
	}
	if lease == 0 {
		lease = own
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	shortest := lease
	if own > 0 && own < shortest {
		shortest = own
	}
	return lease, max(shortest/3, 10*time.Millisecond), nil
}

// leases extends the leases of a batch of deliveries, from their receipt
// until each is settled (release) or the batch is over (stop).
type leases struct {
	mu   sync.Mutex // held while extending, so release waits for it
	held map[*Delivery]bool
	done chan struct{}
	wg   sync.WaitGroup
}

// holdLeases extends every delivery of ds by lease every every until it is
// released. Extension failures are reported; the work goes on (at worst
// the broker redelivers, and the Inbox suppresses the second run).
func holdLeases(ctx context.Context, tr Transport, ds []*Delivery, lease, every time.Duration, report func(error)) *leases {
	l := &leases{held: make(map[*Delivery]bool, len(ds)), done: make(chan struct{})}
	if lease <= 0 || len(ds) == 0 {
		return l
	}
	for _, d := range ds {
		l.held[d] = true
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-l.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			l.mu.Lock()
			for d := range l.held {
				if err := tr.Extend(ctx, d, lease); err != nil {
					report(fmt.Errorf("broker: consume: extend the lease of %s: %w", d.ID, err))
				}
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// release stops extending d (it is about to be settled), waiting for an
// extension in progress.
func (l *leases) release(d *Delivery) {
	l.mu.Lock()
	delete(l.held, d)
	l.mu.Unlock()
}

// stop ends every extension of the batch.
func (l *leases) stop() {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	l.wg.Wait()
}

// consumeOne works and settles one delivery; nil if it could not be
// settled (reported; the broker redelivers it).
func consumeOne(ctx context.Context, tr Transport, queue string, store *claimcheck.Store, opts ConsumeOptions, d *Delivery, held *leases, report func(error)) *Outcome {
	// Settle even if ctx was cancelled while the handler ran: the outcome
	// is known and should not be lost.
	sctx := context.WithoutCancel(ctx)
	o := outcomeOf(queue, opts, d)
	done := false
	if opts.Inbox != nil && o.ID != "" {
		seen, err := seenHeld(ctx, opts, o, report)
		switch {
		case err != nil:
			o = opts.fail(o, fmt.Errorf("broker: inbox: %w", err), false)
			done = true
		case seen.Processed:
			o.Action, o.Duplicate = Acked, true
			opts.settledUnworked(store, d, &o)
			done = true
		default:
			o.Attempt = max(d.Attempt-seen.Released, 1)
			if keeper, ok := opts.Inbox.(OutcomeKeeper); ok && d.Attempt > 1 {
				// A redelivery: an earlier delivery's handler may have
				// finished while the Inbox could not record it.
				switch res, found, err := keeper.KeptOutcome(ctx, o); {
				case err != nil:
					o = opts.fail(o, fmt.Errorf("broker: read the kept outcome of %s: %w", o.ID, err), false)
					done = true
				case found:
					o.Action, o.Result, o.FromOutcome = Acked, res, true
					opts.settledUnworked(store, d, &o)
					if err := recordHeld(ctx, opts, o, report); err != nil {
						o = opts.fail(o, fmt.Errorf("broker: inbox: record %s from its kept outcome: %w", o.ID, err), false)
					} else {
						keeper.ForgetOutcome(sctx, o)
					}
					done = true
				}
			}
		}
	}
	if !done && !servesTenant(store, d) {
		// Another tenant's message, or one whose payload is in another
		// store: left, its attempt not spent, for a consumer that serves
		// the tenant and has the store (which verifies the ticket).
		held.release(d)
		return released(ctx, tr, queue, opts, d, &o, report)
	}
	if !done {
		o = workHeld(ctx, store, opts, d, o, report)
		if ctx.Err() != nil && o.Action != Acked {
			// Stopped before the handler finished: back to the queue at
			// once, for the next consumer, the attempt not spent.
			held.release(d)
			return released(ctx, tr, queue, opts, d, &o, report)
		}
		if opts.Inbox != nil && o.ID != "" {
			if err := recordHeld(ctx, opts, o, report); err != nil && o.Action == Acked {
				// The handler ran but its outcome is not recorded: run it
				// again rather than lose the result.
				o = opts.fail(o, fmt.Errorf("broker: inbox: record %s: %w", o.ID, err), false)
			}
		}
	}
	if o.Action == Acked && opts.DeleteOnAck != nil && o.Ticket != nil && !o.Ticket.IsInline() {
		// Processed (recorded in the Inbox): release before acknowledging,
		// so a failed release is redelivered, found processed, and
		// released then (also when this is already such a redelivery).
		deleted, err := opts.DeleteOnAck.Release(sctx, o.Job, o.Queue, o.Ticket)
		if err != nil {
			report(fmt.Errorf("broker: consume: release %s (the broker will deliver it again to retry): %w", o.Ticket, err))
			o.Action, o.Err, o.Reason = Retried, err, claimcheck.Reason(err)
			o.Delay = opts.Policy.Backoff(o.Attempt)
		}
		o.Deleted = deleted
	}
	if o.Action == Acked && opts.DeleteOnAck != nil && o.Adopted != "" {
		// The foreign original of an adopted payload goes as the AWS
		// consumers delete it: after processing, before the ack (a failed
		// delete is redelivered, found processed, and deleted then).
		if err := store.DeleteAdopted(sctx, o.Adopted); err != nil {
			report(fmt.Errorf("broker: consume: delete the adopted original of %s (the broker will deliver it again to retry): %w", o.ID, err))
			o.Action, o.Err, o.Reason = Retried, err, claimcheck.Reason(err)
			o.Delay = opts.Policy.Backoff(o.Attempt)
		}
	}
	held.release(d)
	var serr error
	switch o.Action {
	case Acked:
		serr = tr.Ack(sctx, d)
	case Retried:
		serr = tr.Retry(sctx, d, o.Delay)
	case DeadLettered:
		serr = tr.DeadLetter(sctx, d, o.Reason)
	}
	if serr != nil {
		report(fmt.Errorf("broker: consume: settle %s (%s); the broker will redeliver it: %w", o.ID, o.Action, serr))
		return nil
	}
	return &o
}

// settledUnworked fills in what o, a delivery acknowledged without
// running its handler (a duplicate, or settled from a kept outcome), says
// of d's body: its ticket and tenant, or the key of the foreign object an
// AWS pointer names (for DeleteOnAck's release of the adopted original).
func (opts *ConsumeOptions) settledUnworked(store *claimcheck.Store, d *Delivery, o *Outcome) {
	dec, err := DecodeBody(d.Message)
	switch {
	case err != nil:
	case dec.Kind == KindTicket:
		o.Ticket, o.Tenant = dec.Ticket, dec.Ticket.Tenant
	case dec.Kind == KindPointer:
		o.Adopted = opts.adoptedKey(store, dec.Pointer)
	}
}

// servesTenant reports whether store claims the tenant that d's ticket
// names (Options.Tenants) and holds its payload (an offloaded ticket names
// store's logical name), before anything is verified or fetched: a worker
// pinned to one region's store leaves the tickets of another's. A body
// that is not a ticket is left to work, which refuses or adopts it.
func servesTenant(store *claimcheck.Store, d *Delivery) bool {
	dec, err := DecodeBody(d.Message)
	if err != nil || dec.Kind != KindTicket || dec.Ticket == nil {
		return true
	}
	if !dec.Ticket.IsInline() && dec.Ticket.Store != store.Name() {
		return false
	}
	return store.Serves(dec.Ticket.Tenant)
}

// outcomeOf is the outcome of d before anything is done with it: its
// keys, its attempt as the transport counts it, its attempt limit.
func outcomeOf(queue string, opts ConsumeOptions, d *Delivery) Outcome {
	o := Outcome{ID: MessageKey(d), Queue: queue, Delivery: d.ID, Attempt: d.Attempt}
	o.Job, _ = strconv.ParseInt(d.Attributes[AttrJob], 10, 64)
	o.MaxAttempts = opts.Policy.MaxAttempts
	if n, err := strconv.Atoi(d.Attributes[AttrMaxAttempts]); err == nil && n > 0 {
		o.MaxAttempts = n
	}
	o.Kind = d.Attributes[AttrKind]
	return o
}

// released sends d back to the queue without spending its attempt: the
// release is recorded in the Inbox (so the next delivery's Attempt does
// not count it), then d is retried after releaseDelay. o is d's outcome
// so far (nil for a delivery not started). A release the Inbox cannot
// record is reported, and then counts as an attempt; one the transport
// cannot send is reported, and the broker redelivers d after its lease.
func released(ctx context.Context, tr Transport, queue string, opts ConsumeOptions, d *Delivery, o *Outcome, report func(error)) *Outcome {
	sctx := context.WithoutCancel(ctx)
	if o == nil {
		oo := outcomeOf(queue, opts, d)
		o = &oo
		if opts.Inbox != nil && o.ID != "" {
			if seen, err := opts.Inbox.Seen(sctx, o.Queue, o.ID, o.Delivery); err == nil {
				o.Attempt = max(d.Attempt-seen.Released, 1)
			}
		}
	}
	o.Action, o.Err, o.Reason, o.Delay, o.Result = Released, nil, "", releaseDelay, nil
	if opts.Inbox != nil && o.ID != "" {
		if err := opts.Inbox.Record(sctx, *o); err != nil {
			report(fmt.Errorf("broker: consume: record the release of %s (it counts as an attempt): %w", o.ID, err))
		}
	}
	if err := tr.Retry(sctx, d, releaseDelay); err != nil {
		report(fmt.Errorf("broker: consume: release %s; the broker will redeliver it: %w", o.ID, err))
	}
	return o
}

// MessageKey is the idempotency key of d, by which an Inbox records it:
// its AttrIdempotencyKey attribute, else its AttrID attribute, else the
// transport's id.
func MessageKey(d *Delivery) string {
	for _, k := range []string{d.Attributes[AttrIdempotencyKey], d.Attributes[AttrID]} {
		if k != "" {
			return k
		}
	}
	return d.ID
}

// fail settles o as a failure by the retry policy: dead-lettered if
// permanent or out of attempts, retried with backoff otherwise.
func (opts *ConsumeOptions) fail(o Outcome, err error, permanent bool) Outcome {
	o.Err = err
	o.Reason = claimcheck.Reason(err)
	dec := opts.Policy.Decide(err, o.Attempt, o.MaxAttempts, time.Time{}, time.Now())
	if permanent || dec.Dead {
		o.Action = DeadLettered
		return o
	}
	o.Action = Retried
	o.Delay = dec.Delay
	return o
}

// releaseDelay is how long a released delivery waits before it is
// delivered again: longer than a pull request that the stopping consumer
// may still hold on the broker (JetStream's FetchWait, 1 s), which would
// otherwise take it back for a process about to exit.
const releaseDelay = 2 * time.Second

// workHeld runs work, and while it fails on unavailable infrastructure
// runs it again in place after the policy's delay, holding the delivery
// (its lease extended) rather than settling it, so that an outage spends
// no attempt. Past the policy's Window the delivery is dead-lettered with
// the outage's reason.
func workHeld(ctx context.Context, store *claimcheck.Store, opts ConsumeOptions, d *Delivery, o Outcome, report func(error)) Outcome {
	var r Outcome
	if held(ctx, opts, o, "", func() error { r = work(ctx, store, opts, d, o); return r.Err }, report) {
		r.Action = DeadLettered
	}
	return r
}

// seenHeld looks o up in the inbox as held runs a step: while the lookup
// fails on unavailable infrastructure (the job database down) it is tried
// again in place, so that an outage spends no attempt and no message is
// dead-lettered because its inbox could not be read.
func seenHeld(ctx context.Context, opts ConsumeOptions, o Outcome, report func(error)) (Seen, error) {
	var seen Seen
	var err error
	held(ctx, opts, o, "its inbox ", func() error {
		seen, err = opts.Inbox.Seen(ctx, o.Queue, o.ID, o.Delivery)
		return err
	}, report)
	return seen, err
}

// held runs step until it succeeds, fails otherwise than on unavailable
// infrastructure, or ctx is done; while it fails unavailable it is run
// again in place after the policy's delay, holding the delivery (its
// lease extended) rather than settling it, and each wait is reported
// (what names what is unavailable, "" for the work itself). It reports
// whether the policy's Window passed (the delivery is to be
// dead-lettered with the outage's reason).
func held(ctx context.Context, opts ConsumeOptions, o Outcome, what string, step func() error, report func(error)) (dead bool) {
	var since time.Time
	for {
		err := step()
		if err == nil || ctx.Err() != nil {
			return false
		}
		now := time.Now()
		dec := opts.Policy.Decide(err, o.Attempt, o.MaxAttempts, since, now)
		if dec.Failure != claimcheck.FailureUnavailable {
			return false
		}
		if dec.Dead {
			return true
		}
		if since.IsZero() {
			since = now
		}
		report(fmt.Errorf("broker: consume: %s (attempt %d) held, %sunavailable for %s, trying again in %s: %w", o.ID, o.Attempt, what, now.Sub(since).Round(time.Second), dec.Delay.Round(time.Millisecond), err))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(dec.Delay):
		}
	}
}

// recordHeld records o in the inbox, retrying in place with the policy's
// backoff while it fails and ctx lasts, up to the policy's Window: a
// handler's finished work is not run again because the database was
// briefly unavailable.
func recordHeld(ctx context.Context, opts ConsumeOptions, o Outcome, report func(error)) error {
	sctx := context.WithoutCancel(ctx)
	start := time.Now()
	for n := 1; ; n++ {
		err := opts.Inbox.Record(sctx, o)
		if err != nil && n == 1 && o.Action == Acked && !o.FromOutcome {
			// The handler finished: keep its outcome where a redelivery
			// finds it before the Inbox can record it (OutcomeKeeper).
			if keeper, ok := opts.Inbox.(OutcomeKeeper); ok {
				if kerr := keeper.KeepOutcome(sctx, o); kerr != nil {
					report(fmt.Errorf("broker: consume: keep the outcome of %s (its handler would run again if it is redelivered before the inbox records it): %w", o.ID, kerr))
				} else {
					report(fmt.Errorf("broker: consume: %s: its handler's outcome is kept in the store (%w): no redelivery runs the handler again", o.ID, err))
				}
			}
		}
		if err == nil || o.Action != Acked || ctx.Err() != nil || time.Since(start) >= opts.Policy.Window {
			return err
		}
		report(fmt.Errorf("broker: consume: record the outcome of %s, trying again: %w", o.ID, err))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(opts.Policy.Backoff(n)):
		}
	}
}

// work runs one delivery and decides how to settle it, in a span that
// continues the producer's trace from the message's attributes (W3C trace
// context, set by the relay).
func work(ctx context.Context, store *claimcheck.Store, opts ConsumeOptions, d *Delivery, o Outcome) (r Outcome) {
	ctx, span, end := store.StartMessaging(propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(d.Attributes)),
		claimcheck.Messaging{System: opts.system, Type: messagingconv.OperationTypeProcess, Name: "receive", Destination: o.Queue, MessageID: o.ID},
		[]attribute.KeyValue{claimcheck.AttrJob.Int64(o.Job), claimcheck.AttrAttempt.Int(o.Attempt)})
	defer func() {
		span.SetAttributes(claimcheck.AttrKind.String(r.Kind), claimcheck.AttrTenant.String(r.Tenant))
		if r.Ticket != nil {
			span.SetAttributes(claimcheck.TicketAttributes(r.Ticket)...)
		}
		end(r.Err)
	}()
	fail := func(err error, permanent bool) Outcome { return opts.fail(o, err, permanent) }
	dec, err := DecodeBody(d.Message)
	if err != nil {
		if opts.RawTenant == "" || !Unrecognised(err) {
			return fail(err, true)
		}
		dec = &Decoded{Kind: KindRaw, Message: RawMessage(d.Message)}
	}
	attrs := dec.Message.Attributes
	o.Kind = attrs[AttrKind]
	if o.Kind == "" {
		o.Kind = opts.DefaultKind
	}
	if o.Kind == "" {
		hint := ""
		if dec.Kind == KindPointer {
			hint = " (an AWS payload pointer: its producer sets no kind; give the consumer a default kind and a pointer bucket)"
		}
		return fail(fmt.Errorf("broker: message %s has no %s attribute%s: %w", d.ID, AttrKind, hint, claimcheck.ErrTicketInvalid), true)
	}
	t := dec.Ticket
	switch dec.Kind {
	case KindPointer:
		if t, err = opts.pointerTicket(ctx, store, dec.Pointer); err != nil {
			return fail(err, claimcheck.IsPermanent(err))
		}
		o.Adopted = opts.adoptedKey(store, dec.Pointer)
	case KindRaw:
		// Verified by nothing but its own bytes (RawTenant).
		if t, err = store.CheckIn(ctx, opts.RawTenant, bytes.NewReader(dec.Message.Body), nil); err != nil {
			return fail(fmt.Errorf("broker: raw payload of message %s: %w", d.ID, err), claimcheck.IsPermanent(err))
		}
	}
	o.Ticket, o.Tenant = t, t.Tenant
	h, ok := opts.Handlers[o.Kind]
	if !ok {
		return fail(fmt.Errorf("broker: %w %q in this consumer", ErrUnknownKind, o.Kind), false)
	}
	job := &claimcheck.Job{ID: o.ID, Kind: o.Kind, Tenant: t.Tenant, Attempt: o.Attempt}
	if o.Job > 0 {
		job.ID = strconv.FormatInt(o.Job, 10) // the outbox entry, as jobs lists it
	}
	checkIn := store.CheckIn
	if rc, ok := opts.Inbox.(ResultCheckIn); ok {
		checkIn = rc.CheckInResult
	}
	rt, err := store.WorkWith(ctx, job, t, h, checkIn)
	o.Timings = job.Timings
	if err != nil {
		return fail(err, claimcheck.IsPermanent(err))
	}
	o.Result = rt
	o.Action = Acked
	return o
}

// receiveRetry is the pause of the receive loop after a failed receive or
// lease extension: claimcheck's one retry policy, from 1 s doubling to 30 s.
var receiveRetry = claimcheck.RetryPolicy{Base: time.Second, MaxDelay: 30 * time.Second}
