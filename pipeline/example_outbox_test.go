package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Example_transactionalEnqueue is the transactional outbox inside the
// application's own transaction: the business row, the claims-registry row
// and the outbox entry commit together, so an order is never saved without
// its job, nor a job published for an order that rolled back. The relay
// then publishes the entry's ticket to a broker, and a consumer claims the
// verified payload. The broker here is brokertest's in-memory fake, so the
// example runs anywhere; RabbitMQ, NATS JetStream and SQS transports
// (broker/rabbitmq, broker/natsjs, broker/sqs) plug in the same way.
func Example_transactionalEnqueue() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "claimcheck-outbox-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.Join(dir, "objects"), &claimcheck.Options{SpoolDir: dir})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	p, err := pipeline.Open(ctx, pipeline.Config{Database: "sqlite://" + filepath.Join(dir, "jobs.db"), Store: store})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	if _, err := p.DB().ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		panic(err)
	}

	// Check the payload in first (outside the transaction: it is the slow
	// part), then write the order and the outbox entry in one transaction.
	t, err := p.CheckIn(ctx, "acme", strings.NewReader("order 42: 3 widgets"), nil)
	if err != nil {
		panic(err)
	}
	tx, err := p.DB().BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES ('42')`); err != nil {
		panic(err)
	}
	if _, err := p.EnqueueTx(ctx, tx, "fulfil", t, &pipeline.EnqueueOptions{Destinations: []string{"orders"}}); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}

	// The relay publishes tickets, never payloads, until the outbox is empty.
	tr := brokertest.NewFake(256 << 10)
	if err := p.Relay(ctx, pipeline.RelayOptions{Destination: "orders", Transport: tr, UntilEmpty: true}); err != nil {
		panic(err)
	}

	// A consumer claims the verified payload; the inbox makes a message
	// delivered twice run once.
	cctx, cancel := context.WithCancel(ctx)
	err = broker.Consume(cctx, tr, store, broker.ConsumeOptions{
		Inbox: p.Inbox(),
		Handlers: map[string]claimcheck.Handler{"fulfil": claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			r, err := job.Payload.Open(ctx)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			if err != nil {
				return nil, err
			}
			fmt.Printf("fulfil %s: %q\n", job.Tenant, b)
			cancel()
			return nil, nil
		})},
	})
	if err != nil && cctx.Err() == nil {
		panic(err)
	}
	// Output: fulfil acme: "order 42: 3 widgets"
}
