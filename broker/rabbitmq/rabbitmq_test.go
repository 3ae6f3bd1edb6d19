package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/broker/rabbitmq"
)

// amqpURL returns CLAIMCHECK_TEST_AMQP_URL or skips the test.
func amqpURL(t *testing.T) string {
	return brokertest.ServerURL(t, "CLAIMCHECK_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
}

func newTransport(t *testing.T) broker.Transport { return openFresh(t, "cctest", 0) }

// openFresh opens a queue named after the test and deletes its topology
// when the test ends; maxPriority > 0 makes it a priority queue.
func openFresh(t *testing.T, prefix string, maxPriority int) *rabbitmq.Transport {
	u := amqpURL(t)
	name := fmt.Sprintf("%s.%s.%d", prefix, strings.ReplaceAll(t.Name(), "/", "."), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := rabbitmq.Open(ctx, u, rabbitmq.Options{Queue: name, MaxMessageSize: 64 << 10, MaxPriority: maxPriority})
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

func newPriorityTransport(t *testing.T) broker.Transport { return openFresh(t, "cctest.prio", 4) }

// TestConformancePriorityQueue: the classic priority queue settles,
// retries and dead-letters as the quorum queue does.
func TestConformancePriorityQueue(t *testing.T) {
	amqpURL(t)
	brokertest.RunConformance(t, newPriorityTransport)
}

// TestPriorityOrder: a priority-1 message published after 50 priority-4
// ones, all waiting before the consumer starts, is delivered first.
func TestPriorityOrder(t *testing.T) {
	tr := newPriorityTransport(t)
	if !broker.SupportsPriority(tr) {
		t.Fatal("a max_priority queue reports no priorities")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	msg := func(body string, prio string) broker.Message {
		m := broker.Message{Body: []byte(body), Attributes: map[string]string{broker.AttrKind: "k"}}
		if prio != "" {
			m.Attributes[broker.AttrPriority] = prio
		}
		return m
	}
	var low []broker.Message
	for i := range 50 {
		low = append(low, msg(fmt.Sprintf("low-%d", i), "4"))
	}
	if err := tr.Publish(ctx, low); err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(ctx, []broker.Message{msg("urgent", "1")}); err != nil {
		t.Fatal(err)
	}
	ds, err := tr.Receive(ctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %v", ds, err)
	}
	if got := string(ds[0].Body); got != "urgent" {
		t.Fatalf("first delivery %q, want the priority-1 message", got)
	}
	if err := tr.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
	for seen := 0; seen < 50; {
		ds, err := tr.Receive(ctx, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if !strings.HasPrefix(string(d.Body), "low-") {
				t.Fatalf("unexpected delivery %q", d.Body)
			}
			seen++
			if err := tr.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestPriorityQueueNotRedeclared: RabbitMQ cannot change a queue's
// arguments, so a quorum queue opened with max_priority (and a priority
// queue opened without it) is refused with ErrConfig naming the queue, and
// the queue is left as it was, messages included.
func TestPriorityQueueNotRedeclared(t *testing.T) {
	u := amqpURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	plain := openFresh(t, "cctest.plain", 0)
	name := plain.Queue()
	if broker.SupportsPriority(plain) {
		t.Error("a quorum queue reports priorities")
	}
	if err := plain.Publish(ctx, []broker.Message{{Body: []byte("kept"), Attributes: map[string]string{broker.AttrKind: "k"}}}); err != nil {
		t.Fatal(err)
	}
	_, err := rabbitmq.Open(ctx, u, rabbitmq.Options{Queue: name, MaxPriority: 4})
	if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "cannot change a queue's arguments") || !strings.Contains(err.Error(), name) {
		t.Fatalf("reopen with max_priority: %v, want ErrConfig naming the queue", err)
	}
	t.Logf("quorum queue reopened with max_priority=4: %v", err)
	ds, err := plain.Receive(ctx, 1)
	if err != nil || len(ds) != 1 || string(ds[0].Body) != "kept" {
		t.Fatalf("the message before the refused redeclare: %v %v", ds, err)
	}
	plain.Ack(ctx, ds[0])

	prio := openFresh(t, "cctest.prio", 4)
	_, err = rabbitmq.Open(ctx, u, rabbitmq.Options{Queue: prio.Queue()})
	if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "without priorities") {
		t.Fatalf("reopen a priority queue without max_priority: %v, want ErrConfig", err)
	}
	t.Logf("priority queue reopened without max_priority: %v", err)
}
