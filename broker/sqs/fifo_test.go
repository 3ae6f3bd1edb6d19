package sqs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// On FIFO queues Publish sets MessageGroupId to the tenant and
// MessageDeduplicationId to AttrID, so the stand-in (which requires both on
// a FIFO queue) drops a second publish of the same id; DeadLetter's copy
// carries the group and the SQS MessageId as deduplication id.
func TestFIFOAgainstStandIn(t *testing.T) {
	s := newStandInSQS(t)
	n := queueSeq.Add(1)
	q := s.createQueue(fmt.Sprintf("claimcheck-%d.fifo", n), 0)
	dlq := s.createQueue(fmt.Sprintf("claimcheck-%d-dead.fifo", n), 0)
	tr, err := Open(t.Context(), Options{Client: standInClient(s), QueueURL: q, DeadLetterQueueURL: dlq, WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.FIFO() {
		t.Fatal("FIFO queue not detected")
	}
	ctx := t.Context()
	msg := func(tenant, id string) broker.Message {
		a := map[string]string{broker.AttrKind: "k", broker.AttrTenant: tenant}
		if id != "" {
			a[broker.AttrID] = id
		}
		return broker.Message{Body: []byte(tenant + "/" + id), Attributes: a}
	}
	if err := tr.Publish(ctx, []broker.Message{msg("acme", "cc-1"), msg("globex", "cc-2"), msg("acme", "cc-1")}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(ctx, []broker.Message{msg("acme", "cc-2")}); err != nil { // same id, another tenant: still a duplicate
		t.Fatal(err)
	}
	groups, dedups := s.fifoIDs(q)
	if got, want := fmt.Sprint(groups, dedups), "[acme globex] [cc-1 cc-2]"; got != want {
		t.Errorf("queued groups and dedup ids %s, want %s", got, want)
	}
	// A message without AttrID goes without MessageDeduplicationId, which
	// this queue (no content-based deduplication) refuses.
	err = tr.Publish(ctx, []broker.Message{msg("acme", "")})
	var perr *broker.PublishError
	if !errors.As(err, &perr) || !strings.Contains(err.Error(), "ContentBasedDeduplication") {
		t.Errorf("Publish without AttrID to a FIFO queue: %v, want the queue's refusal", err)
	}
	// No tenant, or ids SQS would refuse: ErrConfig before anything is sent.
	for _, m := range []broker.Message{
		{Body: []byte("no tenant"), Attributes: map[string]string{broker.AttrID: "cc-3"}},
		msg("acme", "cc 4"),
		msg("acme", strings.Repeat("x", 129)),
	} {
		if err := tr.Publish(ctx, []broker.Message{msg("acme", "cc-5"), m}); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Publish(%v): %v, want ErrConfig", m.Attributes, err)
		}
	}
	if v, f := s.count(q); v+f != 2 {
		t.Errorf("%d messages queued, want 2", v+f)
	}

	ds, err := tr.Receive(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if err := tr.DeadLetter(ctx, d, "poison"); err != nil {
			t.Fatalf("DeadLetter: %v", err)
		}
	}
	groups, dedups = s.fifoIDs(dlq)
	if len(groups) != len(ds) {
		t.Fatalf("%d dead letters, want %d", len(groups), len(ds))
	}
	for i, d := range ds {
		if groups[i] != d.Attributes[broker.AttrTenant] || dedups[i] != d.ID {
			t.Errorf("dead letter #%d: group %q dedup %q, want %q %q", i, groups[i], dedups[i], d.Attributes[broker.AttrTenant], d.ID)
		}
	}
	dead, err := tr.ReceiveDead(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dead {
		if d.Attributes[broker.AttrReason] != "poison" || d.Attributes[broker.AttrID] == "" {
			t.Errorf("dead letter attributes %v", d.Attributes)
		}
	}
}

func TestOpenRefusesMixedFIFO(t *testing.T) {
	s := newStandInSQS(t)
	for _, c := range [][2]string{{"a.fifo", "b"}, {"a", "b.fifo"}} {
		_, err := Open(t.Context(), Options{Client: standInClient(s), QueueURL: s.createQueue(c[0], 0), DeadLetterQueueURL: s.createQueue(c[1], 0)})
		if !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Open(%s, %s): %v, want ErrConfig", c[0], c[1], err)
		}
	}
}
