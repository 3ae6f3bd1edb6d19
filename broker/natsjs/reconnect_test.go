package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/natsjs"
	"github.com/claimcheck/claimcheck/internal/outageproxy"
)

// TestReconnectAfterOutage: through a TCP proxy that cuts every connection
// for about 2 s, a pull in progress and Publish, Receive and Extend fail
// fast with ErrUnavailable during the cut; afterwards the same Transport publishes, receives and acks
// again (a delivery received before the cut included), and every message
// whose Publish was confirmed is received.
func TestReconnectAfterOutage(t *testing.T) {
	u, err := url.Parse(natsURL(t))
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "4222")
	}
	proxy := outageproxy.New(t, target)
	pu := *u
	pu.Host = proxy.Addr()

	opts := uniqueOptions(t)
	opts.ReconnectWait = 100 * time.Millisecond
	opts.FetchWait = 500 * time.Millisecond
	open(t, opts) // the topology, deleted at cleanup over a direct connection
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	tr, err := natsjs.Open(ctx, pu.String(), opts)
	if err != nil {
		t.Fatalf("open through the proxy: %v", err)
	}
	t.Cleanup(func() { tr.Close() })

	msg := func(body string) []broker.Message {
		return []broker.Message{{Body: []byte(body), Attributes: map[string]string{broker.AttrKind: "k"}}}
	}
	confirmed := map[string]bool{}
	mustPublish := func(body string) {
		t.Helper()
		if err := tr.Publish(ctx, msg(body)); err != nil {
			t.Fatalf("publish %s: %v", body, err)
		}
		confirmed[body] = true
	}

	mustPublish("before-1")
	ds, err := tr.Receive(ctx, 1)
	if err != nil || len(ds) != 1 || string(ds[0].Body) != "before-1" {
		t.Fatalf("receive before the cut: %v %v", ds, err)
	}
	held := ds[0] // settled after the outage
	mustPublish("before-2")

	// A pull in progress when the connection is lost ends with
	// ErrUnavailable within FetchWait plus a second (the dead-letter stream
	// is empty, so the pull waits).
	type result struct {
		ds  []*broker.Delivery
		err error
		el  time.Duration
	}
	pulled := make(chan result, 1)
	go func() {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		start := time.Now()
		ds, err := tr.ReceiveDead(rctx, 1)
		pulled <- result{ds, err, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond)

	proxy.Cut()
	cutAt := time.Now()
	select {
	case r := <-pulled:
		if len(r.ds) > 0 || !errors.Is(r.err, claimcheck.ErrUnavailable) {
			t.Errorf("receive cut during a pull: %d deliveries, %v; want ErrUnavailable", len(r.ds), r.err)
		}
		if r.el > opts.FetchWait+time.Second+500*time.Millisecond {
			t.Errorf("receive cut during a pull took %v", r.el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("receive cut during a pull still waiting after 5 s")
	}
	const bound = 2 * time.Second // every call during the cut fails within this
	for i := 0; time.Since(cutAt) < 2*time.Second; i++ {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		err := tr.Publish(pctx, msg(fmt.Sprintf("during-%d", i)))
		el := time.Since(start)
		pcancel()
		switch {
		case err == nil:
			t.Errorf("publish #%d during the cut confirmed", i)
		case !errors.Is(err, claimcheck.ErrUnavailable):
			t.Errorf("publish #%d during the cut: %v, want ErrUnavailable", i, err)
		case el > bound:
			t.Errorf("publish #%d during the cut took %v", i, el)
		}
		if i == 0 {
			t.Logf("first publish during the cut: %v after %v", err, el)
		}

		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		start = time.Now()
		ds, err := tr.Receive(rctx, 10)
		el = time.Since(start)
		rcancel()
		switch {
		case len(ds) > 0 || err == nil:
			t.Errorf("receive during the cut: %d deliveries, %v", len(ds), err)
		case !errors.Is(err, claimcheck.ErrUnavailable):
			t.Errorf("receive during the cut: %v, want ErrUnavailable", err)
		case el > opts.FetchWait+time.Second+200*time.Millisecond:
			t.Errorf("receive during the cut took %v", el)
		}

		if err := tr.Extend(ctx, held, time.Minute); !errors.Is(err, claimcheck.ErrUnavailable) {
			t.Errorf("extend during the cut: %v, want ErrUnavailable", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	proxy.Restore()

	// The same Transport publishes again once nats.go has reconnected.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := tr.Publish(ctx, msg("after-1"))
		if err == nil {
			confirmed["after-1"] = true
			break
		}
		if !errors.Is(err, claimcheck.ErrUnavailable) {
			t.Fatalf("publish after the cut: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish still failing 10 s after the cut: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("publishing again %v after the cut ended", time.Since(cutAt)-2*time.Second)
	mustPublish("after-2")
	if err := tr.Ack(ctx, held); err != nil {
		t.Errorf("ack of a delivery received before the cut: %v", err)
	}

	got := map[string]int{}
	for _, d := range receiveAll(t, ctx, tr, 1500*time.Millisecond) {
		got[string(d.Body)]++
	}
	delete(confirmed, "before-1") // received and acked
	for body := range confirmed {
		if got[body] != 1 {
			t.Errorf("confirmed message %s received %d times, want 1", body, got[body])
		}
	}
	for body, n := range got {
		if !confirmed[body] {
			t.Errorf("received %s (%d times), never confirmed", body, n)
		}
	}
}
