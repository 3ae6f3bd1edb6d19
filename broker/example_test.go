package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
)

// ExampleConsume is a broker consumer: each message's ticket is claimed,
// the handler runs on the verified payload, and a message the handler
// fails for good (claimcheck.Permanent) goes to the dead-letter
// destination at once, its reason attached. The transport here is
// brokertest's in-process fake, so the example runs anywhere; the
// RabbitMQ, NATS JetStream and SQS transports plug in the same way.
func ExampleConsume() {
	ctx := context.Background()
	store, err := claimcheck.OpenStore(ctx, "mem://", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	tr := brokertest.NewFake(256 << 10)

	// A producer publishes two tickets, never the payloads.
	var msgs []broker.Message
	for _, body := range []string{"%PDF-1.7 ...", "not a document"} {
		t, err := store.CheckIn(ctx, "acme", strings.NewReader(body), nil)
		if err != nil {
			log.Fatal(err)
		}
		m, err := broker.NewMessage("pdf", t)
		if err != nil {
			log.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := tr.Publish(ctx, msgs); err != nil {
		log.Fatal(err)
	}

	cctx, stop := context.WithCancel(ctx)
	settled := 0
	err = broker.Consume(cctx, tr, store, broker.ConsumeOptions{
		Batch: 1, // one at a time, for a stable output
		Handlers: map[string]claimcheck.Handler{"pdf": claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			r, err := job.Payload.Open(ctx) // verified against the ticket's size and SHA-256
			if err != nil {
				return nil, err
			}
			defer r.Close()
			head := make([]byte, 4)
			if _, err := io.ReadFull(r, head); err != nil || string(head) != "%PDF" {
				return nil, claimcheck.Permanent(errors.New("not a PDF"))
			}
			return nil, nil
		})},
		OnDone: func(_ *broker.Delivery, o broker.Outcome) {
			fmt.Println(o.Action, "on attempt", o.Attempt)
			if settled++; settled == len(msgs) {
				stop()
			}
		},
	})
	if err != nil && cctx.Err() == nil {
		log.Fatal(err)
	}

	dead, err := tr.ReceiveDead(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dead letters:", len(dead), "reason:", dead[0].Attributes[broker.AttrReason])
	// Output:
	// acked on attempt 1
	// dead-lettered on attempt 1
	// dead letters: 1 reason: handler-permanent
}
