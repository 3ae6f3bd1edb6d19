package broker_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
)

// outageInboxStandIn is an Inbox whose database can be taken down (Seen
// and Record fail with claimcheck.ErrUnavailable) and which keeps
// outcomes in memory as pipeline's inbox keeps them in the store
// (broker.OutcomeKeeper). A stand-in: the real inbox and a real
// PostgreSQL killed with -9 are pipeline's TestChaosPostgresKilledBroker.
type outageInboxStandIn struct {
	mu         sync.Mutex
	down       bool
	done       map[string]bool
	kept       map[string]*claimcheck.Ticket
	keptEver   int
	keepOutage bool // KeepOutcome fails too
}

var errDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (m *outageInboxStandIn) setDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
}

func (m *outageInboxStandIn) Seen(_ context.Context, queue, id, _ string) (broker.Seen, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return broker.Seen{}, errors.Join(errDown, claimcheck.ErrUnavailable)
	}
	return broker.Seen{Processed: m.done[queue+"\n"+id]}, nil
}

func (m *outageInboxStandIn) Record(_ context.Context, o broker.Outcome) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errors.Join(errDown, claimcheck.ErrUnavailable)
	}
	if o.Action == broker.Acked {
		m.done[o.Queue+"\n"+o.ID] = true
	}
	return nil
}

func (m *outageInboxStandIn) KeepOutcome(_ context.Context, o broker.Outcome) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keepOutage {
		return errors.Join(errors.New("the store is down too"), claimcheck.ErrUnavailable)
	}
	m.kept[o.Queue+"\n"+o.ID] = o.Result
	m.keptEver++
	return nil
}

func (m *outageInboxStandIn) KeptOutcome(_ context.Context, o broker.Outcome) (*claimcheck.Ticket, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rt, ok := m.kept[o.Queue+"\n"+o.ID]
	return rt, ok, nil
}

func (m *outageInboxStandIn) ForgetOutcome(_ context.Context, o broker.Outcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.kept, o.Queue+"\n"+o.ID)
}

// TestConsumeKeepsFinishedOutcome: the inbox's database goes down as the
// handler returns, for longer than the consumer holds the delivery
// (Policy.Window), so the message is redelivered. With the outcome kept
// (broker.OutcomeKeeper) the redelivery is settled from it, with the
// handler's result, and the handler runs once (docs/invariants.md,
// invariant 12); the kept outcome is then forgotten. Without a place to
// keep it (the store down too) the handler runs again: the window that
// remains.
func TestConsumeKeepsFinishedOutcome(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keepOutage bool
		wantRuns   int32
	}{{"kept", false, 1}, {"store-down-too", true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			store, tr := publishOne(t, ctx)
			inbox := &outageInboxStandIn{done: map[string]bool{}, kept: map[string]*claimcheck.Ticket{}, keepOutage: tc.keepOutage}
			var runs atomic.Int32
			h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
				if runs.Add(1) == 1 {
					// The database goes down as the handler finishes, and
					// comes back after the consumer gave up holding it.
					inbox.setDown(true)
					time.AfterFunc(time.Second, func() { inbox.setDown(false) })
				}
				return &claimcheck.Result{Body: strings.NewReader("the result")}, nil
			})
			var mu sync.Mutex
			var acked []broker.Outcome
			cctx, stop := context.WithCancel(ctx)
			defer stop()
			err := broker.Consume(cctx, tr, store, broker.ConsumeOptions{
				Inbox:    inbox,
				Handlers: map[string]claimcheck.Handler{"once": h},
				Policy:   claimcheck.RetryPolicy{Base: 100 * time.Millisecond, MaxDelay: 200 * time.Millisecond, Window: 300 * time.Millisecond},
				OnDone: func(_ *broker.Delivery, o broker.Outcome) {
					if o.Action == broker.Acked {
						mu.Lock()
						acked = append(acked, o)
						mu.Unlock()
						stop()
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if runs.Load() != tc.wantRuns || len(acked) != 1 {
				t.Fatalf("handler ran %d times, %d acks; want %d, 1", runs.Load(), len(acked), tc.wantRuns)
			}
			o := acked[0]
			if o.Result == nil {
				t.Fatal("acked without the handler's result")
			}
			got, err := claimcheckRead(ctx, store, o.Result)
			if err != nil || got != "the result" {
				t.Fatalf("result %q (%v)", got, err)
			}
			if !tc.keepOutage && (!o.FromOutcome || inbox.keptEver != 1 || len(inbox.kept) != 0) {
				t.Fatalf("settled from the kept outcome %v, kept %d times, %d still kept; want true, 1, 0", o.FromOutcome, inbox.keptEver, len(inbox.kept))
			}
		})
	}
}

// claimcheckRead claims t from store and reads it whole, verified.
func claimcheckRead(ctx context.Context, store *claimcheck.Store, t *claimcheck.Ticket) (string, error) {
	p, err := store.Claim(t)
	if err != nil {
		return "", err
	}
	defer p.Close()
	r, err := p.Open(ctx)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

// TestConsumeHoldsWhileInboxDown: a delivery whose inbox lookup fails on
// an unavailable database is held in place until the database is back,
// and then worked on its first attempt: the outage spends no attempt and
// dead-letters nothing (before, each lookup failure sent the message
// back, spending an attempt, until it was dead-lettered).
func TestConsumeHoldsWhileInboxDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, tr := publishOne(t, ctx)
	inbox := &outageInboxStandIn{done: map[string]bool{}, kept: map[string]*claimcheck.Ticket{}, down: true}
	time.AfterFunc(1500*time.Millisecond, func() { inbox.setDown(false) })
	var runs atomic.Int32
	var settled []broker.Outcome
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	err := broker.Consume(cctx, tr, store, broker.ConsumeOptions{
		Inbox: inbox,
		Handlers: map[string]claimcheck.Handler{"once": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			runs.Add(1)
			return nil, nil
		})},
		Policy: claimcheck.RetryPolicy{MaxAttempts: 1, Base: 100 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MaxWaitDelay: 200 * time.Millisecond, Window: 20 * time.Second},
		OnDone: func(_ *broker.Delivery, o broker.Outcome) {
			settled = append(settled, o)
			if o.Action != broker.Retried {
				stop()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 || len(settled) != 1 || settled[0].Action != broker.Acked || settled[0].Attempt != 1 {
		t.Fatalf("handler ran %d times; settlements %+v; want one, acked on attempt 1", runs.Load(), settled)
	}
}

// publishOne publishes one message of kind "once", its payload checked in
// to a new file store, to a new in-process transport.
func publishOne(t *testing.T, ctx context.Context) (*claimcheck.Store, *brokertest.Fake) {
	t.Helper()
	store := brokertest.FileStore(t, nil)
	tr := brokertest.NewFake(64 << 10)
	if err := tr.Publish(ctx, []broker.Message{brokertest.Message(t, store, "once", "a document")}); err != nil {
		t.Fatal(err)
	}
	return store, tr
}
