// Package natsjs is a broker.Transport over NATS JetStream (nats.go's
// jetstream package).
//
// Topology, created or updated by Open for Options{Stream: S, Subject: T,
// Consumer: C}:
//
//   - S: a file-storage stream on the literal subject T with work-queue
//     retention (a message is removed once acknowledged or terminated), so a
//     Transport is one queue, as on RabbitMQ and SQS. Fan-out is one stream
//     per subscriber.
//   - C: a durable pull consumer on S with explicit ack, AckWait and
//     MaxDeliver from Options.
//   - S_DEAD on subject T.dead (Options.DeadStream, Options.DeadSubject): the
//     dead-letter stream, file storage, work-queue retention, read through the
//     durable pull consumer C_DEAD (ReceiveDead).
//
// Choices:
//   - Publish sends every message with PublishMsgAsync (expecting stream S,
//     a random Nats-Msg-Id) and waits for every PubAck; a message without one
//     is named in a broker.PublishError.
//   - Attributes are NATS headers, name and value unchanged (nats.go keeps
//     header case). Names must be non-empty, without ':', spaces or control
//     characters, and not start with "Nats-"; values must not contain CR or
//     LF or begin or end with blanks (NATS trims them). Headers starting with
//     "Nats-" are not returned as attributes.
//   - Receive pulls one message with a bounded wait (Options.FetchWait, cut
//     to the context's deadline so no message is pulled and then abandoned),
//     then whatever else is immediately available, up to max. A cancelled
//     context without a deadline is noticed within FetchWait.
//   - Ack is DoubleAck (the server confirms). Retry is NakWithDelay, Extend
//     InProgress, each followed by a flush of the connection.
//   - DeadLetter publishes a copy (headers kept, plus claimcheck-reason) to
//     T.dead, waits for its PubAck from S_DEAD, then Terms the original
//     (TermWithReason). If the process dies between the two, the original is
//     redelivered after AckWait and may be dead-lettered twice.
//   - Attempt is the consumer's NumDelivered for the message: retries and
//     redeliveries after AckWait both count.
//   - ID is the Nats-Msg-Id header (stable across retries), or S:sequence.
//   - MaxMessageSize counts broker.Size. The NATS wire size of a message is
//     smaller than broker.Size plus a small fixed header overhead; Open keeps
//     HeaderReserve bytes of the server's max_payload for it (and for the
//     reason header of a dead-letter copy). Default: 256 KiB or max_payload
//     minus HeaderReserve, whichever is smaller; more than that is ErrConfig.
//   - MaxDeliver defaults to unlimited: broker.Consume counts attempts and
//     dead-letters. A server-side MaxDeliver below ConsumeOptions.MaxAttempts
//     makes JetStream stop delivering a message without a dead letter.
//   - No reconnection logic of its own beyond nats.go's: unsettled
//     deliveries are redelivered after AckWait.
package natsjs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// DefaultMaxMessageSize is the default MaxMessageSize (SQS's default), if
// the server's max_payload allows it.
const DefaultMaxMessageSize = 256 << 10

// HeaderReserve is the part of the server's max_payload kept for NATS header
// framing, the Nats-Msg-Id header and a dead letter's reason header.
const HeaderReserve = 1 << 10

// Default option values.
const (
	DefaultAckWait   = 5 * time.Minute
	DefaultFetchWait = time.Second
)

// Options configure Open.
type Options struct {
	// Stream is the stream's name. Required: letters, digits, '-' and '_'.
	Stream string
	// Subject is the literal subject messages are published to. Required.
	Subject string
	// Consumer is the durable pull consumer's name. Required, like Stream.
	Consumer string
	// DeadStream and DeadSubject name the dead-letter stream and its
	// subject. Default Stream+"_DEAD" and Subject+".dead".
	DeadStream, DeadSubject string
	// MaxMessageSize in bytes, counted by broker.Size. Default
	// DefaultMaxMessageSize or the server's max_payload minus HeaderReserve,
	// whichever is smaller; more than the latter is ErrConfig.
	MaxMessageSize int64
	// MaxDeliver is the consumer's MaxDeliver. Default unlimited; see the
	// package doc.
	MaxDeliver int
	// AckWait is how long a delivery stays unsettled before JetStream
	// redelivers it (Extend restarts it). Default DefaultAckWait. It must
	// exceed a batch's worth of work in broker.Consume.
	AckWait time.Duration
	// FetchWait bounds one pull request of Receive. Default
	// DefaultFetchWait.
	FetchWait time.Duration
}

// Transport is a broker.Transport over one JetStream stream and consumer.
type Transport struct {
	opts Options
	nc   *nats.Conn
	js   jetstream.JetStream
	con  jetstream.Consumer
	dead jetstream.Consumer
}

var _ broker.Transport = (*Transport)(nil)
var _ broker.DeadLetterReader = (*Transport)(nil)

func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}

// Open connects to url (nats://host:port), creates or updates the streams
// and consumers described in the package doc and returns the transport.
func Open(ctx context.Context, url string, opts Options) (*Transport, error) {
	if opts.DeadStream == "" {
		opts.DeadStream = opts.Stream + "_DEAD"
	}
	if opts.DeadSubject == "" {
		opts.DeadSubject = opts.Subject + ".dead"
	}
	for _, n := range []string{opts.Stream, opts.Consumer, opts.DeadStream} {
		if !validName(n) {
			return nil, fmt.Errorf("natsjs: invalid stream or consumer name %q: %w", n, claimcheck.ErrConfig)
		}
	}
	for _, s := range []string{opts.Subject, opts.DeadSubject} {
		if !validSubject(s) {
			return nil, fmt.Errorf("natsjs: invalid subject %q (must be literal): %w", s, claimcheck.ErrConfig)
		}
	}
	if opts.Stream == opts.DeadStream || opts.Subject == opts.DeadSubject {
		return nil, fmt.Errorf("natsjs: dead-letter stream and subject must differ from the main ones: %w", claimcheck.ErrConfig)
	}
	if opts.AckWait <= 0 {
		opts.AckWait = DefaultAckWait
	}
	if opts.FetchWait <= 0 {
		opts.FetchWait = DefaultFetchWait
	}
	if opts.MaxDeliver <= 0 {
		opts.MaxDeliver = -1
	}
	nc, err := nats.Connect(url, nats.Name("claimcheck "+opts.Stream), nats.Timeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("natsjs: connect: %w", err)
	}
	limit := nc.MaxPayload() - HeaderReserve
	switch {
	case limit <= 0:
		nc.Close()
		return nil, fmt.Errorf("natsjs: server max_payload %d too small: %w", nc.MaxPayload(), claimcheck.ErrConfig)
	case opts.MaxMessageSize <= 0:
		opts.MaxMessageSize = min(DefaultMaxMessageSize, limit)
	case opts.MaxMessageSize > limit:
		nc.Close()
		return nil, fmt.Errorf("natsjs: MaxMessageSize %d exceeds the server's max_payload %d minus %d for headers: %w",
			opts.MaxMessageSize, nc.MaxPayload(), HeaderReserve, claimcheck.ErrConfig)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("natsjs: jetstream: %w", err)
	}
	t := &Transport{opts: opts, nc: nc, js: js}
	if err := t.declare(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return t, nil
}

func (t *Transport) declare(ctx context.Context) error {
	o := t.opts
	for _, s := range []struct{ name, subj string }{{o.Stream, o.Subject}, {o.DeadStream, o.DeadSubject}} {
		if _, err := t.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: s.name, Subjects: []string{s.subj}, Storage: jetstream.FileStorage,
			Retention: jetstream.WorkQueuePolicy, Description: "claimcheck",
		}); err != nil {
			return fmt.Errorf("natsjs: create stream %q: %w", s.name, err)
		}
	}
	con, err := t.js.CreateOrUpdateConsumer(ctx, o.Stream, jetstream.ConsumerConfig{
		Durable: o.Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: o.AckWait,
		MaxDeliver: o.MaxDeliver, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("natsjs: create consumer %q on %q: %w", o.Consumer, o.Stream, err)
	}
	dead, err := t.js.CreateOrUpdateConsumer(ctx, o.DeadStream, jetstream.ConsumerConfig{
		Durable: o.Consumer + "_DEAD", AckPolicy: jetstream.AckExplicitPolicy, AckWait: o.AckWait,
		MaxDeliver: -1, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("natsjs: create consumer %q on %q: %w", o.Consumer+"_DEAD", o.DeadStream, err)
	}
	t.con, t.dead = con, dead
	return nil
}

// MaxMessageSize implements broker.Transport.
func (t *Transport) MaxMessageSize() int64 { return t.opts.MaxMessageSize }

// Options returns the options in effect, defaults filled in.
func (t *Transport) Options() Options { return t.opts }

func checkAttrs(msgs []broker.Message) error {
	for i, m := range msgs {
		for k, v := range m.Attributes {
			if k == "" || strings.ContainsAny(k, ": \t") || strings.HasPrefix(strings.ToLower(k), "nats-") {
				return fmt.Errorf("natsjs: message #%d: invalid header name %q: %w", i, k, claimcheck.ErrConfig)
			}
			for _, r := range k {
				if r < 0x21 || r == 0x7f {
					return fmt.Errorf("natsjs: message #%d: invalid header name %q: %w", i, k, claimcheck.ErrConfig)
				}
			}
			if strings.ContainsAny(v, "\r\n") || strings.TrimSpace(v) != v {
				return fmt.Errorf("natsjs: message #%d: header %q: value %q cannot be carried by NATS: %w", i, k, v, claimcheck.ErrConfig)
			}
		}
	}
	return nil
}

// Publish implements broker.Transport: every message to Subject, each
// confirmed by a PubAck from Stream.
func (t *Transport) Publish(ctx context.Context, msgs []broker.Message) error {
	if err := broker.CheckSize(msgs, t.opts.MaxMessageSize); err != nil {
		return err
	}
	if err := checkAttrs(msgs); err != nil {
		return err
	}
	out := make([]*nats.Msg, len(msgs))
	for i, m := range msgs {
		h := nats.Header{}
		for k, v := range m.Attributes {
			h[k] = []string{v}
		}
		out[i] = &nats.Msg{Subject: t.opts.Subject, Header: h, Data: m.Body}
	}
	return t.publish(ctx, t.opts.Stream, out)
}

// publish sends out asynchronously, expecting stream, and waits for every
// PubAck.
func (t *Transport) publish(ctx context.Context, stream string, out []*nats.Msg) error {
	perr := &broker.PublishError{Failed: map[int]error{}, Total: len(out)}
	futs := make([]jetstream.PubAckFuture, len(out))
	for i, m := range out {
		if err := ctx.Err(); err != nil {
			perr.Failed[i] = err
			continue
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		if id == "" {
			id = newID()
		}
		f, err := t.js.PublishMsgAsync(m, jetstream.WithExpectStream(stream), jetstream.WithMsgID(id))
		if err != nil {
			perr.Failed[i] = err
			continue
		}
		futs[i] = f
	}
	for i, f := range futs {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			perr.Failed[i] = err
		case <-ctx.Done():
			perr.Failed[i] = fmt.Errorf("no PubAck: %w", ctx.Err())
		}
	}
	if len(perr.Failed) > 0 {
		return perr
	}
	return nil
}

// Receive implements broker.Transport.
func (t *Transport) Receive(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return t.receive(ctx, t.con, max)
}

// ReceiveDead implements broker.DeadLetterReader: deliveries from the
// dead-letter stream, settled with Ack.
func (t *Transport) ReceiveDead(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return t.receive(ctx, t.dead, max)
}

// minFetchWait is the shortest pull request sent; a context with less time
// left waits for its deadline without pulling.
const minFetchWait = 10 * time.Millisecond

func (t *Transport) receive(ctx context.Context, con jetstream.Consumer, max int) ([]*broker.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wait := t.opts.FetchWait
		if dl, ok := ctx.Deadline(); ok {
			// Leave a margin so the server expires the pull request before
			// the context does: a message pulled is never abandoned.
			left := time.Until(dl)
			wait = min(wait, left-min(left/10, 100*time.Millisecond))
			if wait < minFetchWait {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
		batch, err := con.Fetch(1, jetstream.FetchMaxWait(wait))
		if err != nil {
			return nil, fmt.Errorf("natsjs: fetch: %w", err)
		}
		out, err := drain(batch, nil)
		if err != nil {
			return out, err
		}
		if len(out) == 0 {
			continue
		}
		if max > 1 {
			more, err := con.FetchNoWait(max - 1)
			if err != nil {
				return out, nil // the one we have is settled by the caller
			}
			out, _ = drain(more, out)
		}
		return out, nil
	}
}

// drain reads batch to its end (bounded by the pull request's expiry).
func drain(batch jetstream.MessageBatch, out []*broker.Delivery) ([]*broker.Delivery, error) {
	for m := range batch.Messages() {
		out = append(out, toDelivery(m))
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		if len(out) > 0 {
			return out, nil
		}
		return nil, fmt.Errorf("natsjs: fetch: %w", err)
	}
	return out, nil
}

func toDelivery(m jetstream.Msg) *broker.Delivery {
	attrs := map[string]string{}
	for k, vs := range m.Headers() {
		if len(vs) == 0 || strings.HasPrefix(strings.ToLower(k), "nats-") {
			continue
		}
		attrs[k] = vs[0]
	}
	attempt := 1
	var id string
	if md, err := m.Metadata(); err == nil {
		if md.NumDelivered > 0 {
			attempt = int(md.NumDelivered)
		}
		id = md.Stream + ":" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	if mid := m.Headers().Get(jetstream.MsgIDHeader); mid != "" {
		id = mid
	}
	return &broker.Delivery{Message: broker.Message{Body: m.Data(), Attributes: attrs}, ID: id, Attempt: attempt, Handle: m}
}

func handle(d *broker.Delivery) (jetstream.Msg, error) {
	m, ok := d.Handle.(jetstream.Msg)
	if !ok || m == nil {
		return nil, errors.New("natsjs: delivery not from this transport")
	}
	return m, nil
}

// Ack implements broker.Transport with DoubleAck: the server confirms.
func (t *Transport) Ack(ctx context.Context, d *broker.Delivery) error {
	m, err := handle(d)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	if err := m.DoubleAck(ctx); err != nil {
		return fmt.Errorf("natsjs: ack %s: %w", d.ID, err)
	}
	return nil
}

// flush waits until the server has read everything sent so far.
func (t *Transport) flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	return t.nc.FlushWithContext(ctx)
}

// Retry implements broker.Transport with NakWithDelay.
func (t *Transport) Retry(ctx context.Context, d *broker.Delivery, delay time.Duration) error {
	m, err := handle(d)
	if err != nil {
		return err
	}
	if delay <= 0 {
		err = m.Nak()
	} else {
		err = m.NakWithDelay(delay)
	}
	if err == nil {
		err = t.flush(ctx)
	}
	if err != nil {
		return fmt.Errorf("natsjs: retry %s: %w", d.ID, err)
	}
	return nil
}

// DeadLetter implements broker.Transport: a copy to the dead-letter stream
// with the reason header, confirmed, then Term of the original.
func (t *Transport) DeadLetter(ctx context.Context, d *broker.Delivery, reason string) error {
	m, err := handle(d)
	if err != nil {
		return err
	}
	h := nats.Header{}
	for k, vs := range m.Headers() {
		if strings.HasPrefix(strings.ToLower(k), "nats-") && k != jetstream.MsgIDHeader {
			continue
		}
		h[k] = append([]string(nil), vs...)
	}
	h[broker.AttrReason] = []string{strings.TrimSpace(strings.NewReplacer("\r", " ", "\n", " ").Replace(reason))}
	cp := &nats.Msg{Subject: t.opts.DeadSubject, Header: h, Data: m.Data()}
	if err := t.publish(ctx, t.opts.DeadStream, []*nats.Msg{cp}); err != nil {
		return fmt.Errorf("natsjs: dead-letter %s: %w", d.ID, err)
	}
	if err := m.TermWithReason(reason); err != nil {
		return fmt.Errorf("natsjs: dead-letter %s: term: %w", d.ID, err)
	}
	if err := t.flush(ctx); err != nil {
		return fmt.Errorf("natsjs: dead-letter %s: term: %w", d.ID, err)
	}
	return nil
}

// Extend implements broker.Transport with InProgress, which restarts the
// delivery's AckWait (by is not used: the lease is always AckWait).
func (t *Transport) Extend(ctx context.Context, d *broker.Delivery, _ time.Duration) error {
	m, err := handle(d)
	if err != nil {
		return err
	}
	if err := m.InProgress(); err != nil {
		return fmt.Errorf("natsjs: extend %s: %w", d.ID, err)
	}
	if err := t.flush(ctx); err != nil {
		return fmt.Errorf("natsjs: extend %s: %w", d.ID, err)
	}
	return nil
}

// Close implements broker.Transport.
func (t *Transport) Close() error {
	t.nc.Close()
	return nil
}

// DeleteTopology deletes both streams, their consumers and messages (for
// tests and teardown).
func (t *Transport) DeleteTopology(ctx context.Context) error {
	var errs []error
	for _, s := range []string{t.opts.Stream, t.opts.DeadStream} {
		if err := t.js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, fmt.Errorf("natsjs: delete stream %q: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
