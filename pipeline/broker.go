package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
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

// workBroker is Work over a broker source: Concurrency consumers, and the
// relay of the source's destination, until ctx is done or the stop rule
// holds; then it drains like the job database's worker.
func (p *Pipeline) workBroker(ctx context.Context, opts WorkOptions) error {
	src := opts.Broker
	if src.Transport == nil {
		return fmt.Errorf("pipeline: work: broker source without a transport: %w", claimcheck.ErrConfig)
	}
	if src.Idle <= 0 {
		src.Idle = defaultIdle
	}
	drain := drainOptions{timeout: opts.DrainTimeout, abort: opts.Abort, notify: opts.Notify}
	if drain.timeout == 0 {
		drain.timeout = DefaultDrainTimeout
	}
	var last atomic.Int64 // unix nanos of the last settled delivery
	last.Store(time.Now().UnixNano())
	// due: unix nanos by which every delivery this worker sent back with a
	// delay (retried with backoff, or a payload within the store's
	// consistency grace) is due again; UntilEmpty waits for it.
	var due atomic.Int64
	// Handlers run on a context a stop does not cancel: the drain decides.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	var wg sync.WaitGroup
	errc := make(chan error, opts.Concurrency+1)
	relayCtx, cancelRelay := context.WithCancel(runCtx)
	defer cancelRelay()
	if src.Relay != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- p.Relay(relayCtx, RelayOptions{Destination: src.Relay, Broker: src.RelayBroker, Transport: src.Transport, Format: src.RelayFormat, OnSent: src.OnRelayed})
		}()
	}
	var inflight sync.Map // delivery ID → description, for the drain's messages
	co := src.Consume
	co.Handlers, co.Policy, co.Inbox = opts.Handlers, p.cfg.Retry, p.Inbox()
	if src.DeleteOnAck {
		co.DeleteOnAck = p
	}
	co.OnError = src.OnError
	co.Handlers = make(map[string]claimcheck.Handler, len(opts.Handlers))
	for kind, h := range opts.Handlers {
		var tracked claimcheck.Handler = claimcheck.HandlerFunc(func(hctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			key := job.ID + "/" + strconv.Itoa(job.Attempt)
			inflight.Store(key, fmt.Sprintf("job %s (%s, attempt %d)", job.ID, job.Kind, job.Attempt))
			defer inflight.Delete(key)
			return h.Handle(hctx, job)
		})
		if claimcheck.IsLazy(h) {
			tracked = claimcheck.Lazy(tracked)
		}
		co.Handlers[kind] = tracked
	}
	co.OnDone = func(_ *broker.Delivery, bo broker.Outcome) {
		now := time.Now()
		last.Store(now.UnixNano())
		if bo.Action == broker.Retried && bo.Delay > 0 {
			at := now.Add(bo.Delay).UnixNano()
			for old := due.Load(); at > old && !due.CompareAndSwap(old, at); old = due.Load() {
			}
		}
		if src.OnSettled != nil {
			src.OnSettled(bo)
		}
		if bo.Duplicate {
			p.tel.Dups.Add(context.Background(), 1)
			return
		}
		o := brokerOutcome(bo)
		p.observe(context.Background(), o)
		if opts.OnDone != nil {
			opts.OnDone(o)
		}
	}
	stopReceiving := make(chan struct{})
	co.Drain = stopReceiving
	var consumers sync.WaitGroup
	for range opts.Concurrency {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			errc <- broker.Consume(runCtx, src.Transport, p.store, co)
		}()
	}
	until := src.Until
	if until == nil && opts.UntilEmpty {
		until = func(ctx context.Context) (bool, error) {
			if time.Since(time.Unix(0, last.Load())) < src.Idle || time.Now().Before(time.Unix(0, due.Load()).Add(src.Idle)) {
				// Within Idle of the last settlement, or of the time a
				// delivery sent back with a delay is due again.
				return false, nil
			}
			if src.Relay == "" {
				return true, nil
			}
			return p.OutboxEmptyFor(ctx, src.Relay, src.RelayBroker)
		}
	}
	var err error
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-errc:
			if err != nil {
				break loop
			}
		case <-tick.C:
			if until == nil {
				continue
			}
			done, uerr := until(runCtx)
			if uerr != nil {
				err = uerr
				break loop
			}
			if done {
				break loop
			}
		}
	}
	// Stop receiving; let running handlers finish within the drain
	// timeout, then cancel them (their deliveries go back to the queue,
	// broker.Released); then stop the relay.
	close(stopReceiving)
	if ctx.Err() != nil {
		drain.sayStopping("messages", describe(&inflight))
	}
	finished := make(chan struct{})
	go func() { consumers.Wait(); close(finished) }()
	deadline := time.NewTimer(max(drain.timeout, 0))
	defer deadline.Stop()
	select {
	case <-finished:
	case <-deadline.C:
		if running := describe(&inflight); running != "" {
			drain.say("drain timeout of %s: %s go back to the queue, attempt not spent", drain.timeout, running)
		}
		cancelRun()
		<-finished
	case <-drain.abort:
		if running := describe(&inflight); running != "" {
			drain.say("stopping at once: %s go back to the queue, attempt not spent", running)
		}
		cancelRun()
		<-finished
	}
	cancelRelay()
	wg.Wait()
	close(errc)
	for e := range errc {
		if err == nil && e != nil && !errors.Is(e, context.Canceled) {
			err = e
		}
	}
	return err
}

// describe lists the in-flight deliveries of a broker worker.
func describe(inflight *sync.Map) string {
	var parts []string
	inflight.Range(func(_, v any) bool {
		parts = append(parts, v.(string))
		return true
	})
	return strings.Join(parts, ", ")
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
