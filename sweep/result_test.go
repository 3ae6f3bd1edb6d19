package sweep_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/sweep"
)

// sweepingInbox is the pipeline's inbox with a sweep, its clock two days
// ahead, run just before each result is recorded: the moment between the
// result's check-in and the row that references it.
type sweepingInbox struct {
	inner interface {
		broker.Inbox
		broker.ResultCheckIn
	}
	sweep   func() *sweep.Report
	mu      sync.Mutex
	reports []*sweep.Report
}

func (s *sweepingInbox) Seen(ctx context.Context, queue, id, delivery string) (broker.Seen, error) {
	return s.inner.Seen(ctx, queue, id, delivery)
}

func (s *sweepingInbox) CheckInResult(ctx context.Context, tenant string, r io.Reader, opts *claimcheck.CheckInOptions) (*claimcheck.Ticket, error) {
	return s.inner.CheckInResult(ctx, tenant, r, opts)
}

func (s *sweepingInbox) Record(ctx context.Context, o broker.Outcome) error {
	if o.Result != nil {
		rep := s.sweep()
		s.mu.Lock()
		s.reports = append(s.reports, rep)
		s.mu.Unlock()
	}
	return s.inner.Record(ctx, o)
}

// TestBrokerResultKeptFromSweep: a broker consumer's result is held by a
// check-in intent from before its object is written until the inbox
// records it, so a sweep whose clock is two days ahead, run in between,
// keeps it (reason checking-in), and the record turns the intent into the
// result's registry row. Before, the consumer checked results in with the
// store's plain CheckIn and that sweep deleted the result as an orphan.
func TestBrokerResultKeptFromSweep(t *testing.T) {
	stores(t, func(t *testing.T, b *bundle) {
		ctx := b.ctx
		if _, err := b.pipe.Enqueue(ctx, "results", tenant, strings.NewReader("work me through a broker"), &pipeline.EnqueueOptions{Destinations: []string{"fake"}}); err != nil {
			t.Fatal(err)
		}
		tr := brokertest.NewFake(256 << 10)
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := b.pipe.Relay(rctx, pipeline.RelayOptions{Destination: "fake", Transport: tr, UntilEmpty: true}); err != nil {
			t.Fatal(err)
		}
		in := &sweepingInbox{inner: b.pipe.Inbox().(interface {
			broker.Inbox
			broker.ResultCheckIn
		}), sweep: func() *sweep.Report {
			rep, err := sweep.Sweep(ctx, sweep.Options{Store: b.store, DB: b.pipe.DB(), Grace: time.Hour,
				Now: func() time.Time { return time.Now().Add(2 * day) }, AllowEmptyRegistry: true})
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			return rep
		}}
		body := bytes.Repeat([]byte("a result too large to be inline. "), 40<<10) // 1.3 MiB
		h := claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return &claimcheck.Result{Body: bytes.NewReader(body), ContentType: "text/plain"}, nil
		})
		cctx, stop := context.WithTimeout(ctx, time.Minute)
		defer stop()
		var got broker.Outcome
		err := broker.Consume(cctx, tr, b.store, broker.ConsumeOptions{
			Handlers: map[string]claimcheck.Handler{"results": h}, Inbox: in,
			OnDone:  func(_ *broker.Delivery, o broker.Outcome) { got = o; stop() },
			OnError: func(err error) { t.Logf("consume: %v", err) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Action != broker.Acked || got.Result == nil || got.Result.IsInline() {
			t.Fatalf("outcome %s (%v), result %v: want acked with an offloaded result", got.Action, got.Err, got.Result)
		}
		if len(in.reports) == 0 || in.reports[0] == nil {
			t.Fatal("no sweep ran before the result was recorded")
		}
		rep := in.reports[0]
		t.Logf("sweep between the result's check-in and its record: %d orphans removed, %d kept checking in", rep.RemovedByReason[sweep.Orphan], rep.ByReason[sweep.CheckingIn])
		ok, err := b.store.Bucket().Exists(ctx, got.Result.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || rep.RemovedByReason[sweep.Orphan] != 0 {
			t.Fatalf("the result's object: exists %v; the sweep removed %d orphans: want it kept", ok, rep.RemovedByReason[sweep.Orphan])
		}
		p, err := b.store.Claim(got.Result)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.Verify(ctx); err != nil {
			t.Fatalf("the recorded result: %v", err)
		}
		// The record took the intent's place: an ordinary sweep now keeps
		// the result for its registry row, and finds no intent left.
		rep = in.sweep()
		if rep.RemovedByReason[sweep.Orphan] != 0 || rep.ByReason[sweep.CheckingIn] != 0 {
			t.Fatalf("sweep after the record: %d orphans removed, %d kept checking in", rep.RemovedByReason[sweep.Orphan], rep.ByReason[sweep.CheckingIn])
		}
	})
}
