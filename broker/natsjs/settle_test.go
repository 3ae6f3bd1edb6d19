package natsjs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/broker/natsjs"
)

// streamCounts reads the message counts of the transport's two streams and
// the number of redeliveries its consumer made, straight from the server.
func streamCounts(t *testing.T, opts natsjs.Options) (work, dead uint64, redelivered int) {
	t.Helper()
	nc, err := nats.Connect(natsURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, s := range []struct {
		name string
		n    *uint64
	}{{opts.Stream, &work}, {opts.DeadStream, &dead}} {
		st, err := js.Stream(ctx, s.name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		*s.n = info.State.Msgs
	}
	c, err := js.Consumer(ctx, opts.Stream, opts.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return work, dead, ci.NumRedelivered
}

// TestDeadLetterTermOnTheWire: a delivery Consume dead-letters for a
// permanent failure is terminated in a form the installed server
// understands (nats-server 2.9.10 ignores "+TERM <reason>"): after four
// ack-wait periods the work stream is empty, the consumer redelivered
// nothing, the handler ran once and the dead stream holds exactly one copy.
func TestDeadLetterTermOnTheWire(t *testing.T) {
	const ackWait = time.Second
	opts := uniqueOptions(t)
	opts.AckWait = ackWait
	tr := open(t, opts)
	opts = tr.Options()
	store := brokertest.FileStore(t, nil)
	ctx := t.Context()
	m := brokertest.Message(t, store, "poison", "poison")
	m.Attributes[broker.AttrID] = "cc-poison-0001"
	if err := tr.Publish(ctx, []broker.Message{m}); err != nil {
		t.Fatal(err)
	}
	var runs, dead atomic.Int64
	cctx, cancel := context.WithTimeout(ctx, 4*ackWait+time.Second)
	defer cancel()
	err := broker.Consume(cctx, tr, store, broker.ConsumeOptions{
		Handlers: map[string]claimcheck.Handler{"poison": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			runs.Add(1)
			return nil, claimcheck.Permanent(errors.New("poison"))
		})},
		OnDone: func(_ *broker.Delivery, o broker.Outcome) {
			if o.Action == broker.DeadLettered {
				dead.Add(1)
			}
		},
		OnError: func(err error) { t.Errorf("consume: %v", err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	work, copies, redelivered := streamCounts(t, opts)
	t.Logf("after %v (ack wait %v): handler runs %d, dead-lettered %d, work stream %d messages, dead stream %d, redeliveries %d",
		4*ackWait+time.Second, ackWait, runs.Load(), dead.Load(), work, copies, redelivered)
	if runs.Load() != 1 || dead.Load() != 1 || work != 0 || copies != 1 || redelivered != 0 {
		t.Fatalf("handler runs %d, dead-lettered %d, work stream %d, dead stream %d, redeliveries %d; want 1, 1, 0, 1, 0",
			runs.Load(), dead.Load(), work, copies, redelivered)
	}
	ds, err := tr.ReceiveDead(ctx, 10)
	if err != nil || len(ds) != 1 || ds[0].Attributes[broker.AttrReason] == "" {
		t.Fatalf("dead letter: %d deliveries, err %v", len(ds), err)
	}
}

// TestLeaseFollowsAckWait: with the consumer's AckWait at 2 s, a 3.5 s
// handler's delivery is extended (InProgress) before AckWait runs out,
// acknowledged once, and never redelivered to the second consumer pulling
// from the same JetStream consumer (brokertest.LeaseFollows).
func TestLeaseFollowsAckWait(t *testing.T) {
	const ackWait = 2 * time.Second
	opts := uniqueOptions(t)
	opts.AckWait = ackWait
	tr := open(t, opts)
	opts = tr.Options()
	brokertest.LeaseFollows(t, tr, ackWait, 3500*time.Millisecond, func(t *testing.T) {
		if work, _, redelivered := streamCounts(t, opts); work != 0 || redelivered != 0 {
			t.Fatalf("work stream %d messages, %d redeliveries; want an empty stream and no redelivery", work, redelivered)
		}
	})
}
