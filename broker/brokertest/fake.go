package brokertest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/claimcheck/claimcheck/broker"
)

// Fake is an in-process broker.Transport, a stand-in (not a broker) for tests of code above the
// seam, and the reference the conformance suite is checked against. It
// keeps nothing across processes and has no lease (Extend is a no-op).
type Fake struct {
	max    int64
	mu     sync.Mutex
	wake   chan struct{} // closed and replaced when a message arrives
	ready  []*memMsg
	dead   []*memMsg
	nextID int
	closed bool
}

type memMsg struct {
	m       broker.Message
	id      string
	attempt int
	dead    bool
}

// NewFake returns an empty Fake accepting messages up to max bytes.
func NewFake(max int64) *Fake { return &Fake{max: max, wake: make(chan struct{})} }

var _ broker.Transport = (*Fake)(nil)
var _ broker.DeadLetterReader = (*Fake)(nil)

func (q *Fake) MaxMessageSize() int64 { return q.max }

func (q *Fake) push(mm *memMsg) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if mm.dead {
		q.dead = append(q.dead, mm)
	} else {
		q.ready = append(q.ready, mm)
	}
	close(q.wake)
	q.wake = make(chan struct{})
}

func clone(m broker.Message) broker.Message {
	a := make(map[string]string, len(m.Attributes))
	for k, v := range m.Attributes {
		a[k] = v
	}
	var types map[string]string
	if m.Types != nil {
		types = make(map[string]string, len(m.Types))
		for k, v := range m.Types {
			types[k] = v
		}
	}
	return broker.Message{Body: append([]byte(nil), m.Body...), Attributes: a, Types: types}
}

func (q *Fake) Publish(ctx context.Context, msgs []broker.Message) error {
	if err := broker.CheckSize(msgs, q.max); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, m := range msgs {
		q.mu.Lock()
		q.nextID++
		id := strconv.Itoa(q.nextID)
		q.mu.Unlock()
		q.push(&memMsg{m: clone(m), id: id, attempt: 1})
	}
	return nil
}

func (q *Fake) receive(ctx context.Context, max int, dead bool) ([]*broker.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, errors.New("brokertest: memory transport closed")
		}
		src := &q.ready
		if dead {
			src = &q.dead
		}
		if n := min(len(*src), max); n > 0 {
			out := make([]*broker.Delivery, n)
			for i, mm := range (*src)[:n] {
				out[i] = &broker.Delivery{Message: clone(mm.m), ID: mm.id, Attempt: mm.attempt, Handle: mm}
			}
			*src = (*src)[n:]
			q.mu.Unlock()
			return out, nil
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

func (q *Fake) Receive(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return q.receive(ctx, max, false)
}

// ReceiveDead implements broker.DeadLetterReader.
func (q *Fake) ReceiveDead(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return q.receive(ctx, max, true)
}

func (q *Fake) Ack(context.Context, *broker.Delivery) error { return nil }

func (q *Fake) Retry(_ context.Context, d *broker.Delivery, delay time.Duration) error {
	mm := &memMsg{m: clone(d.Message), id: d.ID, attempt: d.Attempt + 1}
	time.AfterFunc(delay, func() { q.push(mm) })
	return nil
}

func (q *Fake) DeadLetter(_ context.Context, d *broker.Delivery, reason string) error {
	m := clone(d.Message)
	m.Attributes[broker.AttrReason] = reason
	q.push(&memMsg{m: m, id: d.ID, attempt: d.Attempt, dead: true})
	return nil
}

func (q *Fake) Extend(context.Context, *broker.Delivery, time.Duration) error { return nil }

func (q *Fake) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	close(q.wake)
	q.wake = make(chan struct{})
	return nil
}
