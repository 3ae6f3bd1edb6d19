package brokertest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// LeasedTransport is a transport whose broker keeps a delivery from other
// consumers for a lease it can tell (broker.Leaser).
type LeasedTransport interface {
	broker.Transport
	broker.Leaser
}

// extendCounter counts the Extend calls of the transport it wraps.
type extendCounter struct {
	LeasedTransport
	extends atomic.Int64
}

func (e *extendCounter) Extend(ctx context.Context, d *broker.Delivery, by time.Duration) error {
	e.extends.Add(1)
	return e.LeasedTransport.Extend(ctx, d, by)
}

// LeaseFollows checks that Consume keeps a delivery whose handler runs
// longer than the broker's lease: tr's queue must be empty and configured
// with a lease of lease (Lease must report it). One message is worked by
// a handler running handlerTime (longer than lease) while two consumers
// poll the queue, for handlerTime plus a lease and a second, after which a
// lost lease would have redelivered it. It must have been extended at
// least once, run once and acknowledged once on attempt 1; then drained
// is called to check the broker's own counts (an empty queue, nothing
// redelivered) and fails t if they are not.
func LeaseFollows(t *testing.T, tr LeasedTransport, lease, handlerTime time.Duration, drained func(t *testing.T)) {
	t.Helper()
	if got, err := tr.Lease(t.Context()); err != nil || got != lease {
		t.Fatalf("Lease = %v, %v; want the queue's %v", got, err, lease)
	}
	ec := &extendCounter{LeasedTransport: tr}
	store := FileStore(t, nil)
	ctx := t.Context()
	if err := ec.Publish(ctx, []broker.Message{Message(t, store, "slow", "slow")}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var outcomes []broker.Outcome
	var runs atomic.Int64
	cctx, cancel := context.WithTimeout(ctx, handlerTime+lease+time.Second)
	defer cancel()
	const consumers = 2
	errc := make(chan error, consumers)
	for range consumers {
		go func() {
			errc <- broker.Consume(cctx, ec, store, broker.ConsumeOptions{
				Handlers: map[string]claimcheck.Handler{"slow": claimcheck.HandlerFunc(func(ctx context.Context, _ *claimcheck.Job) (*claimcheck.Result, error) {
					runs.Add(1)
					select {
					case <-time.After(handlerTime):
					case <-ctx.Done():
					}
					return nil, nil
				})},
				OnDone: func(_ *broker.Delivery, o broker.Outcome) {
					mu.Lock()
					outcomes = append(outcomes, o)
					mu.Unlock()
				},
				OnError: func(err error) { t.Errorf("consume: %v", err) },
			})
		}()
	}
	for range consumers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("lease %v, handler %v: %d extensions, handler runs %d, outcomes %d", lease, handlerTime, ec.extends.Load(), runs.Load(), len(outcomes))
	if ec.extends.Load() < 1 || runs.Load() != 1 || len(outcomes) != 1 || outcomes[0].Action != broker.Acked || outcomes[0].Attempt != 1 {
		t.Fatalf("extensions %d, handler runs %d, outcomes %+v; want >= 1 extension, one run acked on attempt 1",
			ec.extends.Load(), runs.Load(), outcomes)
	}
	drained(t)
}
