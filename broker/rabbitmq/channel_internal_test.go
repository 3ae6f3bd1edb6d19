package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// TestChannelClosedOnLiveConnection: when the broker closes a channel but
// not the connection, the Transport reopens the channel on the same
// connection (no new dial), and a delivery from the closed consumer channel
// cannot be settled.
func TestChannelClosedOnLiveConnection(t *testing.T) {
	raw := testenv.Require(t, "CLAIMCHECK_TEST_AMQP_URL", "a RabbitMQ server, e.g. amqp://guest:guest@127.0.0.1:5672/")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tr, err := Open(ctx, raw, Options{Queue: fmt.Sprintf("cctest.chanclose.%d", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			tr.DeleteTopology()
		}
		tr.Close()
	})
	msg := func(b string) []broker.Message {
		return []broker.Message{{Body: []byte(b), Attributes: map[string]string{broker.AttrKind: "k"}}}
	}
	if err := tr.Publish(ctx, msg("one")); err != nil {
		t.Fatal(err)
	}
	ds, err := tr.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	held := ds[0]

	// Close both channels behind the Transport's back.
	tr.main.mu.Lock()
	tr.main.ch.Close()
	tr.main.mu.Unlock()
	tr.pubMu.Lock()
	tr.pub.Close()
	tr.pubMu.Unlock()

	err = tr.Ack(ctx, held)
	if !errors.Is(err, claimcheck.ErrUnavailable) || !strings.Contains(err.Error(), "broker will redeliver") {
		t.Fatalf("Ack of a delivery from a closed channel: %v, want ErrUnavailable saying the broker will redeliver it", err)
	}
	if err := tr.Publish(ctx, msg("two")); err != nil {
		t.Fatalf("Publish after its channel closed: %v", err)
	}
	got := map[string]int{}
	for len(got) < 2 {
		ds, err := tr.Receive(ctx, 2)
		if err != nil {
			t.Fatalf("Receive after its channel closed: %v", err)
		}
		for _, d := range ds {
			got[string(d.Body)]++
			if err := tr.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got["one"] != 1 || got["two"] != 1 {
		t.Errorf("received %v, want one and two once each", got)
	}
	if g := tr.generation(); g != 1 {
		t.Errorf("connection generation %d, want 1: a channel closing must not redial", g)
	}

	// After Close nothing reconnects, and calls fail at once.
	if err := tr.DeleteTopology(); err != nil {
		t.Errorf("delete topology: %v", err)
	}
	deleted = true
	tr.Close()
	start := time.Now()
	if err := tr.Publish(ctx, msg("three")); err == nil {
		t.Error("Publish after Close succeeded")
	}
	if _, err := tr.Receive(ctx, 1); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive after Close: %v, want an immediate error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("calls after Close took %v", d)
	}
}
