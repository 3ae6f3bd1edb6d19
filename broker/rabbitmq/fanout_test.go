package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/rabbitmq"
	"github.com/claimcheck/claimcheck/pipeline/pipelinetest"
)

// openFanOut opens a transport of queue on the shared exchange, deleted at
// cleanup.
func openFanOut(t *testing.T, opts rabbitmq.Options) *rabbitmq.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tr, err := rabbitmq.Open(ctx, amqpURL(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.DeleteTopology(); err != nil {
			t.Logf("delete topology: %v", err) // the exchange goes with the first
		}
		tr.Close()
	})
	return tr
}

// TestFanOutExchangeDeleteOnAck: one message relayed to a fanout exchange
// bound to two queues runs its handler once in each; with deletion on
// acknowledgement the object survives the first acknowledgement and goes
// with the second, and a failed first release is made good by the
// redelivery (pipelinetest.BrokerFanOut).
func TestFanOutExchangeDeleteOnAck(t *testing.T) {
	amqpURL(t)
	base := fmt.Sprintf("cctest.settle.fanout.%d", time.Now().UnixNano())
	qa, qb := base+".a", base+".b"
	opts := rabbitmq.Options{Exchange: base + ".x", FanOut: []string{qa, qb}}
	opts.Queue = qa
	relay := openFanOut(t, opts)
	a := openFanOut(t, opts)
	opts.Queue = qb
	b := openFanOut(t, opts)
	pipelinetest.BrokerFanOut(t, relay, []broker.Transport{a, b})
}

// TestFanOutUnknownRefusesDeleteOnAck: a queue bound to an exchange whose
// queues are not listed cannot count the references its broker creates:
// Consume refuses deletion on acknowledgement at start-up.
func TestFanOutUnknownRefusesDeleteOnAck(t *testing.T) {
	amqpURL(t)
	base := fmt.Sprintf("cctest.settle.unknown.%d", time.Now().UnixNano())
	tr := openFanOut(t, rabbitmq.Options{Queue: base + ".a", Exchange: base + ".x"})
	err := broker.Consume(t.Context(), tr, nil, broker.ConsumeOptions{
		Handlers:    map[string]claimcheck.Handler{"fan": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) { return nil, nil })},
		Inbox:       nopInbox{},
		DeleteOnAck: nopReleaser{},
	})
	if !errors.Is(err, claimcheck.ErrConfig) || !errors.Is(err, broker.ErrFanOutUnknown) {
		t.Fatalf("Consume with delete-on-ack on an exchange of unknown fan-out: %v, want ErrConfig and ErrFanOutUnknown", err)
	}
	t.Logf("refused: %v", err)
	if _, err := rabbitmq.Open(t.Context(), amqpURL(t), rabbitmq.Options{Queue: base + ".c", Exchange: base + ".x", FanOut: []string{base + ".d"}}); !errors.Is(err, claimcheck.ErrConfig) {
		t.Fatalf("FanOut without the transport's own queue: %v, want ErrConfig", err)
	}
}

type nopInbox struct{}

func (nopInbox) Seen(context.Context, string, string, string) (broker.Seen, error) {
	return broker.Seen{}, nil
}
func (nopInbox) Record(context.Context, broker.Outcome) error { return nil }

type nopReleaser struct{}

func (nopReleaser) Release(context.Context, int64, string, *claimcheck.Ticket) (bool, error) {
	return false, nil
}
