package rabbitmq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/broker/rabbitmq"
)

// amqpURL returns CLAIMCHECK_TEST_AMQP_URL or skips the test.
func amqpURL(t *testing.T) string {
	return brokertest.ServerURL(t, "CLAIMCHECK_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
}

func newTransport(t *testing.T) broker.Transport {
	u := amqpURL(t)
	name := fmt.Sprintf("cctest.%s.%d", strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := rabbitmq.Open(ctx, u, rabbitmq.Options{Queue: name, MaxMessageSize: 64 << 10})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := tr.DeleteTopology(); err != nil {
			t.Errorf("delete topology: %v", err)
		}
		if err := tr.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return tr
}

func TestConformance(t *testing.T) {
	amqpURL(t)
	brokertest.RunConformance(t, newTransport)
}

func TestDefaultsAndValidation(t *testing.T) {
	u := amqpURL(t)
	if _, err := rabbitmq.Open(t.Context(), u, rabbitmq.Options{}); err == nil {
		t.Fatal("Open without a queue name succeeded")
	}
	tr, err := rabbitmq.Open(t.Context(), u, rabbitmq.Options{Queue: fmt.Sprintf("cctest.defaults.%d", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	defer tr.DeleteTopology()
	if tr.MaxMessageSize() != rabbitmq.DefaultMaxMessageSize {
		t.Errorf("MaxMessageSize %d, want %d", tr.MaxMessageSize(), rabbitmq.DefaultMaxMessageSize)
	}
}

// TestRedeliveryCountsAttempt: a delivery never settled (the consumer died)
// comes back with its attempt incremented, from the quorum queue's
// x-delivery-count.
func TestRedeliveryCountsAttempt(t *testing.T) {
	u := amqpURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("cctest.redelivery.%d", time.Now().UnixNano())
	first, err := rabbitmq.Open(ctx, u, rabbitmq.Options{Queue: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Publish(ctx, []broker.Message{{Body: []byte("x"), Attributes: map[string]string{broker.AttrKind: "k"}}}); err != nil {
		t.Fatal(err)
	}
	ds, err := first.Receive(ctx, 1)
	if err != nil || len(ds) != 1 || ds[0].Attempt != 1 {
		t.Fatalf("first receive: %v %v", ds, err)
	}
	first.Close() // dies without settling
	second, err := rabbitmq.Open(ctx, u, rabbitmq.Options{Queue: name})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	defer second.DeleteTopology()
	ds, err = second.Receive(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("second receive: %v %v", ds, err)
	}
	if ds[0].Attempt != 2 {
		t.Errorf("redelivered with attempt %d, want 2", ds[0].Attempt)
	}
	if err := second.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
}
