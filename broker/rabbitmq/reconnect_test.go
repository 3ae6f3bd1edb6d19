package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/rabbitmq"
	"github.com/claimcheck/claimcheck/internal/outageproxy"
)

// openProxied opens a transport on a fresh queue through an outage proxy
// to the RabbitMQ of raw; cleanup restores the proxy, deletes the queue's
// topology and closes the transport.
func openProxied(ctx context.Context, t *testing.T, raw, what string) (*rabbitmq.Transport, *outageproxy.Proxy) {
	t.Helper()
	target, via := proxiedURL(t, raw)
	proxy := outageproxy.New(t, target)
	name := fmt.Sprintf("cctest.%s.%d", what, time.Now().UnixNano())
	tr, err := rabbitmq.Open(ctx, via(proxy.Addr()), rabbitmq.Options{Queue: name, DialTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.Restore()
		if err := tr.DeleteTopology(); err != nil {
			t.Errorf("delete topology: %v", err)
		}
		if err := tr.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return tr, proxy
}

// proxiedURL returns raw with its host replaced by the proxy's, and the
// RabbitMQ address the proxy forwards to.
func proxiedURL(t *testing.T, raw string) (target string, via func(proxy string) string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("CLAIMCHECK_TEST_AMQP_URL does not parse")
	}
	target = u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5672")
	}
	return target, func(proxy string) string {
		v := *u
		v.Host = proxy
		return v.String()
	}
}

func bodiesOf(prefix string, n int) []broker.Message {
	msgs := make([]broker.Message, n)
	for i := range msgs {
		msgs[i] = broker.Message{Body: fmt.Appendf(nil, "%s-%d", prefix, i), Attributes: map[string]string{broker.AttrKind: "reconnect"}}
	}
	return msgs
}

// TestReconnectAfterOutage cuts every connection between the Transport and
// RabbitMQ for two seconds. During the cut, calls fail promptly with
// ErrUnavailable (a blocked Receive included); afterwards the same
// Transport publishes and receives again, deliveries taken before the cut
// and never acked are redelivered (their stale Ack, Retry and DeadLetter
// fail with ErrUnavailable and publish nothing), and every confirmed message
// is acked exactly once.
func TestReconnectAfterOutage(t *testing.T) {
	raw := amqpURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	tr, proxy := openProxied(ctx, t, raw, "reconnect")

	acked := map[string]int{}
	ack := func(d *broker.Delivery) {
		t.Helper()
		if err := tr.Ack(ctx, d); err != nil {
			t.Fatalf("ack %s: %v", d.Body, err)
		}
		acked[string(d.Body)]++
	}
	wantUnavailable := func(what string, err error) {
		t.Helper()
		t.Logf("%s: %v", what, err)
		if !errors.Is(err, claimcheck.ErrUnavailable) {
			t.Fatalf("%s: %v, want an error wrapping claimcheck.ErrUnavailable", what, err)
		}
	}
	wantStale := func(what string, err error) {
		t.Helper()
		wantUnavailable(what, err)
		if !strings.Contains(err.Error(), "redeliver") {
			t.Fatalf("%s: %q does not say the broker will redeliver it", what, err)
		}
	}

	// Before the outage: a-0..a-3 received, a-0 and a-1 acked, a-2 and a-3
	// held unacked.
	if err := tr.Publish(ctx, bodiesOf("a", 4)); err != nil {
		t.Fatalf("publish before the outage: %v", err)
	}
	byBody := map[string]*broker.Delivery{}
	for len(byBody) < 4 {
		ds, err := tr.Receive(ctx, 4)
		if err != nil {
			t.Fatalf("receive before the outage: %v", err)
		}
		for _, d := range ds {
			byBody[string(d.Body)] = d
		}
	}
	ack(byBody["a-0"])
	ack(byBody["a-1"])
	stale := []*broker.Delivery{byBody["a-2"], byBody["a-3"]}

	// A Receive blocked on the (now empty) queue when the connection drops.
	blocked := make(chan error, 1)
	go func() {
		ds, err := tr.Receive(ctx, 1)
		if err == nil {
			err = fmt.Errorf("received %d deliveries and no error", len(ds))
		}
		blocked <- err
	}()
	time.Sleep(200 * time.Millisecond)

	cutAt := time.Now()
	proxy.Cut()

	select {
	case err := <-blocked:
		wantUnavailable("Receive blocked when the connection dropped", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Receive still blocked 10 s after the connection dropped")
	}

	start := time.Now()
	err := tr.Publish(ctx, bodiesOf("cut", 1))
	wantUnavailable("Publish during the outage", err)
	var perr *broker.PublishError
	if !errors.As(err, &perr) || perr.Failed[0] == nil {
		t.Fatalf("Publish during the outage: %v, want a *broker.PublishError naming message #0", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Publish during the outage took %v, want a prompt failure", d)
	}

	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	ds, err := tr.Receive(rctx, 1)
	rcancel()
	if err == nil {
		t.Fatalf("Receive during the outage returned %d deliveries", len(ds))
	}
	wantUnavailable("Receive during the outage", err)

	wantStale("Ack of a delivery from before the outage, during it", tr.Ack(ctx, stale[0]))

	time.Sleep(time.Until(cutAt.Add(2 * time.Second)))
	proxy.Restore()

	// After the outage: the same Transport works again.
	if err := tr.Publish(ctx, bodiesOf("b", 4)); err != nil {
		t.Fatalf("publish after the outage: %v", err)
	}
	wantStale("Ack of a delivery from before the outage, after it", tr.Ack(ctx, stale[0]))
	wantStale("Retry of a delivery from before the outage", tr.Retry(ctx, stale[1], 0))
	wantStale("DeadLetter of a delivery from before the outage", tr.DeadLetter(ctx, stale[1], "test"))

	want := []string{"a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "b-2", "b-3"}
	missing := func() []string {
		var m []string
		for _, b := range want {
			if acked[b] == 0 {
				m = append(m, b)
			}
		}
		return m
	}
	rctx, rcancel = context.WithTimeout(ctx, 15*time.Second)
	defer rcancel()
	for len(missing()) > 0 {
		ds, err := tr.Receive(rctx, 10)
		if err != nil {
			t.Fatalf("receive after the outage, still missing %v: %v", missing(), err)
		}
		for _, d := range ds {
			if b := string(d.Body); (b == "a-2" || b == "a-3") && d.Attempt < 2 {
				t.Errorf("%s redelivered with attempt %d, want at least 2", b, d.Attempt)
			}
			ack(d)
		}
	}
	// Nothing more: no duplicate, no copy left by a stale Retry.
	for {
		ectx, ecancel := context.WithTimeout(ctx, time.Second)
		ds, err := tr.Receive(ectx, 10)
		ecancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("receive after the outage: %v", err)
		}
		for _, d := range ds {
			ack(d)
		}
	}
	dctx, dcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	ds, err = tr.ReceiveDead(dctx, 1)
	dcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dead-letter queue: %d deliveries, %v; want none (a stale DeadLetter must publish nothing)", len(ds), err)
	}
	for _, b := range want {
		if acked[b] != 1 {
			t.Errorf("%s acked %d times, want exactly once", b, acked[b])
		}
	}
	// The message whose Publish failed may or may not have reached the
	// broker, but never twice.
	if n := acked["cut-0"]; n > 1 {
		t.Errorf("cut-0 acked %d times, want at most once", n)
	}
	for b := range acked {
		if !strings.HasPrefix(b, "a-") && !strings.HasPrefix(b, "b-") && b != "cut-0" {
			t.Errorf("unexpected message %q", b)
		}
	}
}

// TestPublishPipelinesAndLosesConfirms: a Publish waiting for its confirms
// does not stop another from sending (the second batch reaches the wire
// while the first still waits), and when the connection drops with confirms
// outstanding, every unconfirmed message of both calls is reported failed
// with ErrUnavailable, none counted as confirmed.
func TestPublishPipelinesAndLosesConfirms(t *testing.T) {
	raw := amqpURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tr, proxy := openProxied(ctx, t, raw, "pipeline")
	if err := tr.Publish(ctx, bodiesOf("warm", 1)); err != nil {
		t.Fatal(err)
	}

	proxy.Freeze() // RabbitMQ still gets everything; its confirms are dropped
	waitSent := func(marker string) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for !proxy.HasSent(marker) {
			if time.Now().After(deadline) {
				t.Fatalf("%q not sent within 3 s", marker)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- tr.Publish(ctx, bodiesOf("first-batch", 3)) }()
	waitSent("first-batch-2")
	go func() { second <- tr.Publish(ctx, bodiesOf("second-batch", 2)) }()
	waitSent("second-batch-1") // fails if the first Publish holds the channel while it waits
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-first:
		t.Fatalf("first Publish returned %v without any confirm", err)
	case err := <-second:
		t.Fatalf("second Publish returned %v without any confirm", err)
	default:
	}

	proxy.Cut()
	for _, c := range []struct {
		name string
		res  chan error
		n    int
	}{{"first", first, 3}, {"second", second, 2}} {
		select {
		case err := <-c.res:
			t.Logf("%s Publish: %v", c.name, err)
			var perr *broker.PublishError
			if !errors.As(err, &perr) || len(perr.Failed) != c.n || perr.Total != c.n {
				t.Fatalf("%s Publish: %v, want a *broker.PublishError with all %d messages failed", c.name, err, c.n)
			}
			for i, e := range perr.Failed {
				if !errors.Is(e, claimcheck.ErrUnavailable) {
					t.Errorf("%s Publish, message #%d: %v, want ErrUnavailable", c.name, i, e)
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s Publish still waiting 10 s after the connection dropped", c.name)
		}
	}

	proxy.Restore()
	if err := tr.Publish(ctx, bodiesOf("after", 1)); err != nil {
		t.Fatalf("publish after the connection came back: %v", err)
	}
}
