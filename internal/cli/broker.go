package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	_ "github.com/claimcheck/claimcheck/broker/natsjs"   // nats://
	_ "github.com/claimcheck/claimcheck/broker/rabbitmq" // amqp://, amqps://
	_ "github.com/claimcheck/claimcheck/broker/sqs"      // sqs://
	"github.com/claimcheck/claimcheck/pipeline"
)

// openBroker opens --broker and checks, at start-up, that no ticket of
// kinds can exceed its maximum message size.
func (g *globals) openBroker(ctx context.Context, e *env, kinds ...string) (broker.Transport, error) {
	return g.openBrokerWithin(ctx, e, 30*time.Second, kinds...)
}

// openBrokerWithin is openBroker giving up after d. Configuration errors
// are usage errors (exit 2); an unreachable broker is a plain error.
func (g *globals) openBrokerWithin(ctx context.Context, e *env, d time.Duration, kinds ...string) (broker.Transport, error) {
	if format, err := broker.FormatOf(g.brokerURL); err == nil {
		if err := format.CheckStore(e.store); err != nil {
			return nil, usagef("--broker: %v; nothing was stored", err)
		}
	}
	octx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tr, err := broker.Open(octx, g.brokerURL)
	if err != nil {
		if errors.Is(err, claimcheck.ErrConfig) {
			return nil, usagef("--broker: %v", err)
		}
		return nil, fmt.Errorf("--broker: %w", err)
	}
	if len(kinds) == 0 {
		kinds = []string{strings.Repeat("k", 64)} // the longest kind: any entry fits
	}
	if err := broker.CheckConfig(e.store, tr, kinds...); err != nil {
		tr.Close()
		return nil, usagef("--broker: %v", err)
	}
	return tr, nil
}

// brokerRetry is openBrokerWaiting's pause between tries: claimcheck's one
// retry policy, from 1 s doubling to 30 s.
var brokerRetry = claimcheck.RetryPolicy{Base: time.Second, MaxDelay: 30 * time.Second}

// openBrokerWaiting is openBroker for long-running commands: while the
// broker is unreachable (not misconfigured) it says so and tries again
// (brokerRetry), until ctx is done.
func (g *globals) openBrokerWaiting(ctx context.Context, e *env, stderr io.Writer, kinds ...string) (broker.Transport, error) {
	for try := 1; ; try++ {
		tr, err := g.openBroker(ctx, e, kinds...)
		if err == nil {
			if try > 1 {
				fmt.Fprintln(stderr, "broker reachable")
			}
			return tr, nil
		}
		if errors.As(err, new(usageError)) || ctx.Err() != nil {
			return nil, err
		}
		if try == 1 || try%10 == 0 {
			fmt.Fprintf(stderr, "%v; trying again (interrupt to give up)\n", err)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(brokerRetry.Backoff(try)):
		}
	}
}

// brokerTally counts what a broker consumer did.
type brokerTally struct {
	acked, retried, dead, duplicates, deleted atomic.Int64
}

// add counts one settled delivery (BrokerSource.OnSettled).
func (t *brokerTally) add(o broker.Outcome) {
	switch {
	case o.Duplicate:
		t.duplicates.Add(1)
	case o.Action == broker.Acked:
		t.acked.Add(1)
	case o.Action == broker.Retried:
		t.retried.Add(1)
	case o.Action == broker.DeadLettered:
		t.dead.Add(1)
	}
	if o.Deleted {
		t.deleted.Add(1)
	}
}

// brokerSource is the broker source of work and run --broker over tr: the
// relay of --destination (if relay), and the consumer's and relay's
// troubles reported on stderr.
func brokerSource(g *globals, tr broker.Transport, stderr io.Writer, relay bool) *pipeline.BrokerSource {
	src := &pipeline.BrokerSource{Transport: tr, OnError: func(err error) { fmt.Fprintln(stderr, err) }}
	if relay {
		var outage atomic.Bool
		ro := g.relayOptions(tr)
		src.Relay, src.RelayBroker, src.RelayFormat = ro.Destination, ro.Broker, ro.Format
		left := leftNotice(stderr)
		src.OnRelayed = func(id int64, err error) {
			if errors.Is(err, pipeline.ErrOtherBroker) {
				left(id, err)
				return
			}
			if errors.Is(err, pipeline.ErrNotRelayable) {
				fmt.Fprintf(stderr, "relay: job %d is dead (see claimcheck dead): %v\n", id, err)
				return
			}
			if err != nil && outage.CompareAndSwap(false, true) {
				fmt.Fprintf(stderr, "relay: job %d not confirmed by the broker, kept in the outbox and retried: %v\n", id, err)
			}
			if err == nil && outage.CompareAndSwap(true, false) {
				fmt.Fprintln(stderr, "relay: the broker confirms again")
			}
		}
	}
	return src
}

// messageNote names a broker message in a job's line, "" for a job of the
// job database.
func messageNote(id string) string {
	if id == "" {
		return ""
	}
	return " (message " + id + ")"
}

// brokerBinding is the broker and queue --broker publishes to
// (broker.Binding), recorded with each outbox entry so that a relay for
// another broker leaves it; "" without --broker. A URL that does not parse
// has none (broker.Open refuses it).
func (g *globals) brokerBinding() string {
	if g.brokerURL == "" {
		return ""
	}
	b, _ := broker.Binding(g.brokerURL)
	return b
}

// relayOptions are the relay's options for --destination over tr: its
// broker binding and its message format (broker.FormatOf of --broker: AWS
// payload pointers for a URL declaring format=aws), the same for relay,
// submit's relay and work's.
func (g *globals) relayOptions(tr broker.Transport) pipeline.RelayOptions {
	format, _ := broker.FormatOf(g.brokerURL) // checked by broker.Open
	return pipeline.RelayOptions{Destination: g.destination, Broker: g.brokerBinding(), Transport: tr, Format: format}
}

// leftNotice says once per entry that a relay left it for another
// broker's relay (pipeline.ErrOtherBroker).
func leftNotice(stderr io.Writer) func(id int64, err error) {
	var seen sync.Map
	return func(id int64, err error) {
		if _, dup := seen.LoadOrStore(id, true); !dup {
			fmt.Fprintf(stderr, "relay: %v\n", err)
		}
	}
}

// redactedBroker is --broker without its password, for messages.
func (g *globals) redactedBroker() string { return broker.RedactURL(g.brokerURL) }
