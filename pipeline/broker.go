package pipeline

// Work over a broker source (BrokerSource), the consumers' inbox on the job
// database (Inbox), deletion on acknowledgement (Release) and the outbox's
// emptiness (OutboxEmpty); pipeline/internal/inbox holds their machinery,
// pipeline/internal/outbox the relay (relay.go).

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/pipeline/internal/inbox"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobdb"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
	"github.com/claimcheck/claimcheck/pipeline/internal/outbox"
	"github.com/claimcheck/claimcheck/pipeline/internal/worker"
)

// BrokerSource makes Work take its jobs from a broker transport instead of
// the job database's queues: the same handlers, claim and verification,
// retry policy (Config's claimcheck.RetryPolicy), drain and outcomes, with
// each outcome recorded in the job database's inbox (which also makes a
// message delivered twice run once).
type BrokerSource struct {
	// Transport is the queue to consume. Required.
	Transport broker.Transport
	// Relay, if set, is the destination whose outbox Work also relays to
	// Transport while it consumes (see Relay).
	Relay string
	// RelayBroker is the relay's RelayOptions.Broker: Transport's binding.
	RelayBroker string
	// RelayFormat is the relay's RelayOptions.Format: the destination's
	// message format (broker.FormatOf of Transport's URL).
	RelayFormat broker.Format
	// OnRelayed, if set, is the relay's OnSent.
	OnRelayed func(jobID int64, err error)
	// Idle is, with WorkOptions.UntilEmpty, how long the broker must have
	// delivered nothing (and the relayed outbox be empty) before Work
	// returns, counted from the last settlement and from the time each
	// delivery this worker retried with a delay (backoff, or a payload
	// within the store's consistency grace) is due again. Default 3 s.
	Idle time.Duration
	// Until, if set, is polled every 200 ms; Work returns (after draining)
	// once it reports true. It replaces UntilEmpty's rule. See
	// Pipeline.UntilFinished.
	Until func(ctx context.Context) (bool, error)
	// Consume holds the consumer's own options (DefaultKind,
	// PointerBucket, AdoptTenant, Batch, Lease); Work sets its Handlers,
	// Policy (Config.Retry), Inbox, Drain, OnDone and OnError.
	Consume broker.ConsumeOptions
	// DeleteOnAck deletes a payload's object once its message is
	// acknowledged and no other reference is left (Pipeline.Release).
	DeleteOnAck bool
	// OnSettled, if set, receives each delivery's broker outcome.
	OnSettled func(broker.Outcome)
	// OnError, if set, receives the errors the consumer survives (a failed
	// receive, settlement or release; an outage it waits out).
	OnError func(error)
}

// defaultIdle is BrokerSource.Idle's default.
const defaultIdle = 3 * time.Second

// workBroker is Work over a broker source (inbox.Consume): Concurrency
// consumers, and the relay of the source's destination, until ctx is done
// or the stop rule holds; then it drains like the job database's worker.
func (p *Pipeline) workBroker(ctx context.Context, opts WorkOptions) error {
	src := opts.Broker
	if src.Transport == nil {
		return fmt.Errorf("pipeline: work: broker source without a transport: %w", claimcheck.ErrConfig)
	}
	if src.Idle <= 0 {
		src.Idle = defaultIdle
	}
	drain := worker.Drain{Timeout: opts.DrainTimeout, Abort: opts.Abort, Notify: opts.Notify}
	if drain.Timeout == 0 {
		drain.Timeout = DefaultDrainTimeout
	}
	co := src.Consume
	co.Policy, co.Inbox = p.cfg.Retry, p.Inbox()
	if src.DeleteOnAck {
		co.DeleteOnAck = p
	}
	co.OnError = src.OnError
	c := inbox.Consumer{
		Transport: src.Transport, Store: p.store, Consume: co, Handlers: opts.Handlers,
		Concurrency: opts.Concurrency, Idle: src.Idle, Until: src.Until, UntilEmpty: opts.UntilEmpty,
		OnSettled:   src.OnSettled,
		OnDuplicate: func() { p.tel.Dups.Add(context.Background(), 1) },
		OnDone: func(bo broker.Outcome) {
			o := brokerOutcome(bo)
			p.observe(context.Background(), o)
			if opts.OnDone != nil {
				opts.OnDone(o)
			}
		},
		DrainTimeout: drain.Timeout, Abort: drain.Abort, Say: drain.Say, SayStopping: drain.SayStopping,
	}
	if src.Relay != "" {
		c.Relay = func(ctx context.Context) error {
			return p.Relay(ctx, RelayOptions{Destination: src.Relay, Broker: src.RelayBroker, Transport: src.Transport, Format: src.RelayFormat, OnSent: src.OnRelayed})
		}
		c.RelayEmpty = func(ctx context.Context) (bool, error) { return p.OutboxEmptyFor(ctx, src.Relay, src.RelayBroker) }
	}
	return inbox.Consume(ctx, c)
}

// brokerOutcome is a broker delivery's outcome as Work's Outcome.
func brokerOutcome(bo broker.Outcome) Outcome {
	o := Outcome{JobID: bo.Job, Kind: bo.Kind, Tenant: bo.Tenant, Attempt: bo.Attempt, Err: bo.Err, Reason: bo.Reason, MessageID: bo.ID, Timings: bo.Timings}
	if bo.Ticket != nil {
		o.SHA256, o.Size = bo.Ticket.DigestPrefix(), bo.Ticket.Size
	}
	switch bo.Action {
	case broker.Acked:
		o.State = JobCompleted
	case broker.Retried:
		o.State = JobRetrying
	case broker.DeadLettered:
		o.State = JobDead
	case broker.Released:
		o.State = JobReleased
	}
	return o
}

// UntilFinished returns a BrokerSource.Until that reports true once every
// job of ids is completed or dead (for an outbox entry, its consumer's
// outcome from the inbox, as Get shows it). Each poll looks only at the
// jobs still open, oldest first, and stops at the first one open. The
// function is for one Work call: it remembers what it has seen finish.
func (p *Pipeline) UntilFinished(ids ...int64) func(context.Context) (bool, error) {
	open := slices.Clone(ids)
	return func(ctx context.Context) (bool, error) {
		for len(open) > 0 {
			j, err := p.Get(ctx, open[0])
			if err != nil {
				return false, err
			}
			if j.State != string(JobCompleted) && !j.Dead {
				return false, nil
			}
			open = open[1:]
		}
		return true, nil
	}
}

// Inbox is the idempotent receiver of broker consumers (broker.Inbox) on
// this pipeline's database: one row per message (idempotency key) and
// consuming queue in claimcheck_consumed with the latest outcome, and a
// claims-registry row for each result.
func (p *Pipeline) Inbox() broker.Inbox { return inbox.New(p.inboxHost()) }

// inboxHost is what pipeline/internal/inbox needs of p.
func (p *Pipeline) inboxHost() *inbox.Host {
	return &inbox.Host{DB: p.db, Store: p.store, Logger: p.logger, CheckInResult: p.ci.CheckInResult, Anchor: p.ci.Anchor, DeleteUnheld: p.ci.DeleteUnheld}
}

// PruneInbox deletes the inbox's records (claimcheck_consumed) of
// messages last settled before cutoff, with their release counts
// (claimcheck_released), and returns how many messages it forgot. Without
// it both tables grow by a row per message and consuming queue forever.
//
// Choose cutoff no later than now less the results' retention
// (claimcheck.Retention.ResultTotal, docs/invariants.md, invariant 5): by
// then the payload and any result have expired, so a record is no longer
// needed to skip a redelivery (which would fail payload-missing anyway),
// to list a broker dead letter (which could no longer be replayed) or to
// find a result. Settlement times are the consumers' clocks; a skew of
// minutes is nothing against a retention of days.
//
// Errors: the database's, wrapped.
func (p *Pipeline) PruneInbox(ctx context.Context, cutoff time.Time) (int64, error) {
	return inbox.Prune(ctx, p.db, cutoff)
}

// Release implements broker.Releaser (opt-in deletion on acknowledgement):
// it deletes outbox entry job's registry row for t's object held for
// queue (the entry's one payload row, or, when its destination fans out,
// the row of that queue) and, if no registry row (no other queue's copy
// unprocessed, no other subscriber's entry, pending or
// acknowledged-but-unreleased, and no job of the pipeline) and no check-in
// intent refers to the object any more, the object itself. A row already
// released leaves only the deletion to retry. It reports whether this call
// deleted the object (false if it was gone already).
//
// The row's removal, the look-up and the store's delete happen in one
// transaction under the object's key lock, which check-ins that reuse the
// object take too (deleteUnheld, internal/claimregistry): a check-in of the same
// bytes either comes first, and the object is kept for it, or after the
// delete, and writes the object again. A failed delete rolls the row's
// removal back.
func (p *Pipeline) Release(ctx context.Context, job int64, queue string, t *claimcheck.Ticket) (bool, error) {
	return inbox.New(p.inboxHost()).Release(ctx, job, queue, t)
}

// inTx runs fn in a transaction, committed if fn returns nil.
func (p *Pipeline) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return jobdb.InTx(ctx, p.db, fn)
}

// OutboxEmpty reports whether destination's outbox holds no entry waiting
// to be sent (every entry sent or dead).
//
// OutboxEmptyFor is OutboxEmpty counting only the entries a relay for
// broker (RelayOptions.Broker) publishes.
func (p *Pipeline) OutboxEmpty(ctx context.Context, destination string) (bool, error) {
	return p.OutboxEmptyFor(ctx, destination, "")
}

// OutboxEmptyFor: see OutboxEmpty.
func (p *Pipeline) OutboxEmptyFor(ctx context.Context, destination, broker string) (bool, error) {
	res, err := p.client.JobList(ctx, outbox.BrokerFilter(river.NewJobListParams().Queues(outboxQueue(destination)).States(jobs.PendingStates...).First(1), broker))
	if err != nil {
		return false, fmt.Errorf("pipeline: poll outbox %s: %w", destination, err)
	}
	return len(res.Jobs) == 0, nil
}
