package sqs

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
)

// deadLetterFullSize publishes a foreign message of the queue's maximum
// size (SQS counts attributes with the body) that claimcheck cannot
// decode, consumes it, and checks it was dead-lettered once: one outcome,
// the copy on the dead-letter queue (without the reason, which would not
// fit), nothing left on the queue.
func deadLetterFullSize(t *testing.T, tr *Transport) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	max := tr.MaxMessageSize()
	attrs := map[string]string{"origin": "foreign"}
	probe := broker.Message{Attributes: attrs}
	body := bytes.Repeat([]byte("x"), int(max-broker.Size(probe)))
	m := broker.Message{Body: body, Attributes: attrs}
	if broker.Size(m) != max {
		t.Fatalf("message of %d bytes, want %d", broker.Size(m), max)
	}
	if err := tr.Publish(ctx, []broker.Message{m}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var outcomes []broker.Outcome
	cctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- broker.Consume(cctx, tr, brokertest.FileStore(t, nil), broker.ConsumeOptions{
			Handlers: map[string]claimcheck.Handler{"pdf": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
				t.Error("a foreign message reached the handler")
				return nil, nil
			})},
			OnDone: func(_ *broker.Delivery, o broker.Outcome) { mu.Lock(); outcomes = append(outcomes, o); mu.Unlock() },
		})
	}()
	var dead []*broker.Delivery
	for deadline := time.Now().Add(time.Minute); len(dead) == 0; {
		ds, err := tr.ReceiveDead(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		dead = ds
		if time.Now().After(deadline) {
			t.Fatal("no dead letter within a minute")
		}
	}
	// One more receive time on the queue: a message sent back would be
	// dead-lettered (or retried) again.
	time.Sleep(3 * time.Second)
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(outcomes) != 1 || outcomes[0].Action != broker.DeadLettered {
		t.Fatalf("outcomes %+v, want one dead-lettered", outcomes)
	}
	d := dead[0]
	if !bytes.Equal(d.Body, body) || d.Attributes["origin"] != "foreign" {
		t.Fatalf("dead letter of %d bytes with attributes %v, want the original", len(d.Body), d.Attributes)
	}
	t.Logf("a %d-byte foreign message: dead-lettered once (reason %s in the outcome; attribute on the copy: %q)", max, outcomes[0].Reason, d.Attributes[broker.AttrReason])
	if err := tr.Ack(ctx, d); err != nil {
		t.Fatal(err)
	}
	// ReceiveDead waits for a message until its context is done.
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if more, _ := tr.ReceiveDead(short, 1); len(more) != 0 {
		t.Fatalf("dead-letter queue after the ack: %d more", len(more))
	}
}

func TestDeadLetterFullSizeAgainstStandIn(t *testing.T) {
	tr, _ := openStandIn(t, 0)
	deadLetterFullSize(t, tr)
}

func TestDeadLetterFullSizeAgainstFauxqs(t *testing.T) {
	deadLetterFullSize(t, openFauxqs(t, fauxqsClient(t), 0, Options{}))
}
