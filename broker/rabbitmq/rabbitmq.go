// Package rabbitmq is a broker.Transport over RabbitMQ (amqp091-go).
//
// Topology, declared by Open for a queue named Q (one queue per kind is the
// intended layout; a shared queue works too, see broker.Consume):
//
//   - Q: a durable quorum queue (x-queue-type=quorum) whose dead-letter
//     exchange is Q.dlx, so messages the broker itself gives up on (a
//     reject without requeue, a quorum delivery limit) are kept too.
//   - Q.dlx: a durable direct exchange, bound to Q.dead with routing key Q.
//   - Q.dead: the dead-letter queue (durable quorum).
//   - Q.retry: the delay queue (durable, classic): no consumers; each retried
//     message carries a per-message TTL (the AMQP expiration property) and
//     the queue dead-letters expired messages back to Q through the default
//     exchange. Nothing hot-loops: a retried message is out of Q until its
//     delay has passed.
//
// Choices:
//   - Publish uses publisher confirms on a dedicated channel and waits for
//     the confirm of every message; a nack or a channel closed before the
//     confirm is an error naming the message (broker.PublishError).
//   - DeadLetter publishes a copy to Q.dead (through Q.dlx) with the reason
//     as header claimcheck-reason, waits for its confirm, then acks the
//     original. A plain reject without requeue would also reach Q.dead via
//     Q.dlx, but RabbitMQ cannot attach a reason to it (x-death only says
//     "rejected"); the copy keeps the reason, at the price of a possible
//     duplicate dead letter if the process dies between confirm and ack.
//   - Retry publishes a copy to Q.retry with expiration = delay and header
//     claimcheck-attempt = Attempt+1, waits for its confirm, then acks the
//     original (at-least-once, same duplicate caveat). The delay queue
//     expires messages only at its head (RabbitMQ's per-message TTL rule),
//     so a short delay queued behind a longer one waits for it: delays are
//     lower bounds, at most the longest pending delay (broker.Consume caps
//     it with MaxRetryDelay).
//   - Attempt = claimcheck-attempt header (1 if absent) + the quorum queue's
//     x-delivery-count (redeliveries after a consumer died or a channel
//     closed without settling).
//   - MaxMessageSize is configured (default 256 KiB, broker.Size rules):
//     RabbitMQ accepts far larger messages but suffers from them.
//   - Extend is a no-op: RabbitMQ has no per-message lease; the
//     server-side consumer_timeout (30 min by default) closes a channel
//     holding an unacked delivery for longer, and must be set above the
//     longest job.
//   - No reconnection: if the connection drops, methods return errors and
//     the caller opens a new Transport; unsettled deliveries are redelivered.
package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// DefaultMaxMessageSize is the default MaxMessageSize: SQS's default, so a
// message that fits one fits the other.
const DefaultMaxMessageSize = 256 << 10

const attemptHeader = "claimcheck-attempt"

// Options configure Open.
type Options struct {
	// Queue is the queue's name (Q above). Required.
	Queue string
	// MaxMessageSize in bytes, counted by broker.Size. Default
	// DefaultMaxMessageSize.
	MaxMessageSize int64
	// Prefetch is the most unacked deliveries held at once. Default 32.
	Prefetch int
}

// Transport is a broker.Transport over one RabbitMQ queue.
type Transport struct {
	opts Options
	conn *amqp.Connection

	pubMu sync.Mutex
	pub   *amqp.Channel // confirm mode

	conMu sync.Mutex
	con   *amqp.Channel
	dels  <-chan amqp.Delivery

	deadMu   sync.Mutex
	deadCh   *amqp.Channel
	deadDels <-chan amqp.Delivery
}

var _ broker.Transport = (*Transport)(nil)
var _ broker.DeadLetterReader = (*Transport)(nil)

// Open connects to url (amqp://user:pass@host:port/vhost) and declares the
// topology for opts.Queue. Declaring is idempotent; a queue declared before
// with other arguments is an error from the broker (PRECONDITION_FAILED).
func Open(ctx context.Context, url string, opts Options) (*Transport, error) {
	if opts.Queue == "" || strings.HasPrefix(opts.Queue, "amq.") {
		return nil, fmt.Errorf("rabbitmq: invalid queue name %q: %w", opts.Queue, claimcheck.ErrConfig)
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if opts.Prefetch <= 0 {
		opts.Prefetch = 32
	}
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second), Properties: amqp.Table{"connection_name": "claimcheck " + opts.Queue}})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: connect: %w", err)
	}
	t := &Transport{opts: opts, conn: conn}
	if err := t.declare(); err != nil {
		conn.Close()
		return nil, err
	}
	pub, err := conn.Channel()
	if err == nil {
		err = pub.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("rabbitmq: publisher channel: %w", err)
	}
	t.pub = pub
	return t, nil
}

func (t *Transport) names() (q, dlx, dead, retry string) {
	q = t.opts.Queue
	return q, q + ".dlx", q + ".dead", q + ".retry"
}

func (t *Transport) declare() error {
	ch, err := t.conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: declare: %w", err)
	}
	defer ch.Close()
	q, dlx, dead, retry := t.names()
	steps := []func() error{
		func() error { return ch.ExchangeDeclare(dlx, amqp.ExchangeDirect, true, false, false, false, nil) },
		func() error {
			_, err := ch.QueueDeclare(dead, true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum})
			return err
		},
		func() error { return ch.QueueBind(dead, q, dlx, false, nil) },
		func() error {
			_, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{
				amqp.QueueTypeArg:           amqp.QueueTypeQuorum,
				"x-dead-letter-exchange":    dlx,
				"x-dead-letter-routing-key": q,
			})
			return err
		},
		func() error {
			_, err := ch.QueueDeclare(retry, true, false, false, false, amqp.Table{
				amqp.QueueTypeArg:           amqp.QueueTypeClassic,
				"x-dead-letter-exchange":    "",
				"x-dead-letter-routing-key": q,
			})
			return err
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("rabbitmq: declare topology of %q: %w", q, err)
		}
	}
	return nil
}

// MaxMessageSize implements broker.Transport.
func (t *Transport) MaxMessageSize() int64 { return t.opts.MaxMessageSize }

// Queue returns the main queue's name.
func (t *Transport) Queue() string { return t.opts.Queue }

type outMsg struct {
	exchange, key string
	pub           amqp.Publishing
}

// Publish implements broker.Transport: persistent messages to Q, each
// confirmed by the broker.
func (t *Transport) Publish(ctx context.Context, msgs []broker.Message) error {
	if err := broker.CheckSize(msgs, t.opts.MaxMessageSize); err != nil {
		return err
	}
	out := make([]outMsg, len(msgs))
	for i, m := range msgs {
		h := amqp.Table{}
		for k, v := range m.Attributes {
			h[k] = v
		}
		out[i] = outMsg{"", t.opts.Queue, amqp.Publishing{
			Headers: h, Body: m.Body, DeliveryMode: amqp.Persistent,
			MessageId: newID(), Timestamp: time.Now().UTC(), ContentType: "application/json",
		}}
	}
	return t.publish(ctx, out)
}

// publish sends out on the confirm channel and waits for every confirm.
func (t *Transport) publish(ctx context.Context, out []outMsg) error {
	t.pubMu.Lock()
	defer t.pubMu.Unlock()
	perr := &broker.PublishError{Failed: map[int]error{}, Total: len(out)}
	confs := make([]*amqp.DeferredConfirmation, len(out))
	for i, m := range out {
		if err := ctx.Err(); err != nil {
			perr.Failed[i] = err
			continue
		}
		dc, err := t.pub.PublishWithDeferredConfirmWithContext(ctx, m.exchange, m.key, false, false, m.pub)
		if err != nil {
			perr.Failed[i] = err
			continue
		}
		confs[i] = dc
	}
	for i, dc := range confs {
		if dc == nil {
			continue
		}
		ok, err := dc.WaitContext(ctx)
		switch {
		case err != nil:
			perr.Failed[i] = err
		case !ok:
			perr.Failed[i] = errors.New("rabbitmq: nacked by the broker")
		}
	}
	if len(perr.Failed) > 0 {
		return perr
	}
	return nil
}

// Receive implements broker.Transport.
func (t *Transport) Receive(ctx context.Context, max int) ([]*broker.Delivery, error) {
	t.conMu.Lock()
	defer t.conMu.Unlock()
	if t.dels == nil {
		ch, dels, err := t.consume(t.opts.Queue)
		if err != nil {
			return nil, err
		}
		t.con, t.dels = ch, dels
	}
	return receive(ctx, t.dels, max)
}

// ReceiveDead implements broker.DeadLetterReader: deliveries from Q.dead.
func (t *Transport) ReceiveDead(ctx context.Context, max int) ([]*broker.Delivery, error) {
	t.deadMu.Lock()
	defer t.deadMu.Unlock()
	if t.deadDels == nil {
		_, _, dead, _ := t.names()
		ch, dels, err := t.consume(dead)
		if err != nil {
			return nil, err
		}
		t.deadCh, t.deadDels = ch, dels
	}
	return receive(ctx, t.deadDels, max)
}

func (t *Transport) consume(queue string) (*amqp.Channel, <-chan amqp.Delivery, error) {
	ch, err := t.conn.Channel()
	if err != nil {
		return nil, nil, fmt.Errorf("rabbitmq: consumer channel: %w", err)
	}
	if err := ch.Qos(t.opts.Prefetch, 0, false); err != nil {
		ch.Close()
		return nil, nil, fmt.Errorf("rabbitmq: qos: %w", err)
	}
	dels, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		ch.Close()
		return nil, nil, fmt.Errorf("rabbitmq: consume %q: %w", queue, err)
	}
	return ch, dels, nil
}

func receive(ctx context.Context, dels <-chan amqp.Delivery, max int) ([]*broker.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	var out []*broker.Delivery
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case d, ok := <-dels:
		if !ok {
			return nil, errors.New("rabbitmq: consumer channel closed")
		}
		out = append(out, toDelivery(d))
	}
	for len(out) < max {
		select {
		case d, ok := <-dels:
			if !ok {
				return out, nil
			}
			out = append(out, toDelivery(d))
		default:
			return out, nil
		}
	}
	return out, nil
}

func toDelivery(d amqp.Delivery) *broker.Delivery {
	attrs := map[string]string{}
	attempt := 1
	for k, v := range d.Headers {
		switch {
		case k == attemptHeader:
			if n, ok := toInt(v); ok && n > 0 {
				attempt = n
			}
		case strings.HasPrefix(k, "x-"):
		default:
			if s, ok := v.(string); ok {
				attrs[k] = s
			}
		}
	}
	if n, ok := toInt(d.Headers["x-delivery-count"]); ok && n > 0 {
		attempt += n
	}
	id := d.MessageId
	if id == "" {
		id = strconv.FormatUint(d.DeliveryTag, 10)
	}
	return &broker.Delivery{Message: broker.Message{Body: d.Body, Attributes: attrs}, ID: id, Attempt: attempt, Handle: d}
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int8:
		return int(n), true
	case int16:
		return int(n), true
	case int32:
		return int(n), true
	case int64:
		return int(n), true
	case uint8:
		return int(n), true
	case uint16:
		return int(n), true
	case uint32:
		return int(n), true
	}
	return 0, false
}

func handle(d *broker.Delivery) (amqp.Delivery, error) {
	ad, ok := d.Handle.(amqp.Delivery)
	if !ok {
		return amqp.Delivery{}, errors.New("rabbitmq: delivery not from this transport")
	}
	return ad, nil
}

// Ack implements broker.Transport.
func (t *Transport) Ack(_ context.Context, d *broker.Delivery) error {
	ad, err := handle(d)
	if err != nil {
		return err
	}
	if err := ad.Ack(false); err != nil {
		return fmt.Errorf("rabbitmq: ack %s: %w", d.ID, err)
	}
	return nil
}

// copyOf republishes d's message with its claimcheck headers and extra.
func copyOf(ad amqp.Delivery, extra amqp.Table) amqp.Publishing {
	h := amqp.Table{}
	for k, v := range ad.Headers {
		if !strings.HasPrefix(k, "x-") {
			h[k] = v
		}
	}
	for k, v := range extra {
		h[k] = v
	}
	return amqp.Publishing{
		Headers: h, Body: ad.Body, DeliveryMode: amqp.Persistent, MessageId: ad.MessageId,
		Timestamp: ad.Timestamp, ContentType: ad.ContentType,
	}
}

// Retry implements broker.Transport through Q.retry (see the package doc).
func (t *Transport) Retry(ctx context.Context, d *broker.Delivery, delay time.Duration) error {
	ad, err := handle(d)
	if err != nil {
		return err
	}
	p := copyOf(ad, amqp.Table{attemptHeader: int32(d.Attempt + 1)})
	p.Expiration = strconv.FormatInt(max(delay.Milliseconds(), 0), 10)
	_, _, _, retry := t.names()
	if err := t.publish(ctx, []outMsg{{"", retry, p}}); err != nil {
		return fmt.Errorf("rabbitmq: retry %s: %w", d.ID, err)
	}
	return t.Ack(ctx, d)
}

// DeadLetter implements broker.Transport through Q.dlx (see the package doc).
func (t *Transport) DeadLetter(ctx context.Context, d *broker.Delivery, reason string) error {
	ad, err := handle(d)
	if err != nil {
		return err
	}
	p := copyOf(ad, amqp.Table{broker.AttrReason: reason, attemptHeader: int32(d.Attempt)})
	q, dlx, _, _ := t.names()
	if err := t.publish(ctx, []outMsg{{dlx, q, p}}); err != nil {
		return fmt.Errorf("rabbitmq: dead-letter %s: %w", d.ID, err)
	}
	return t.Ack(ctx, d)
}

// Extend implements broker.Transport: a no-op (see the package doc).
func (t *Transport) Extend(context.Context, *broker.Delivery, time.Duration) error { return nil }

// Close implements broker.Transport.
func (t *Transport) Close() error {
	if err := t.conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("rabbitmq: close: %w", err)
	}
	return nil
}

// DeleteTopology deletes Q, Q.retry, Q.dead and Q.dlx with whatever they
// hold (for tests and teardown).
func (t *Transport) DeleteTopology() error {
	ch, err := t.conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: delete topology: %w", err)
	}
	defer ch.Close()
	q, dlx, dead, retry := t.names()
	var errs []error
	for _, name := range []string{q, retry, dead} {
		if _, err := ch.QueueDelete(name, false, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ch.ExchangeDelete(dlx, false, false); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
