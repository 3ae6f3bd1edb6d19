package sqs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
)

var queueSeq atomic.Int64

// standInClient is a real SDK client pointed at the stand-in server.
func standInClient(s *standInSQS) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDSTANDIN", "standin-secret", ""),
	})
}

// openStandIn returns a transport on fresh queues of a fresh stand-in.
func openStandIn(t *testing.T, maxSize int64) (*Transport, *standInSQS) {
	t.Helper()
	s := newStandInSQS(t)
	n := queueSeq.Add(1)
	q := s.createQueue(fmt.Sprintf("claimcheck-%d", n), maxSize)
	dlq := s.createQueue(fmt.Sprintf("claimcheck-%d-dead", n), maxSize)
	tr, err := Open(t.Context(), Options{
		Client: standInClient(s), QueueURL: q, DeadLetterQueueURL: dlq,
		MaxMessageSize: maxSize, WaitTime: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, s
}

func TestConformanceAgainstStandIn(t *testing.T) {
	brokertest.RunConformance(t, func(t *testing.T) broker.Transport {
		tr, _ := openStandIn(t, 0)
		return tr
	})
}

func TestConformanceAgainstStandIn1MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	brokertest.RunConformance(t, func(t *testing.T) broker.Transport {
		tr, _ := openStandIn(t, MaxMessageSizeLimit)
		return tr
	})
}

func TestOpenOptions(t *testing.T) {
	c := awssqs.New(awssqs.Options{Region: "us-east-1"})
	for _, o := range []Options{
		{},
		{Client: c, QueueURL: "q"},
		{Client: c, QueueURL: "q", DeadLetterQueueURL: "q"},
		{Client: c, QueueURL: "q", DeadLetterQueueURL: "d", MaxMessageSize: MaxMessageSizeLimit + 1},
		{Client: c, QueueURL: "q", DeadLetterQueueURL: "d", MaxMessageSize: 100},
		{Client: c, QueueURL: "q", DeadLetterQueueURL: "d", VisibilityTimeout: 13 * time.Hour},
	} {
		if _, err := Open(t.Context(), o); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Open(%+v): %v, want ErrConfig", o, err)
		}
	}
	tr, err := Open(t.Context(), Options{Client: c, QueueURL: "q", DeadLetterQueueURL: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.MaxMessageSize() != 262144 {
		t.Errorf("default MaxMessageSize %d", tr.MaxMessageSize())
	}
}

// Publish splits into batches of at most 10 entries and at most
// MaxMessageSize bytes as SQS counts them; the stand-in refuses anything
// larger, so success means the split was right.
func TestPublishBatchesAgainstStandIn(t *testing.T) {
	tr, s := openStandIn(t, 0)
	ctx := t.Context()
	attrs := map[string]string{"claimcheck-kind": "k", "é": "€"}
	var msgs []broker.Message
	for i := range 25 {
		msgs = append(msgs, broker.Message{Body: fmt.Appendf(nil, "m%d", i), Attributes: attrs})
	}
	// Three messages of 100,000 bytes: no two fit one 262,144-byte batch
	// together with a third.
	big := int(100000 - broker.Size(broker.Message{Attributes: attrs}))
	for range 3 {
		msgs = append(msgs, broker.Message{Body: bytes.Repeat([]byte("b"), big), Attributes: attrs})
	}
	if err := tr.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	batches := append([]standInBatch(nil), s.batches...)
	s.mu.Unlock()
	total := 0
	for _, b := range batches {
		if b.entries > 10 || b.size > tr.MaxMessageSize() {
			t.Errorf("batch of %d entries, %d bytes", b.entries, b.size)
		}
		total += b.entries
	}
	if total != len(msgs) || len(batches) < 4 {
		t.Errorf("%d batches carrying %d entries, want ≥4 carrying %d", len(batches), total, len(msgs))
	}
	if v, _ := s.count(tr.QueueURL()); v != len(msgs) {
		t.Errorf("%d messages in the stand-in queue, want %d", v, len(msgs))
	}
	// The stand-in counts as SQS does: one byte over, refused.
	over := broker.Message{Body: bytes.Repeat([]byte("x"), int(tr.MaxMessageSize()-broker.Size(broker.Message{Attributes: attrs})+1)), Attributes: attrs}
	tr2, err := Open(ctx, Options{Client: standInClient(s), QueueURL: tr.QueueURL(), DeadLetterQueueURL: tr.DeadLetterQueueURL(), MaxMessageSize: MaxMessageSizeLimit})
	if err != nil {
		t.Fatal(err)
	}
	err = tr2.Publish(ctx, []broker.Message{over})
	var perr *broker.PublishError
	if !errors.As(err, &perr) || perr.Failed[0] == nil || !strings.Contains(err.Error(), "262144") {
		t.Errorf("stand-in accepted a message one byte over its maximum: %v", err)
	}
}

// A Failed entry in a SendMessageBatch response is an error naming it.
func TestPublishFailedEntryAgainstStandIn(t *testing.T) {
	tr, s := openStandIn(t, 0)
	s.failEntry = func(body string) bool { return body == "fail-me" }
	msgs := []broker.Message{{Body: []byte("ok-0")}, {Body: []byte("fail-me")}, {Body: []byte("ok-2")}}
	for i := range 12 {
		msgs = append(msgs, broker.Message{Body: fmt.Appendf(nil, "more-%d", i)})
	}
	msgs = append(msgs, broker.Message{Body: []byte("fail-me")})
	err := tr.Publish(t.Context(), msgs)
	var perr *broker.PublishError
	if !errors.As(err, &perr) {
		t.Fatalf("Publish: %v, want *PublishError", err)
	}
	if len(perr.Failed) != 2 || perr.Failed[1] == nil || perr.Failed[15] == nil || perr.Total != 16 {
		t.Errorf("Failed %v (total %d), want #1 and #15 of 16", perr.Failed, perr.Total)
	}
	if !strings.Contains(err.Error(), "InternalError") {
		t.Errorf("error %q does not carry the entry's code", err)
	}
	if v, _ := s.count(tr.QueueURL()); v != 14 {
		t.Errorf("%d messages queued, want 14", v)
	}
}

func TestPublishRefusesWhatSQSWouldAgainstStandIn(t *testing.T) {
	tr, s := openStandIn(t, 0)
	many := map[string]string{}
	for i := range 11 {
		many[fmt.Sprint("a", i)] = "v"
	}
	for _, m := range []broker.Message{
		{Body: []byte("x"), Attributes: many},
		{Body: []byte("x"), Attributes: map[string]string{"empty": ""}},
		{Body: []byte{0xff, 0xfe}},
	} {
		if err := tr.Publish(t.Context(), []broker.Message{{Body: []byte("first")}, m}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Publish(%v): %v, want ErrConfig", m.Attributes, err)
		}
	}
	if v, _ := s.count(tr.QueueURL()); v != 0 {
		t.Errorf("%d messages sent, want none", v)
	}
}

// Extend keeps a delivery invisible past its visibility timeout; the
// receipt handle is passed back unchanged (the stand-in accepts only the
// latest handle).
func TestExtendAgainstStandIn(t *testing.T) {
	s := newStandInSQS(t)
	q, dlq := s.createQueue("ext", 0), s.createQueue("ext-dead", 0)
	tr, err := Open(t.Context(), Options{Client: standInClient(s), QueueURL: q, DeadLetterQueueURL: dlq, VisibilityTimeout: time.Second, WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := tr.Publish(ctx, []broker.Message{{Body: []byte("long job")}}); err != nil {
		t.Fatal(err)
	}
	ds, err := tr.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Extend(ctx, ds[0], 3*time.Second); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if got, err := tr.Receive(rctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("redelivered during the extended lease: %v %v", got, err)
	}
	if err := tr.Ack(ctx, ds[0]); err != nil {
		t.Fatalf("Ack after Extend: %v", err)
	}
	if v, f := s.count(q); v+f != 0 {
		t.Errorf("queue not empty after Ack")
	}
	// Without Extend, the 1 s visibility timeout expires and SQS redelivers
	// with ApproximateReceiveCount 2.
	if err := tr.Publish(ctx, []broker.Message{{Body: []byte("abandoned")}}); err != nil {
		t.Fatal(err)
	}
	d1, err := tr.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := tr.Receive(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d2[0].ID != d1[0].ID || d2[0].Attempt != 2 {
		t.Errorf("redelivery id %s attempt %d, want %s attempt 2", d2[0].ID, d2[0].Attempt, d1[0].ID)
	}
	if err := tr.Ack(ctx, d1[0]); err == nil {
		t.Errorf("stand-in accepted a stale receipt handle")
	}
	if err := tr.Ack(ctx, d2[0]); err != nil {
		t.Fatal(err)
	}
}

func TestBatches(t *testing.T) {
	m := func(n int) broker.Message { return broker.Message{Body: bytes.Repeat([]byte("a"), n)} }
	msgs := []broker.Message{m(60), m(60), m(60), m(100), m(1)}
	got := fmt.Sprint(batches(msgs, 120))
	if want := "[[0 2] [2 3] [3 5]]"; got != want {
		t.Errorf("batches = %s, want %s", got, want)
	}
	var many []broker.Message
	for range 21 {
		many = append(many, m(1))
	}
	if got, want := fmt.Sprint(batches(many, 1000)), "[[0 10] [10 20] [20 21]]"; got != want {
		t.Errorf("batches = %s, want %s", got, want)
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{0: 0, -time.Second: 0, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 24 * time.Hour: 43200} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestVerifyAgainstStandIn(t *testing.T) {
	tr, s := openStandIn(t, 0)
	ctx := t.Context()
	if err := tr.Verify(ctx); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("Verify without a redrive policy: %v, want ErrConfig", err)
	}
	s.setRedrive(tr.QueueURL(), RedrivePolicy("arn:aws:sqs:us-east-1:000000000000:elsewhere", 30))
	if err := tr.Verify(ctx); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("Verify with a redrive policy to another queue: %v, want ErrConfig", err)
	}
	s.setRedrive(tr.QueueURL(), RedrivePolicy(s.arn(tr.DeadLetterQueueURL()), 30))
	if err := tr.Verify(ctx); err != nil {
		t.Errorf("Verify: %v", err)
	}
	big, err := Open(ctx, Options{Client: standInClient(s), QueueURL: tr.QueueURL(), DeadLetterQueueURL: tr.DeadLetterQueueURL(), MaxMessageSize: MaxMessageSizeLimit})
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Verify(ctx); !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "MaximumMessageSize") {
		t.Errorf("Verify of a 1 MiB transport on 256 KiB queues: %v, want ErrConfig", err)
	}
}
