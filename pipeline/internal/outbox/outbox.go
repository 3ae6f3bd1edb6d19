// Package outbox is package pipeline's relay: it publishes the tickets of
// a destination's outbox entries (River jobs in the queue
// claimcheck-outbox-DESTINATION) to a broker, in batches, registering the
// payload per fan-out queue, and retries them through any outage. Package
// pipeline runs it (Pipeline.Relay) on its River client and forwards its
// public names; the inbox and deletion on acknowledgement are
// pipeline/internal/inbox's.
package outbox

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/messagingconv"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/pipeline/internal/batch"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobtel"
)

// The transactional outbox. A job enqueued with EnqueueOptions.Destinations
// is not worked by this pipeline's workers: it waits in the River queue
// OutboxQueuePrefix+destination until a relay (Relay) publishes its ticket
// to that destination's broker and the broker confirms it. The entry, its
// claims-registry row and the caller's own rows commit in one transaction
// (EnqueueTx), after the payload's check-in has returned, so a ticket is
// never published before its payload is stored, and an entry is never lost
// to a broker outage: it stays in the queue, retried, until it goes out.

// MaxDestinationLen is the longest destination name, in bytes: River's
// longest queue name (64 characters, river.Client's queue validation)
// less the 18 bytes of OutboxQueuePrefix.
const MaxDestinationLen = 46

// ValidateDestination checks an outbox destination name: 2 to
// MaxDestinationLen characters a-z, 0-9, single '-' or '_' between them
// (the rule of kinds).
func ValidateDestination(dest string) error {
	if len(dest) > MaxDestinationLen || jobs.ValidateKind(dest) != nil {
		return fmt.Errorf("destination %q is invalid: use 2 to %d characters a-z, 0-9, single '-' or '_' between them", jobs.TruncateName(dest), MaxDestinationLen)
	}
	return nil
}

// RelayOptions configure Relay.
type RelayOptions struct {
	// Destination is the outbox destination this relay serves. Required.
	Destination string
	// Broker, if set, is the binding of Transport's broker (broker.Binding
	// of its URL): entries bound to another broker (EnqueueOptions.Broker)
	// are left in the outbox, reported to OnSent with ErrOtherBroker, and
	// UntilEmpty does not wait for them. Unbound entries go to any relay.
	Broker string
	// Transport is the broker the destination's entries are published to.
	// Required; Relay does not close it. Check its size limit against the
	// store at start-up with broker.CheckConfig.
	Transport broker.Transport
	// Batch bounds the entries in flight at once: fetched from the
	// database, being published or awaiting the broker's confirmation.
	// Memory depends on it, never on the backlog. Default 100.
	Batch int
	// UntilEmpty returns once the destination's outbox is empty (every
	// entry sent or dead). Otherwise Relay runs until ctx is done.
	UntilEmpty bool
	// MaxRetryDelay caps the pause before an entry whose publish failed
	// (the broker unreachable) is tried again; the pause doubles from one
	// second per failed try of that entry. Default 15s: entries go out
	// within that long of the broker's return.
	MaxRetryDelay time.Duration
	// OnPublish, if set, is called after each call to the transport's
	// Publish with the number of messages it carried (at most 10: the
	// relay publishes the entries in flight in batches) and its error.
	OnPublish func(messages int, err error)
	// Format is the destination's message format (broker.FormatOf of its
	// broker URL). With Format.AWS each entry is published as an AWS
	// payload pointer to a copy of its payload that only that message
	// names (broker.NewPointer; a store that seals its payloads cannot, and
	// its entries die not-relayable), with Format.Marker as its size
	// attribute, instead of as a ticket. A publish that fails leaves its
	// copy to the sweeper (sweep.Options.PointerRetention).
	Format broker.Format
	// OnSent, if set, is called after each publish attempt with the
	// entry's job id and the attempt's error: nil once the broker
	// confirmed it, wrapping ErrNotRelayable if the entry is now dead,
	// wrapping ErrOtherBroker if it was left for another broker's relay,
	// otherwise the publish error (the entry is kept and retried).
	OnSent func(jobID int64, err error)
}

// Relay is Pipeline.Relay (package pipeline documents it) on h.
func Relay(ctx context.Context, h *Host, opts RelayOptions) error {
	if opts.Transport == nil {
		return fmt.Errorf("pipeline: relay: no transport: %w", claimcheck.ErrConfig)
	}
	if err := opts.Format.CheckStore(h.Store); err != nil {
		return fmt.Errorf("pipeline: relay: %w", err)
	}
	if err := ValidateDestination(opts.Destination); err != nil {
		return fmt.Errorf("pipeline: relay: %v: %w", err, claimcheck.ErrConfig)
	}
	if opts.Batch <= 0 {
		opts.Batch = 100
	}
	if opts.MaxRetryDelay <= 0 {
		opts.MaxRetryDelay = 15 * time.Second
	}
	w := &relayWorker{h: h, opts: opts, reg: startFanOutRegistrar(h, opts.Transport, opts.Batch)}
	w.pub = batch.New(RelayPublishBatch, max(1, opts.Batch/RelayPublishBatch), relayLinger, w.publishBatch)
	// After Run, River has stopped: no Work call registers or publishes
	// any more.
	defer w.reg.Stop()
	defer w.pub.Stop()
	err := h.Run(ctx, w, opts.Destination, opts.Batch, opts.UntilEmpty,
		func(lp *river.JobListParams) *river.JobListParams { return BrokerFilter(lp, opts.Broker) })
	if err == nil && opts.UntilEmpty {
		w.reportLeft(ctx)
	}
	return err
}

// reportLeft reports to OnSent, with ErrOtherBroker, the first Batch
// pending entries bound to another broker that the relay has not
// reported: UntilEmpty does not wait for them, so the relay may finish
// before its River client has fetched one, and they must still be named.
// system is the messaging.system of the relay's broker (broker.System).
func (w *relayWorker) system() string { return broker.System(w.opts.Transport) }

func (w *relayWorker) reportLeft(ctx context.Context) {
	if w.opts.Broker == "" || w.opts.OnSent == nil {
		return
	}
	params := river.NewJobListParams().Queues(jobs.OutboxQueue(w.opts.Destination)).States(jobs.PendingStates...).First(w.opts.Batch).
		Where("metadata ->> 'broker' IS NOT NULL AND metadata ->> 'broker' <> '' AND metadata ->> 'broker' <> @broker", river.NamedArgs{"broker": w.opts.Broker})
	res, err := w.h.Client.JobList(ctx, params)
	if err != nil {
		return // best effort: the entries stay in the outbox either way
	}
	for _, job := range res.Jobs {
		if _, done := w.reported.LoadOrStore(job.ID, true); !done {
			w.opts.OnSent(job.ID, w.otherBroker(job.ID, jobs.EntryBroker(job.Metadata)))
		}
	}
}

// otherBroker is the error of an entry bound to broker bound, not the
// relay's.
func (w *relayWorker) otherBroker(id int64, bound string) error {
	return fmt.Errorf("pipeline: outbox entry %d of destination %s is bound to broker %s, this relay publishes to %s: left in the outbox for a relay of that broker: %w",
		id, w.opts.Destination, bound, w.opts.Broker, ErrOtherBroker)
}

// ErrOtherBroker marks, in RelayOptions.OnSent, an entry bound to another
// broker than the relay's (EnqueueOptions.Broker, RelayOptions.Broker):
// nothing was published, and the entry stays in the outbox, no attempt
// spent, for a relay of its own broker.
var ErrOtherBroker = errors.New("outbox entry bound to another broker")

// BrokerFilter restricts params to the outbox entries a relay for broker
// publishes: those bound to it and those bound to none (all when broker
// is "").
func BrokerFilter(params *river.JobListParams, broker string) *river.JobListParams {
	if broker == "" {
		return params
	}
	return params.Where("(metadata ->> 'broker' IS NULL OR metadata ->> 'broker' = '' OR metadata ->> 'broker' = @broker)", river.NamedArgs{"broker": broker})
}

type relayWorker struct {
	river.WorkerDefaults[jobs.Args]
	h    *Host
	opts RelayOptions
	// failures counts publishes failed in a row, across entries (an outage
	// fails them all); a confirmed publish resets it.
	failures atomic.Int64
	// reported holds the ids of the entries bound to another broker that
	// OnSent was told of.
	reported sync.Map
	// reg writes the entries' fan-out registrations (nil: no fan-out).
	reg *fanOutRegistrar
	// pub publishes the entries in flight in batches (publishBatch).
	pub *batch.Batcher[broker.Message]
}

// RelayPublishBatch is the most entries one Publish call carries: SQS's
// SendMessageBatch takes at most 10 (the SQS API reference,
// SendMessageBatch), and for RabbitMQ and JetStream ten confirms in
// flight per call keep a round trip busy. A relay with Batch entries in
// flight runs Batch/RelayPublishBatch calls at once.
const RelayPublishBatch = 10

// relayLinger is how long a batch not yet full waits for more entries.
// River hands a relay the entries of one fetch within a few milliseconds of
// each other, but it fetches again only as earlier entries complete, a
// broker round trip later, and then only as many as slots were freed: a
// linger shorter than that round trip sends each fetch's remainder as a
// batch of its own. 20 ms spans it on loopback brokers: 10,000 entries
// (`claimcheck-bench bench relay --until-empty`, 5 rounds alternated) took
// 0.103-0.104 publish calls per entry on SQS (fauxqs) and RabbitMQ at
// 20 ms, 0.111-0.113 at 5 ms, at the same entries per second; the floor is
// 0.1 (RelayPublishBatch). A lone entry waits at most this long before
// its publish.
const relayLinger = 20 * time.Millisecond

// publishBatch publishes a batch of entries' messages in one Publish call
// and answers each entry with its own outcome: the call's error, or the
// message's in a *broker.PublishError. A call refused as a whole for good
// (a message too large, an attribute the broker refuses) is split, each
// message published alone, so that only the entry at fault is
// dead-lettered.
func (w *relayWorker) publishBatch(batch []*batch.Req[broker.Message]) {
	live := batch[:0]
	for _, req := range batch {
		if err := req.Ctx.Err(); err != nil {
			req.Done <- fmt.Errorf("pipeline: relay: publish: %w", err)
			continue
		}
		live = append(live, req)
	}
	if len(live) == 0 {
		return
	}
	msgs := make([]broker.Message, len(live))
	for i, req := range live {
		msgs[i] = req.V
	}
	// The call serves entries whose own contexts may end at different
	// times: it has the relay's publish timeout instead.
	ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
	defer cancel()
	err := w.publish(ctx, msgs)
	var perr *broker.PublishError
	switch {
	case err == nil:
		for _, req := range live {
			req.Done <- nil
		}
	case errors.As(err, &perr):
		for i, req := range live {
			req.Done <- perr.Failed[i]
		}
	case len(live) > 1 && claimcheck.Refused(err):
		for _, req := range live {
			req.Done <- w.publish(ctx, []broker.Message{req.V})
		}
	default:
		for _, req := range live {
			req.Done <- err
		}
	}
}

// publish is one Publish call, its duration recorded.
func (w *relayWorker) publish(ctx context.Context, msgs []broker.Message) error {
	start := time.Now()
	err := w.opts.Transport.Publish(ctx, msgs)
	w.h.Tel.RelayPublish.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(append(claimcheck.ErrorAttrs(err), semconv.MessagingDestinationName(w.opts.Destination))...))
	if w.opts.OnPublish != nil {
		w.opts.OnPublish(len(msgs), err)
	}
	return err
}

// relayTimeout bounds one entry's publish and its confirmation.
const relayTimeout = time.Minute

// Timeout is River's job timeout: none (-1), since Work bounds each entry
// itself (relayTimeout). With a timeout River would also start, for every
// running job, a goroutine watching it for being stuck: a second goroutine
// (stack, timer) for each of the Batch entries in flight.
func (w *relayWorker) Timeout(*river.Job[jobs.Args]) time.Duration { return -1 }

func (w *relayWorker) Work(ctx context.Context, job *river.Job[jobs.Args]) (err error) {
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	if w.opts.OnSent != nil {
		defer func() {
			var snooze *relaySnooze
			if errors.As(err, &snooze) {
				w.opts.OnSent(job.ID, snooze.err)
				return
			}
			w.opts.OnSent(job.ID, err)
		}()
	}
	if bound := jobs.EntryBroker(job.Metadata); w.opts.Broker != "" && bound != "" && bound != w.opts.Broker {
		// Another broker's entry: leave it, unpublished and no attempt
		// spent, for a relay of that broker.
		w.reported.Store(job.ID, true)
		return &relaySnooze{snooze: river.JobSnooze(w.h.LeaveDelay(job.Metadata)), err: w.otherBroker(job.ID, bound)}
	}
	// The publish continues the producer's trace (the entry's metadata)
	// and hands it on in the message's attributes.
	sctx, link := jobtel.FromMetadata(ctx, job.Metadata)
	ctx, _, end := w.h.Store.StartMessaging(sctx, claimcheck.Messaging{System: w.system(),
		Type: messagingconv.OperationTypeSend, Name: "publish", Destination: w.opts.Destination, MessageID: strconv.FormatInt(job.ID, 10)},
		jobtel.JobAttrs(job.ID, job.Args.JobKind, job.Args.Tenant, job.Attempt), link)
	defer func() { end(err) }()
	enc := jobs.CompactJSON(job.Args.Ticket)
	t, err := claimcheck.ParseTicket(enc)
	if err != nil {
		return w.h.DeadLetter(err)
	}
	attrs := map[string]string{}
	jobtel.TraceContext.Inject(ctx, propagation.MapCarrier(attrs))
	key := MessageID(job.ID, enc)
	attrs[broker.AttrIdempotencyKey] = key
	attrs[broker.AttrID] = PublishID(key, job.Attempt)
	attrs[broker.AttrJob] = strconv.FormatInt(job.ID, 10)
	attrs[broker.AttrMaxAttempts] = strconv.Itoa(job.MaxAttempts)
	if job.Priority > jobs.DefaultPriority {
		attrs[broker.AttrPriority] = strconv.Itoa(job.Priority)
	}
	var m broker.Message
	if w.opts.Format.AWS {
		m, err = w.pointerMessage(ctx, job.Args.JobKind, t, attrs)
		if err != nil {
			if claimcheck.Refused(err) || claimcheck.IsPermanent(err) {
				return w.h.DeadLetterAs(ReasonNotRelayable, fmt.Errorf("pipeline: relay %s to %s as an AWS payload pointer: %w: %w", t, w.opts.Destination, ErrNotRelayable, err))
			}
			delay := claimcheck.RetryPolicy{Base: time.Second, MaxDelay: w.opts.MaxRetryDelay}.Backoff(int(w.failures.Add(1)))
			return &relaySnooze{snooze: river.JobSnooze(delay), err: err}
		}
	} else {
		if m, err = broker.NewMessage(job.Args.JobKind, t); err != nil {
			return w.h.DeadLetter(err)
		}
		for k, v := range attrs {
			m.Attributes[k] = v
		}
	}
	err = w.reg.register(ctx, job.ID, t)
	if err == nil {
		err = w.pub.Do(ctx, "publish", m)
	}
	if err != nil {
		if claimcheck.Refused(err) {
			return w.h.DeadLetterAs(ReasonNotRelayable, fmt.Errorf("pipeline: relay %s to %s: %w: %w", t, w.opts.Destination, ErrNotRelayable, err))
		}
		// Snoozing keeps the entry without spending an attempt: an outage
		// of any length loses nothing.
		delay := claimcheck.RetryPolicy{Base: time.Second, MaxDelay: w.opts.MaxRetryDelay}.Backoff(int(w.failures.Add(1)))
		return &relaySnooze{snooze: river.JobSnooze(delay), err: err}
	}
	w.failures.Store(0)
	return nil
}

// pointerMessage is the AWS payload pointer message of ticket t for kind,
// with the relay's attributes attrs: the pointer names a copy of t's
// payload made for this message alone (broker.NewPointer).
func (w *relayWorker) pointerMessage(ctx context.Context, kind string, t *claimcheck.Ticket, attrs map[string]string) (broker.Message, error) {
	p, err := broker.NewPointer(ctx, w.h.Store, w.opts.Format.PointerBucket, t)
	if err != nil {
		return broker.Message{}, err
	}
	p.Marker, p.Body = w.opts.Format.Marker, w.opts.Format.Body
	attrs[broker.AttrKind] = kind
	return p.Message(attrs)
}

// ErrNotRelayable marks, in RelayOptions.OnSent, an entry the transport
// refuses for good (too large for it, or a configuration error): the entry
// is dead with reason ReasonNotRelayable, and Replay sends it again once
// fixed.
var ErrNotRelayable = errors.New("the transport refuses this entry for good")

// ReasonNotRelayable is the reason of an outbox entry dead because its
// transport refuses it for good (ErrNotRelayable).
const ReasonNotRelayable = "not-relayable"

// Registry roles of an outbox entry's payload reference when its
// destination's broker copies each message to several queues (broker.FanOut).
const (
	// RolePayloadAt + queue: the reference held for one consuming queue,
	// released by that queue's consumer (Release).
	RolePayloadAt = "payload@"
	// RolePayloadHeld: the destination fans out to queues it cannot name,
	// so no consumer can tell when the last copy is processed; this
	// reference is never released on acknowledgement, and retention and
	// the sweeper remove the object.
	RolePayloadHeld = "payload-held"
)

// fanOutQueues are the queues a destination's broker copies each message
// to (broker.FanOut), or unknown (broker.ErrFanOutUnknown).
type fanOutQueues struct {
	queues  []string
	unknown bool
}

// queuesOf asks fo for its fan-out queues.
func queuesOf(fo broker.FanOut) (fanOutQueues, error) {
	queues, err := fo.FanOutQueues()
	switch {
	case errors.Is(err, broker.ErrFanOutUnknown):
		return fanOutQueues{unknown: true}, nil
	case err != nil:
		return fanOutQueues{}, fmt.Errorf("pipeline: relay: fan-out of the destination: %w", err)
	}
	return fanOutQueues{queues: queues}, nil
}

// registerFanOutTx replaces, in tx, entry job's payload reference by one
// per queue the transport's broker copies the message to, or adds
// RolePayloadHeld when those queues are unknown. Idempotent, so a replay
// registers again the references its queues released.
func registerFanOutTx(ctx context.Context, tx *sql.Tx, job int64, t *claimcheck.Ticket, fq fanOutQueues) error {
	if fq.unknown {
		return jobdb.Register(ctx, tx, job, RolePayloadHeld, t)
	}
	for _, q := range fq.queues {
		if err := jobdb.Register(ctx, tx, job, RolePayloadAt+q, t); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM claimcheck_claim WHERE job_id = $1 AND role = $2 AND object_key = $3`, job, jobdb.RolePayload, t.Key); err != nil {
		return fmt.Errorf("pipeline: relay: registry: %w", err)
	}
	return nil
}

// fanOutRegistrar writes a relay's fan-out registrations (registerFanOutTx)
// from one goroutine (a batcher), every entry waiting at the time in one
// transaction. Each entry in flight still waits for its own registration's
// commit before it is published, but does not run a transaction of its own
// on its goroutine: the job database commits once per round instead of
// once per entry (SQLite has one connection, shared with River's fetches
// and completions), and SQLite's deep calls grow that goroutine's stack
// only, not the stack of each of the Batch entries in flight.
type fanOutRegistrar struct {
	h  *Host
	fo broker.FanOut
	b  *batch.Batcher[fanOutEntry]
}

// fanOutEntry is one entry's registration.
type fanOutEntry struct {
	job int64
	t   *claimcheck.Ticket
}

// startFanOutRegistrar starts the registrar of tr's fan-out, batching up
// to max entries per transaction; nil if tr does not fan out. Stop it
// after the relay's last publish.
func startFanOutRegistrar(h *Host, tr broker.Transport, max int) *fanOutRegistrar {
	fo, ok := tr.(broker.FanOut)
	if !ok {
		return nil
	}
	r := &fanOutRegistrar{h: h, fo: fo}
	r.b = batch.New(max, 1, 0, r.write)
	return r
}

// Stop ends the registrar's goroutine; a register call after it fails.
func (r *fanOutRegistrar) Stop() {
	if r != nil {
		r.b.Stop()
	}
}

// register has the registrar write job's fan-out registration
// (registerFanOutTx) and returns once it is committed (or failed), or ctx
// is done. Inline tickets, and a nil registrar (a transport without
// fan-out), register nothing.
func (r *fanOutRegistrar) register(ctx context.Context, job int64, t *claimcheck.Ticket) error {
	if r == nil || t.IsInline() {
		return nil
	}
	return r.b.Do(ctx, "registry", fanOutEntry{job: job, t: t})
}

// write commits batch's registrations in one transaction. If that fails
// (one entry's row may be at fault), each entry is tried again in a
// transaction of its own, so an entry fails only of its own error.
func (r *fanOutRegistrar) write(batch []*batch.Req[fanOutEntry]) {
	live := batch[:0]
	for _, req := range batch {
		if err := req.Ctx.Err(); err != nil {
			req.Done <- fmt.Errorf("pipeline: relay: registry: %w", err)
			continue
		}
		live = append(live, req)
	}
	if len(live) == 0 {
		return
	}
	queues, err := queuesOf(r.fo)
	if err != nil {
		for _, req := range live {
			req.Done <- err
		}
		return
	}
	if len(live) > 1 {
		// The transaction serves entries whose own contexts may end at
		// different times: it has the relay's publish timeout instead.
		ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
		err = r.h.InTx(ctx, func(tx *sql.Tx) error {
			for _, req := range live {
				if err := registerFanOutTx(ctx, tx, req.V.job, req.V.t, queues); err != nil {
					return err
				}
			}
			return nil
		})
		cancel()
		if err == nil {
			for _, req := range live {
				req.Done <- nil
			}
			return
		}
	}
	for _, req := range live {
		req.Done <- r.h.InTx(req.Ctx, func(tx *sql.Tx) error { return registerFanOutTx(req.Ctx, tx, req.V.job, req.V.t, queues) })
	}
}

// relaySnooze is River's snooze carrying the publish error for OnSent.
type relaySnooze struct {
	snooze error // *rivertype.JobSnoozeError
	err    error
}

func (e *relaySnooze) Error() string   { return "publish failed, retrying: " + e.err.Error() }
func (e *relaySnooze) Unwrap() []error { return []error{e.snooze, e.err} }

// MessageID is the broker.AttrIdempotencyKey of an outbox entry: the same
// for every publish of the entry, replays included, different for every
// entry (it digests the job id with the encoded ticket, whose creation time
// and digest differ even where a SQLite job id is reused after a rollback).
// 32 lowercase hex characters after "cc-".
func MessageID(jobID int64, ticket []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", jobID)
	h.Write(ticket)
	return "cc-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// PublishID is the broker.AttrID of the relay's publish of the entry whose
// MessageID is key, on the entry's River attempt attempt: key itself on
// the first attempt, key + "-" + attempt after it. Every retry of one
// attempt after a failed publish is a snooze, which River does not count,
// so it sends the same id again and the broker's duplicate detection
// (JetStream's duplicate window, SQS FIFO deduplication) stores it once. A
// replay (Replay) is a new attempt and so gets an id of its own: a broker
// that remembers the first publish cannot drop it. Consumers recognise the
// entry across replays by the idempotency key.
func PublishID(key string, attempt int) string {
	if attempt <= 1 {
		return key
	}
	return key + "-" + strconv.Itoa(attempt)
}

// Host is what the relay needs of the pipeline it runs in.
type Host struct {
	Client *river.Client[*sql.Tx] // the insert-only client, for JobList
	Store  *claimcheck.Store      // the default store (AWS pointers' copies)
	Tel    *jobtel.Instruments
	// Run works destination's outbox queue with w, at most maxWorkers
	// entries at once, until ctx is done or, with untilEmpty, until the
	// queue holds no pending entry that filter selects; then it drains.
	Run func(ctx context.Context, w river.Worker[jobs.Args], destination string, maxWorkers int, untilEmpty bool, filter func(*river.JobListParams) *river.JobListParams) error
	// DeadLetter and DeadLetterAs end an entry's attempt as a dead letter
	// with the worker's rule (claimcheck.Reason(err), or reason).
	DeadLetter   func(err error) error
	DeadLetterAs func(reason string, err error) error
	// LeaveDelay is the snooze of an entry left for another relay, from
	// its River metadata.
	LeaveDelay func(metadata []byte) time.Duration
	// InTx runs fn in a transaction of the job database.
	InTx func(ctx context.Context, fn func(*sql.Tx) error) error
}
