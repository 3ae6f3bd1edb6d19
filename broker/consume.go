package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/claimcheck/claimcheck"
)

// Action is how Consume settled a delivery.
type Action string

const (
	Acked        Action = "acked"
	Retried      Action = "retried"
	DeadLettered Action = "dead-lettered"
)

// Outcome is what Consume did with one delivery, passed to OnDone.
type Outcome struct {
	Kind    string
	Attempt int
	// Result is the handler's result ticket (checked in under the results
	// prefix), nil if none. Consume publishes it nowhere: recording or
	// forwarding it is the caller's business.
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
}

// ConsumeOptions configure Consume.
type ConsumeOptions struct {
	// Handlers maps each kind to its handler. Required, non-empty.
	Handlers map[string]claimcheck.Handler
	// MaxAttempts is the number of attempts before a transient failure is
	// dead-lettered. Default 25 (River's default).
	MaxAttempts int
	// RetryBase is the first retry's delay; attempt n waits
	// RetryBase·2^(n-1), at most MaxRetryDelay. Default 1s.
	RetryBase time.Duration
	// MaxRetryDelay caps the retry delay. Default 1h.
	MaxRetryDelay time.Duration
	// Batch is the most messages received at once. Default 10.
	Batch int
	// OnDone, if set, is called after each delivery is settled.
	OnDone func(d *Delivery, o Outcome)
}

// ErrUnknownKind is the error of a delivery whose kind has no handler in
// this consumer. It is transient: see Consume.
var ErrUnknownKind = errors.New("no handler for kind")

// Consume receives from tr and works each delivery through store.Work until
// ctx is done, then returns nil. Deliveries are worked one at a time, in
// the order received; run several Consume calls for concurrency.
//
// Each delivery is settled exactly as the job pipeline settles a job:
//   - a body that is not a valid ticket, or whose AttrTenant differs from
//     the ticket's tenant, is dead-lettered at once (ticket-invalid);
//   - a message without AttrKind is dead-lettered at once (ticket-invalid):
//     no consumer can route it;
//   - a kind with no handler here is retried like a transient failure
//     (other consumers on a shared queue may handle it, and a deployment
//     may be rolling out), so it is dead-lettered after MaxAttempts with
//     reason "transient";
//   - success acks the delivery; the result ticket is passed to OnDone;
//   - a permanent error (claimcheck.IsPermanent) dead-letters the delivery
//     on this attempt with reason claimcheck.Reason(err);
//   - any other error is retried after RetryBase·2^(attempt-1) until
//     attempt MaxAttempts, then dead-lettered with its reason.
//
// An error settling a delivery (the broker unreachable) stops Consume and
// is returned; the unsettled delivery is redelivered by the broker. So is an
// error from Receive. ErrConfig for no handlers.
func Consume(ctx context.Context, tr Transport, store *claimcheck.Store, opts ConsumeOptions) error {
	if len(opts.Handlers) == 0 {
		return fmt.Errorf("broker: consume: no handlers: %w", claimcheck.ErrConfig)
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 25
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = time.Second
	}
	if opts.MaxRetryDelay <= 0 {
		opts.MaxRetryDelay = time.Hour
	}
	if opts.Batch <= 0 {
		opts.Batch = 10
	}
	for {
		ds, err := tr.Receive(ctx, opts.Batch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("broker: consume: receive: %w", err)
		}
		for _, d := range ds {
			o := work(ctx, store, opts, d)
			// Settle even if ctx was cancelled while the handler ran: the
			// outcome is known and should not be lost.
			sctx := context.WithoutCancel(ctx)
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
				return fmt.Errorf("broker: consume: settle %s (%s): %w", d.ID, o.Action, serr)
			}
			if opts.OnDone != nil {
				opts.OnDone(d, o)
			}
		}
	}
}

// work runs one delivery and decides how to settle it.
func work(ctx context.Context, store *claimcheck.Store, opts ConsumeOptions, d *Delivery) Outcome {
	kind := d.Attributes[AttrKind]
	o := Outcome{Kind: kind, Attempt: d.Attempt}
	fail := func(err error, permanent bool) Outcome {
		o.Err = err
		o.Reason = claimcheck.Reason(err)
		if permanent || d.Attempt >= opts.MaxAttempts {
			o.Action = DeadLettered
			return o
		}
		o.Action = Retried
		o.Delay = backoff(opts.RetryBase, opts.MaxRetryDelay, d.Attempt)
		return o
	}
	t, err := claimcheck.ParseTicket(d.Body)
	if err != nil {
		return fail(err, true)
	}
	if kind == "" {
		return fail(fmt.Errorf("broker: message %s has no %s attribute: %w", d.ID, AttrKind, claimcheck.ErrTicketInvalid), true)
	}
	tenant, ok := d.Attributes[AttrTenant]
	if !ok {
		tenant = t.Tenant
	}
	if tenant != t.Tenant {
		return fail(fmt.Errorf("broker: message tenant %q does not match ticket %s: %w", tenant, t, claimcheck.ErrTicketInvalid), true)
	}
	h, ok := opts.Handlers[kind]
	if !ok {
		return fail(fmt.Errorf("broker: %w %q in this consumer", ErrUnknownKind, kind), false)
	}
	job := &claimcheck.Job{ID: d.ID, Kind: kind, Tenant: tenant, Attempt: d.Attempt}
	rt, err := store.Work(ctx, job, t, h)
	if err != nil {
		return fail(err, claimcheck.IsPermanent(err))
	}
	o.Result = rt
	o.Action = Acked
	return o
}

// backoff is base·2^(attempt-1), capped at max.
func backoff(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt; i++ {
		d *= 2
		if d >= max || d <= 0 {
			return max
		}
	}
	return min(d, max)
}
