// Package sqs is a broker.Transport over Amazon SQS (aws-sdk-go-v2
// service/sqs, imported here as awssqs).
//
// Layout: one SQS queue (Options.QueueURL) and its dead-letter queue
// (Options.DeadLetterQueueURL), both standard or both FIFO (see "FIFO
// queues" below). Both must exist; Open creates nothing. The
// main queue should have a redrive policy naming the dead-letter queue with a
// maxReceiveCount above the consumer's MaxAttempts: SQS then moves on its own
// any message received more than maxReceiveCount times without being deleted
// (a consumer that keeps crashing), without a claimcheck-reason attribute.
//
// Choices:
//   - Publish sends SendMessageBatch requests of at most 10 entries and at
//     most MaxMessageSize bytes in total, counted as SQS counts (body plus
//     every attribute's name, "String" and value: broker.Size). Every entry
//     of every response is checked: an entry in Failed, or missing from
//     both Successful and Failed, is named in a *broker.PublishError, as are
//     the entries of a batch whose request failed as a whole.
//   - Attributes travel as MessageAttributes of DataType String (or the
//     type broker.Message.Types gives, such as Number for the AWS pointer's
//     size marker; Receive reads the type back, and DeadLetter's copy keeps
//     it), every one unchanged, broker.AttrID included (SQS's own MessageId is assigned by
//     SQS, so the producer's id stays an attribute). SQS allows at most 10
//     per message and no empty values; Publish refuses such messages before
//     sending anything.
//   - Receive long-polls (Options.WaitTime, default 20 s, SQS's maximum,
//     never past the context's deadline) with MessageAttributeNames ["All"]
//     and MessageSystemAttributeNames ["ApproximateReceiveCount"], which
//     becomes Delivery.Attempt. ID is the SQS MessageId, stable across
//     retries. A Receive cancelled mid-poll gives back, at once, any message
//     SQS hands its abandoned long poll (poll).
//   - The Delivery's Handle holds the receipt handle of that receive,
//     passed back to SQS unchanged, and the queue it came from.
//   - Ack = DeleteMessage.
//   - Retry = ChangeMessageVisibility(delay), rounded up to whole seconds
//     and capped at SQS's 12 hours: the message stays in the queue and
//     becomes visible again after the delay; its ApproximateReceiveCount,
//     and so Attempt, goes up by one on the next receive. Nothing hot-loops.
//   - DeadLetter = SendMessage of a copy, with the attributes plus
//     claimcheck-reason, to the dead-letter queue, then DeleteMessage of the
//     original (a duplicate dead letter is possible if the process dies in
//     between). The copy is one attribute larger than the original: a
//     message that was already at the size or attribute-count limit cannot
//     be copied, DeadLetter returns the error and the redrive policy is left
//     to move it. Leave room for claimcheck-reason (MaxMessageOverhead plus
//     about 60 bytes), or give the dead-letter queue a larger maximum.
//   - Extend = ChangeMessageVisibility(by): SQS counts the new timeout from
//     now, which is what Extend promises. Lease (broker.Leaser) is the
//     visibility timeout Receive asks for, or the queue's own, so
//     broker.Consume extends before it runs out.
//   - ReceiveDead (broker.DeadLetterReader) receives from the dead-letter
//     queue; Ack of such a delivery deletes it from there.
//   - Verify checks, with GetQueueAttributes, that both queues accept
//     MaxMessageSize and that the main queue's redrive policy targets the
//     dead-letter queue; RedrivePolicy builds that policy's JSON.
//   - SQS caps a message's total visibility at 12 hours from its first
//     receive; a Retry or Extend past that fails with SQS's error.
//   - Bodies travel as strings: SQS accepts only XML-legal Unicode, so a
//     body must be valid UTF-8 text (tickets are JSON).
//
// FIFO queues: a queue whose URL ends in ".fifo" is a FIFO queue, and then
// its dead-letter queue must be one too (SQS requires it; Open refuses a
// mix). On a FIFO queue:
//   - Publish sets each message's MessageGroupId to its broker.AttrTenant
//     attribute (required: a message without one is refused with
//     claimcheck.ErrConfig before anything is sent), so SQS orders each
//     tenant's messages, and its MessageDeduplicationId to its
//     broker.AttrID attribute, so SQS drops a second publish of the same
//     outbox entry within its 5-minute deduplication interval. A message
//     without AttrID is sent without a MessageDeduplicationId, which SQS
//     accepts only if the queue has ContentBasedDeduplication. Both ids
//     must be 1 to 128 characters of printable ASCII other than space.
//   - DeadLetter's copy carries the same MessageGroupId (or "claimcheck" if
//     the delivery has no usable tenant) and, as MessageDeduplicationId,
//     the delivery's SQS MessageId, so a copy sent again after a crash
//     between the send and the delete is dropped within 5 minutes.
//   - SQS delivers no message of a group while another of that group is in
//     flight: a Retry with a delay, or a long Extend, holds back the rest
//     of that tenant's messages until that message is acknowledged or
//     dead-lettered.
//   - Each SendMessageBatch counts against FIFO throughput quotas (300
//     requests per second per API action without high-throughput mode).
//
// OpenURL and broker.Open("sqs://...") build the client from the standard
// AWS configuration chain; see OpenURL for the URL form.
package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// SQS limits.
const (
	// DefaultMaxMessageSize is SQS's default MaximumMessageSize (256 KiB).
	DefaultMaxMessageSize = 262144
	// MaxMessageSizeLimit is the largest MaximumMessageSize SQS allows (1 MiB).
	MaxMessageSizeLimit = 1 << 20
	// MinMessageSize is the smallest MaximumMessageSize SQS allows.
	MinMessageSize = 1024
	// MaxBatchEntries is the most entries in one SendMessageBatch.
	MaxBatchEntries = 10
	// MaxAttributes is the most message attributes per message.
	MaxAttributes = 10
	// MaxVisibilityTimeout is SQS's longest visibility timeout (12 hours).
	MaxVisibilityTimeout = 12 * time.Hour
	// MaxWaitTime is SQS's longest long-poll wait.
	MaxWaitTime = 20 * time.Second
	// maxReceive is the most messages one ReceiveMessage returns.
	maxReceive = 10
)

// Options configure Open.
type Options struct {
	// Client is the SQS client. Required.
	Client *awssqs.Client
	// QueueURL is the main queue. Required.
	QueueURL string
	// DeadLetterQueueURL is the dead-letter queue (the target of the main
	// queue's redrive policy). Required.
	DeadLetterQueueURL string
	// MaxMessageSize in bytes, counted by broker.Size: the queue's
	// MaximumMessageSize. Default DefaultMaxMessageSize; at most
	// MaxMessageSizeLimit. It also caps each SendMessageBatch's total.
	MaxMessageSize int64
	// VisibilityTimeout for received messages; 0 uses the queue's own.
	VisibilityTimeout time.Duration
	// WaitTime is the long-poll wait of each ReceiveMessage, rounded up to
	// whole seconds. Default and maximum 20 s.
	WaitTime time.Duration
}

// Transport is a broker.Transport over one SQS queue.
type Transport struct {
	opts      Options
	c         *awssqs.Client
	fifo      bool           // both queues are FIFO queues
	releasing sync.WaitGroup // abandoned polls giving back what they took (poll)
}

// IsFIFO reports whether queueURL names a FIFO queue: SQS requires FIFO
// queue names to end in ".fifo".
func IsFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }

// maxFIFOIDLen is the longest MessageGroupId or MessageDeduplicationId.
const maxFIFOIDLen = 128

// fifoDeadLetterGroup is the MessageGroupId of a dead-letter copy whose
// delivery has no usable tenant attribute.
const fifoDeadLetterGroup = "claimcheck"

// validFIFOID reports whether SQS accepts s as a MessageGroupId or
// MessageDeduplicationId: 1 to 128 of a-z, A-Z, 0-9 and ASCII punctuation.
func validFIFOID(s string) bool {
	if s == "" || len(s) > maxFIFOIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

var _ broker.Transport = (*Transport)(nil)
var _ broker.DeadLetterReader = (*Transport)(nil)
var _ broker.QueueNamer = (*Transport)(nil)
var _ broker.Leaser = (*Transport)(nil)

// Open checks opts and returns the transport. It makes no request: the
// queues must exist.
func Open(_ context.Context, opts Options) (*Transport, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("sqs: no client: %w", claimcheck.ErrConfig)
	}
	if opts.QueueURL == "" || opts.DeadLetterQueueURL == "" {
		return nil, fmt.Errorf("sqs: QueueURL and DeadLetterQueueURL are required: %w", claimcheck.ErrConfig)
	}
	if opts.QueueURL == opts.DeadLetterQueueURL {
		return nil, fmt.Errorf("sqs: the dead-letter queue must differ from the queue: %w", claimcheck.ErrConfig)
	}
	if IsFIFO(opts.QueueURL) != IsFIFO(opts.DeadLetterQueueURL) {
		return nil, fmt.Errorf("sqs: queue %s and dead-letter queue %s must be both FIFO (names ending in .fifo) or both standard: %w",
			opts.QueueURL, opts.DeadLetterQueueURL, claimcheck.ErrConfig)
	}
	if opts.MaxMessageSize == 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if opts.MaxMessageSize < MinMessageSize || opts.MaxMessageSize > MaxMessageSizeLimit {
		return nil, fmt.Errorf("sqs: MaxMessageSize %d outside SQS's %d..%d: %w", opts.MaxMessageSize, MinMessageSize, MaxMessageSizeLimit, claimcheck.ErrConfig)
	}
	if opts.VisibilityTimeout < 0 || opts.VisibilityTimeout > MaxVisibilityTimeout {
		return nil, fmt.Errorf("sqs: VisibilityTimeout %v outside 0..%v: %w", opts.VisibilityTimeout, MaxVisibilityTimeout, claimcheck.ErrConfig)
	}
	if opts.WaitTime <= 0 || opts.WaitTime > MaxWaitTime {
		opts.WaitTime = MaxWaitTime
	}
	return &Transport{opts: opts, c: opts.Client, fifo: IsFIFO(opts.QueueURL)}, nil
}

// MaxMessageSize implements broker.Transport.
func (t *Transport) MaxMessageSize() int64 { return t.opts.MaxMessageSize }

// MessagingSystem is OpenTelemetry's messaging.system: "aws_sqs" (broker.System).
func (t *Transport) MessagingSystem() string { return "aws_sqs" }

// QueueURL returns the main queue's URL.
func (t *Transport) QueueURL() string { return t.opts.QueueURL }

// Lease implements broker.Leaser: Options.VisibilityTimeout when set
// (Receive asks SQS for it), otherwise the main queue's own
// VisibilityTimeout attribute, read with GetQueueAttributes (SQS's
// default is 30 s). Errors: SQS's, wrapped; ErrConfig if the attribute
// does not parse.
func (t *Transport) Lease(ctx context.Context) (time.Duration, error) {
	if t.opts.VisibilityTimeout > 0 {
		return time.Duration(seconds(t.opts.VisibilityTimeout)) * time.Second, nil
	}
	name := types.QueueAttributeNameVisibilityTimeout
	out, err := t.c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(t.opts.QueueURL), AttributeNames: []types.QueueAttributeName{name}})
	if err != nil {
		return 0, fmt.Errorf("sqs: read the visibility timeout of %s: %w", t.opts.QueueURL, err)
	}
	n, err := strconv.Atoi(out.Attributes[string(name)])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("sqs: queue %s has VisibilityTimeout %q, not a number of seconds: %w", t.opts.QueueURL, out.Attributes[string(name)], claimcheck.ErrConfig)
	}
	return time.Duration(n) * time.Second, nil
}

// QueueName implements broker.QueueNamer: "sqs:" and the main queue's URL.
func (t *Transport) QueueName() string { return "sqs:" + t.opts.QueueURL }

// DeadLetterQueueURL returns the dead-letter queue's URL.
func (t *Transport) DeadLetterQueueURL() string { return t.opts.DeadLetterQueueURL }

// Options returns the options the transport was opened with, defaults
// applied.
func (t *Transport) Options() Options { return t.opts }

// FIFO reports whether the transport's queues are FIFO queues.
func (t *Transport) FIFO() bool { return t.fifo }

func checkAttributes(msgs []broker.Message) error {
	for i, m := range msgs {
		if len(m.Attributes) > MaxAttributes {
			return fmt.Errorf("sqs: message #%d has %d attributes, SQS allows %d: %w", i, len(m.Attributes), MaxAttributes, claimcheck.ErrConfig)
		}
		for k, v := range m.Attributes {
			if k == "" || v == "" {
				return fmt.Errorf("sqs: message #%d: attribute %q: SQS refuses empty names and values: %w", i, k, claimcheck.ErrConfig)
			}
		}
		if !utf8.Valid(m.Body) {
			return fmt.Errorf("sqs: message #%d: body is not valid UTF-8: %w", i, claimcheck.ErrConfig)
		}
	}
	return nil
}

// checkFIFO refuses, on a FIFO queue, messages without a tenant usable as
// MessageGroupId or with an AttrID unusable as MessageDeduplicationId.
func checkFIFO(msgs []broker.Message) error {
	for i, m := range msgs {
		if g := m.Attributes[broker.AttrTenant]; !validFIFOID(g) {
			return fmt.Errorf("sqs: message #%d: a FIFO queue needs a %s attribute of 1 to %d printable ASCII characters for MessageGroupId, got %q: %w",
				i, broker.AttrTenant, maxFIFOIDLen, g, claimcheck.ErrConfig)
		}
		if id, ok := m.Attributes[broker.AttrID]; ok && !validFIFOID(id) {
			return fmt.Errorf("sqs: message #%d: %s %q cannot be a MessageDeduplicationId (1 to %d printable ASCII characters): %w",
				i, broker.AttrID, id, maxFIFOIDLen, claimcheck.ErrConfig)
		}
	}
	return nil
}

// nonEmpty returns &s, or nil for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// attributes are m's attributes as SQS message attributes, each of its
// data type (broker.Message.AttributeType: String unless Types says
// otherwise, such as the AWS pointer's Number-typed size marker).
func attributes(m broker.Message) map[string]types.MessageAttributeValue {
	if len(m.Attributes) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(m.Attributes))
	for k, v := range m.Attributes {
		out[k] = types.MessageAttributeValue{DataType: aws.String(m.AttributeType(k)), StringValue: aws.String(v)}
	}
	return out
}

// batches splits msgs into index ranges of at most MaxBatchEntries entries
// and at most max bytes (broker.Size) each. Every message is at most max.
func batches(msgs []broker.Message, limit int64) [][2]int {
	var out [][2]int
	start, size := 0, int64(0)
	for i, m := range msgs {
		s := broker.Size(m)
		if i > start && (i-start == MaxBatchEntries || size+s > limit) {
			out = append(out, [2]int{start, i})
			start, size = i, 0
		}
		size += s
	}
	if start < len(msgs) {
		out = append(out, [2]int{start, len(msgs)})
	}
	return out
}

// Publish implements broker.Transport with SendMessageBatch.
func (t *Transport) Publish(ctx context.Context, msgs []broker.Message) error {
	if err := broker.CheckSize(msgs, t.opts.MaxMessageSize); err != nil {
		return err
	}
	if err := checkAttributes(msgs); err != nil {
		return err
	}
	if t.fifo {
		if err := checkFIFO(msgs); err != nil {
			return err
		}
	}
	perr := &broker.PublishError{Failed: map[int]error{}, Total: len(msgs)}
	for _, b := range batches(msgs, t.opts.MaxMessageSize) {
		if err := ctx.Err(); err != nil {
			for i := b[0]; i < b[1]; i++ {
				perr.Failed[i] = err
			}
			continue
		}
		entries := make([]types.SendMessageBatchRequestEntry, 0, b[1]-b[0])
		for i := b[0]; i < b[1]; i++ {
			e := types.SendMessageBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				MessageBody:       aws.String(string(msgs[i].Body)),
				MessageAttributes: attributes(msgs[i]),
			}
			if t.fifo {
				e.MessageGroupId = aws.String(msgs[i].Attributes[broker.AttrTenant])
				e.MessageDeduplicationId = nonEmpty(msgs[i].Attributes[broker.AttrID])
			}
			entries = append(entries, e)
		}
		out, err := t.c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(t.opts.QueueURL), Entries: entries})
		if err != nil {
			for i := b[0]; i < b[1]; i++ {
				perr.Failed[i] = fmt.Errorf("sqs: SendMessageBatch: %w", err)
			}
			continue
		}
		ok := map[int]bool{}
		for _, s := range out.Successful {
			if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil {
				ok[i] = true
			}
		}
		for _, f := range out.Failed {
			i, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || i < b[0] || i >= b[1] {
				continue
			}
			ok[i] = false
			perr.Failed[i] = fmt.Errorf("sqs: entry %s failed: %s: %s (sender fault %t)", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message), f.SenderFault)
		}
		for i := b[0]; i < b[1]; i++ {
			if _, seen := ok[i]; !seen {
				perr.Failed[i] = fmt.Errorf("sqs: entry %d missing from the SendMessageBatch response", i)
			}
		}
	}
	if len(perr.Failed) > 0 {
		return perr
	}
	return nil
}

// handle is a Delivery's Handle: where it came from and its receipt handle.
type handle struct {
	QueueURL      string
	ReceiptHandle string
}

func handleOf(d *broker.Delivery) (handle, error) {
	h, ok := d.Handle.(handle)
	if !ok || h.ReceiptHandle == "" {
		return handle{}, errors.New("sqs: delivery not from this transport")
	}
	return h, nil
}

// Receive implements broker.Transport.
func (t *Transport) Receive(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return t.receive(ctx, t.opts.QueueURL, max)
}

// ReceiveDead implements broker.DeadLetterReader: deliveries from the
// dead-letter queue, settled with Ack (which deletes them from there).
func (t *Transport) ReceiveDead(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return t.receive(ctx, t.opts.DeadLetterQueueURL, max)
}

func (t *Transport) receive(ctx context.Context, queue string, n int) ([]*broker.Delivery, error) {
	n = min(max(n, 1), maxReceive)
	in := &awssqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queue),
		MaxNumberOfMessages:         int32(n),
		WaitTimeSeconds:             int32(seconds(t.opts.WaitTime)), // ≥ 1: never a busy loop
		VisibilityTimeout:           int32(seconds(t.opts.VisibilityTimeout)),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		req := *in
		short := false
		if dl, ok := ctx.Deadline(); ok {
			// A long poll outliving its caller can take a message nobody
			// reads (see poll): wait no longer than the caller will, and
			// with under a second left (WaitTimeSeconds counts whole
			// seconds), poll once without waiting and then wait out the rest.
			left := int32(time.Until(dl) / time.Second)
			if left < req.WaitTimeSeconds {
				req.WaitTimeSeconds = left
			}
			short = left < 1
		}
		out, err := t.poll(ctx, &req)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("sqs: ReceiveMessage: %w", err)
		}
		if len(out.Messages) == 0 {
			if short {
				<-ctx.Done()
			}
			continue
		}
		ds := make([]*broker.Delivery, 0, len(out.Messages))
		for _, m := range out.Messages {
			ds = append(ds, toDelivery(queue, m))
		}
		return ds, nil
	}
}

// receiveGrace bounds a ReceiveMessage past its long-poll wait: the time
// for the request and its answer to cross the network.
const receiveGrace = 15 * time.Second

type pollResult struct {
	out *awssqs.ReceiveMessageOutput
	err error
}

// poll sends one ReceiveMessage so that a caller giving up loses nothing.
// SQS goes on with a long poll whose client has gone: what it receives then
// is hidden for its visibility timeout, counted as a receive, and delivered
// to nobody (AWS's advice is to make the visibility timeout longer than the
// SDK's read timeout for that reason: SQS Developer Guide, "Configuring
// visibility timeouts in Amazon SQS"; fauxqs does the same). So the request
// runs on a context the caller's cancellation does not end (bounded by its
// wait plus receiveGrace), and when the caller gives up first, the messages
// it still brings are made visible again at once (ChangeMessageVisibility
// 0) in the background; Close waits for that. Their ApproximateReceiveCount,
// and so their next Attempt, has gone up by one all the same.
func (t *Transport) poll(ctx context.Context, in *awssqs.ReceiveMessageInput) (*awssqs.ReceiveMessageOutput, error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(in.WaitTimeSeconds)*time.Second+receiveGrace)
	done := make(chan pollResult, 1)
	go func() {
		defer cancel()
		out, err := t.c.ReceiveMessage(pctx, in)
		done <- pollResult{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
	}
	t.releasing.Add(1)
	go func() {
		defer t.releasing.Done()
		r := <-done
		if r.err != nil || r.out == nil {
			return
		}
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), receiveGrace)
		defer rcancel()
		for _, m := range r.out.Messages {
			_, _ = t.c.ChangeMessageVisibility(rctx, &awssqs.ChangeMessageVisibilityInput{
				QueueUrl: in.QueueUrl, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
			})
		}
	}()
	return nil, ctx.Err()
}

func toDelivery(queue string, m types.Message) *broker.Delivery {
	attrs := make(map[string]string, len(m.MessageAttributes))
	var typed map[string]string // data types other than String
	for k, v := range m.MessageAttributes {
		if v.StringValue != nil {
			attrs[k] = *v.StringValue
			if dt := aws.ToString(v.DataType); dt != "" && dt != "String" {
				if typed == nil {
					typed = map[string]string{}
				}
				typed[k] = dt
			}
		}
	}
	attempt := 1
	if n, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil && n > 0 {
		attempt = n
	}
	return &broker.Delivery{
		Message: broker.Message{Body: []byte(aws.ToString(m.Body)), Attributes: attrs, Types: typed},
		ID:      aws.ToString(m.MessageId),
		Attempt: attempt,
		Handle:  handle{QueueURL: queue, ReceiptHandle: aws.ToString(m.ReceiptHandle)},
	}
}

// seconds rounds d up to whole seconds, within 0..MaxVisibilityTimeout.
func seconds(d time.Duration) int64 {
	d = min(max(d, 0), MaxVisibilityTimeout)
	return int64((d + time.Second - 1) / time.Second)
}

// Ack implements broker.Transport: DeleteMessage.
func (t *Transport) Ack(ctx context.Context, d *broker.Delivery) error {
	h, err := handleOf(d)
	if err != nil {
		return err
	}
	if _, err := t.c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(h.QueueURL), ReceiptHandle: aws.String(h.ReceiptHandle)}); err != nil {
		return fmt.Errorf("sqs: ack %s: %w", d.ID, err)
	}
	return nil
}

func (t *Transport) changeVisibility(ctx context.Context, d *broker.Delivery, by time.Duration) error {
	h, err := handleOf(d)
	if err != nil {
		return err
	}
	_, err = t.c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(h.QueueURL), ReceiptHandle: aws.String(h.ReceiptHandle), VisibilityTimeout: int32(seconds(by)),
	})
	return err
}

// Retry implements broker.Transport: ChangeMessageVisibility(delay).
func (t *Transport) Retry(ctx context.Context, d *broker.Delivery, delay time.Duration) error {
	if err := t.changeVisibility(ctx, d, delay); err != nil {
		return fmt.Errorf("sqs: retry %s: %w", d.ID, err)
	}
	return nil
}

// Extend implements broker.Transport: ChangeMessageVisibility(by).
func (t *Transport) Extend(ctx context.Context, d *broker.Delivery, by time.Duration) error {
	if err := t.changeVisibility(ctx, d, by); err != nil {
		return fmt.Errorf("sqs: extend %s: %w", d.ID, err)
	}
	return nil
}

// DeadLetter implements broker.Transport: a copy with the reason to the
// dead-letter queue, then DeleteMessage (see the package doc). A message
// too large to carry the reason attribute too (SQS counts attributes in
// MaximumMessageSize) is copied without it, so that it is dead-lettered
// once rather than redelivered every visibility timeout.
func (t *Transport) DeadLetter(ctx context.Context, d *broker.Delivery, reason string) error {
	if _, err := handleOf(d); err != nil {
		return err
	}
	if reason == "" {
		reason = "unknown"
	}
	attrs := make(map[string]string, len(d.Attributes)+1)
	for k, v := range d.Attributes {
		attrs[k] = v
	}
	attrs[broker.AttrReason] = reason
	m := broker.Message{Body: d.Body, Attributes: attrs, Types: d.Types} // the original's data types kept
	if broker.CheckSize([]broker.Message{m}, t.opts.MaxMessageSize) != nil {
		// The original fit the queue, but not with the reason beside it
		// (a message of the queue's maximum size, SQS's limit counting
		// attributes with the body): the copy goes as the original was,
		// without the reason, rather than back to the queue forever. The
		// reason stays in the consumer's outcome (broker.Outcome.Reason).
		m.Attributes = d.Attributes
		if err := broker.CheckSize([]broker.Message{m}, t.opts.MaxMessageSize); err != nil {
			return fmt.Errorf("sqs: dead-letter %s: copy: %w", d.ID, err)
		}
	}
	attrs = m.Attributes
	if err := checkAttributes([]broker.Message{m}); err != nil {
		return fmt.Errorf("sqs: dead-letter %s: %w", d.ID, err)
	}
	in := &awssqs.SendMessageInput{
		QueueUrl: aws.String(t.opts.DeadLetterQueueURL), MessageBody: aws.String(string(m.Body)), MessageAttributes: attributes(m),
	}
	if t.fifo {
		group := attrs[broker.AttrTenant]
		if !validFIFOID(group) {
			group = fifoDeadLetterGroup
		}
		in.MessageGroupId = aws.String(group)
		if validFIFOID(d.ID) {
			in.MessageDeduplicationId = aws.String(d.ID)
		}
	}
	if _, err := t.c.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("sqs: dead-letter %s: SendMessage: %w", d.ID, err)
	}
	return t.Ack(ctx, d)
}

// Close implements broker.Transport. It waits for the messages of
// abandoned long polls to be made visible again (poll; at most
// Options.WaitTime plus 30 s). The SDK client holds nothing to release;
// unsettled deliveries become visible again after their visibility timeout.
func (t *Transport) Close() error {
	t.releasing.Wait()
	return nil
}

// RedrivePolicy returns the JSON of a RedrivePolicy queue attribute sending
// messages received more than maxReceiveCount times to the queue with ARN
// deadLetterARN. Set maxReceiveCount above broker.ConsumeOptions.Policy.MaxAttempts,
// so that claimcheck dead-letters (with a reason) before SQS does.
func RedrivePolicy(deadLetterARN string, maxReceiveCount int) string {
	b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": deadLetterARN, "maxReceiveCount": maxReceiveCount})
	return string(b)
}

// Verify reads both queues' attributes and returns ErrConfig if either
// queue's MaximumMessageSize is below MaxMessageSize, or if the main queue
// has no redrive policy targeting the dead-letter queue.
func (t *Transport) Verify(ctx context.Context) error {
	names := []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize, types.QueueAttributeNameQueueArn, types.QueueAttributeNameRedrivePolicy}
	attrs := map[string]map[string]string{}
	for _, u := range []string{t.opts.QueueURL, t.opts.DeadLetterQueueURL} {
		out, err := t.c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: names})
		if err != nil {
			return fmt.Errorf("sqs: verify %s: %w", u, err)
		}
		attrs[u] = out.Attributes
		size, err := strconv.ParseInt(out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)], 10, 64)
		if err != nil || size < t.opts.MaxMessageSize {
			return fmt.Errorf("sqs: queue %s has MaximumMessageSize %q, below the transport's %d: %w",
				u, out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)], t.opts.MaxMessageSize, claimcheck.ErrConfig)
		}
	}
	var rp struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	raw := attrs[t.opts.QueueURL][string(types.QueueAttributeNameRedrivePolicy)]
	dlqARN := attrs[t.opts.DeadLetterQueueURL][string(types.QueueAttributeNameQueueArn)]
	if raw == "" || json.Unmarshal([]byte(raw), &rp) != nil || rp.DeadLetterTargetArn == "" || rp.DeadLetterTargetArn != dlqARN {
		return fmt.Errorf("sqs: queue %s has redrive policy %q, want one targeting %s: %w", t.opts.QueueURL, raw, dlqARN, claimcheck.ErrConfig)
	}
	return nil
}
