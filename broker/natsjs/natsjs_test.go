package natsjs_test

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
	"github.com/claimcheck/claimcheck/broker/natsjs"
)

// natsURL returns CLAIMCHECK_TEST_NATS_URL or skips the test.
func natsURL(t *testing.T) string {
	return brokertest.ServerURL(t, "CLAIMCHECK_TEST_NATS_URL", "nats://127.0.0.1:4222, a server with JetStream")
}

// uniqueOptions names a stream, subject and consumer after the test.
func uniqueOptions(t *testing.T) natsjs.Options {
	var b strings.Builder
	for _, r := range t.Name() {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := fmt.Sprintf("cctest_%s_%d", b.String(), time.Now().UnixNano())
	return natsjs.Options{Stream: name, Subject: "cctest." + name, Consumer: "worker"}
}

func open(t *testing.T, opts natsjs.Options) *natsjs.Transport {
	t.Helper()
	u := natsURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := natsjs.Open(ctx, u, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tr.DeleteTopology(ctx); err != nil {
			t.Errorf("delete topology: %v", err)
		}
		if err := tr.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return tr
}

func newTransport(t *testing.T) broker.Transport {
	opts := uniqueOptions(t)
	opts.MaxMessageSize = 64 << 10
	return open(t, opts)
}

func TestConformance(t *testing.T) {
	natsURL(t)
	brokertest.RunConformance(t, newTransport)
}

func TestDefaultsAndValidation(t *testing.T) {
	u := natsURL(t)
	for _, o := range []natsjs.Options{
		{},
		{Stream: "a.b", Subject: "x", Consumer: "c"},
		{Stream: "a", Subject: "x.*", Consumer: "c"},
		{Stream: "a", Subject: "x", Consumer: ""},
		{Stream: "a", Subject: "x", Consumer: "c", MaxMessageSize: 1 << 40},
	} {
		if _, err := natsjs.Open(t.Context(), u, o); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Open(%+v): %v, want ErrConfig", o, err)
		}
	}
	tr := open(t, uniqueOptions(t))
	if tr.MaxMessageSize() != natsjs.DefaultMaxMessageSize {
		t.Errorf("MaxMessageSize %d, want %d", tr.MaxMessageSize(), natsjs.DefaultMaxMessageSize)
	}
	o := tr.Options()
	if o.DeadStream != o.Stream+"_DEAD" || o.DeadSubject != o.Subject+".dead" || o.AckWait != natsjs.DefaultAckWait {
		t.Errorf("defaults: %+v", o)
	}
	// Header names NATS cannot carry are refused before anything is sent.
	err := tr.Publish(t.Context(), []broker.Message{{Body: []byte("x"), Attributes: map[string]string{"bad name": "v"}}})
	if !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("Publish with a bad header name: %v, want ErrConfig", err)
	}
	// Opening again (another process, same topology) updates, not fails.
	again := open(t, o)
	_ = again
}

// TestRedeliveryCountsAttempt: a delivery never settled (the consumer died)
// comes back after AckWait with its attempt incremented; Extend holds it.
func TestRedeliveryCountsAttempt(t *testing.T) {
	u := natsURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := uniqueOptions(t)
	opts.AckWait = time.Second
	first, err := natsjs.Open(ctx, u, opts)
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
	// Extend twice across more than AckWait: no redelivery meanwhile.
	for range 3 {
		time.Sleep(600 * time.Millisecond)
		if err := first.Extend(ctx, ds[0], time.Second); err != nil {
			t.Fatal(err)
		}
	}
	first.Close() // dies without settling
	second := open(t, opts)
	ds2, err := second.Receive(ctx, 1)
	if err != nil || len(ds2) != 1 {
		t.Fatalf("second receive: %v %v", ds2, err)
	}
	if ds2[0].Attempt != 2 {
		t.Errorf("redelivered with attempt %d, want 2", ds2[0].Attempt)
	}
	if ds2[0].ID != ds[0].ID {
		t.Errorf("ID changed across redelivery: %s → %s", ds[0].ID, ds2[0].ID)
	}
	if err := second.Ack(ctx, ds2[0]); err != nil {
		t.Fatal(err)
	}
}

// TestReceiveBatch: Receive returns what is available up to max without
// waiting for a full batch.
func TestReceiveBatch(t *testing.T) {
	tr := open(t, uniqueOptions(t))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	msgs := make([]broker.Message, 5)
	for i := range msgs {
		msgs[i] = broker.Message{Body: fmt.Appendf(nil, "%d", i), Attributes: map[string]string{broker.AttrKind: "k"}}
	}
	if err := tr.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ds, err := tr.Receive(ctx, 3)
	if err != nil || len(ds) != 3 {
		t.Fatalf("Receive(3): %d %v", len(ds), err)
	}
	ds2, err := tr.Receive(ctx, 10)
	if err != nil || len(ds2) != 2 {
		t.Fatalf("Receive(10) with 2 left: %d %v", len(ds2), err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("two receives took %v", el)
	}
	for _, d := range append(ds, ds2...) {
		if err := tr.Ack(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// A cancelled context without a deadline ends Receive within FetchWait.
	cctx, ccancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, ccancel)
	start = time.Now()
	if _, err := tr.Receive(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Receive after cancel: %v", err)
	}
	if el := time.Since(start); el > natsjs.DefaultFetchWait+2*time.Second {
		t.Errorf("cancelled Receive took %v", el)
	}
}

// TestPublishErrorNamesMessages: without a stream to store them, every
// message of the call is named in a *broker.PublishError.
func TestPublishErrorNamesMessages(t *testing.T) {
	tr := open(t, uniqueOptions(t))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := tr.DeleteTopology(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := []broker.Message{{Body: []byte("a")}, {Body: []byte("b")}}
	err := tr.Publish(ctx, msgs)
	var perr *broker.PublishError
	if !errors.As(err, &perr) || perr.Total != 2 || len(perr.Failed) != 2 {
		t.Fatalf("Publish without a stream: %v, want a PublishError naming #0 and #1", err)
	}
	t.Logf("%v", err)
}
