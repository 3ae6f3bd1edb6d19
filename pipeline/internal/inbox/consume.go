package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// Consumer is Work over a broker source (Pipeline.Work with
// WorkOptions.Broker), as package pipeline sets it up.
type Consumer struct {
	// Transport is the queue to consume.
	Transport broker.Transport
	// Store is the pipeline's default store.
	Store *claimcheck.Store
	// Consume is the consumer's options, Policy, Inbox, DeleteOnAck and
	// OnError set; Consume sets its Handlers (from Handlers), Drain and
	// OnDone.
	Consume broker.ConsumeOptions
	// Handlers are Work's handlers by kind.
	Handlers map[string]claimcheck.Handler
	// Concurrency is how many consumers run.
	Concurrency int
	// Relay, if set, relays the source's destination until its context is
	// done; RelayEmpty reports whether that destination's outbox is empty.
	Relay      func(ctx context.Context) error
	RelayEmpty func(ctx context.Context) (bool, error)
	// Idle, Until and UntilEmpty: BrokerSource.Idle (set), BrokerSource.Until
	// and WorkOptions.UntilEmpty.
	Idle       time.Duration
	Until      func(ctx context.Context) (bool, error)
	UntilEmpty bool
	// OnSettled receives each delivery's broker outcome, duplicates
	// included, before OnDuplicate or OnDone.
	OnSettled func(broker.Outcome)
	// OnDuplicate counts a delivery skipped as a duplicate; OnDone
	// receives every other outcome.
	OnDuplicate func()
	OnDone      func(broker.Outcome)
	// DrainTimeout and Abort: how the drain ends (WorkOptions).
	DrainTimeout time.Duration
	Abort        <-chan struct{}
	// Say and SayStopping tell the drain's progress (WorkOptions.Notify).
	Say         func(format string, args ...any)
	SayStopping func(what, running string)
}

// Consume is Work over a broker source: Concurrency consumers, and the
// relay of the source's destination, until ctx is done or the stop rule
// holds; then it drains like the job database's worker.
func Consume(ctx context.Context, c Consumer) error {
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
	errc := make(chan error, c.Concurrency+1)
	relayCtx, cancelRelay := context.WithCancel(runCtx)
	defer cancelRelay()
	if c.Relay != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- c.Relay(relayCtx)
		}()
	}
	var inflight sync.Map // delivery ID → description, for the drain's messages
	co := c.Consume
	co.Handlers = make(map[string]claimcheck.Handler, len(c.Handlers))
	for kind, h := range c.Handlers {
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
		if c.OnSettled != nil {
			c.OnSettled(bo)
		}
		if bo.Duplicate {
			c.OnDuplicate()
			return
		}
		c.OnDone(bo)
	}
	stopReceiving := make(chan struct{})
	co.Drain = stopReceiving
	var consumers sync.WaitGroup
	for range c.Concurrency {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			errc <- broker.Consume(runCtx, c.Transport, c.Store, co)
		}()
	}
	until := c.Until
	if until == nil && c.UntilEmpty {
		until = func(ctx context.Context) (bool, error) {
			if time.Since(time.Unix(0, last.Load())) < c.Idle || time.Now().Before(time.Unix(0, due.Load()).Add(c.Idle)) {
				// Within Idle of the last settlement, or of the time a
				// delivery sent back with a delay is due again.
				return false, nil
			}
			if c.RelayEmpty == nil {
				return true, nil
			}
			return c.RelayEmpty(ctx)
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
		c.SayStopping("messages", describe(&inflight))
	}
	finished := make(chan struct{})
	go func() { consumers.Wait(); close(finished) }()
	deadline := time.NewTimer(max(c.DrainTimeout, 0))
	defer deadline.Stop()
	select {
	case <-finished:
	case <-deadline.C:
		if running := describe(&inflight); running != "" {
			c.Say("drain timeout of %s: %s go back to the queue, attempt not spent", c.DrainTimeout, running)
		}
		cancelRun()
		<-finished
	case <-c.Abort:
		if running := describe(&inflight); running != "" {
			c.Say("stopping at once: %s go back to the queue, attempt not spent", running)
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
