// Package broker is the transport seam between claimcheck and a message
// broker: a Transport publishes, receives, acknowledges, retries and
// dead-letters small messages (claim-check tickets), and Consume runs the
// consumer half of the claim check over any Transport with the same failure
// semantics as the job pipeline (see pipeline.Work and claimcheck.Store.Work).
//
// Transports live in subpackages (broker/rabbitmq); broker/brokertest holds
// the conformance suite every transport must pass.
package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/claimcheck/claimcheck"
)

// Attribute names written by NewMessage and by transports.
const (
	// AttrKind names the work to do, and so the handler.
	AttrKind = "claimcheck-kind"
	// AttrTenant is the ticket's tenant, for routing without parsing.
	AttrTenant = "claimcheck-tenant"
	// AttrReason is set on a dead letter: the machine-readable reason
	// (claimcheck.Reason) it was dead-lettered for.
	AttrReason = "claimcheck-reason"
	// AttrID is the producer's message identifier, the same on every
	// publish of one outbox entry (the relay sets it). Transports carry it
	// as the broker's own message id where there is one (AMQP message-id,
	// JetStream Nats-Msg-Id, which JetStream deduplicates within the
	// stream's duplicate window), and an Inbox uses it to suppress a second
	// processing of a message published or delivered twice.
	AttrID = "claimcheck-id"
	// AttrIdempotencyKey identifies the work a message asks for, the same
	// on every publish of one outbox entry, replays included (the relay
	// sets it; a replay carries a new AttrID, so that no broker's duplicate
	// window drops it). An Inbox records outcomes by it, falling back to
	// AttrID for messages without one.
	AttrIdempotencyKey = "claimcheck-idempotency-key"
	// AttrJob is the outbox entry (River job id, decimal) a relayed message
	// came from: the registry row that DeleteOnAck releases.
	AttrJob = "claimcheck-job"
	// AttrMaxAttempts is the producer's limit on attempts (decimal), set
	// by the relay from the outbox entry; Consume applies it instead of
	// ConsumeOptions.Policy.MaxAttempts.
	AttrMaxAttempts = "claimcheck-max-attempts"
	// AttrPriority is the job's priority (decimal, 2 to 4; absent means 1,
	// the highest), set by the relay from the outbox entry. A transport
	// that implements Prioritizer with Priorities true delivers higher
	// priorities first; the others carry it as a plain attribute.
	AttrPriority = "claimcheck-priority"
)

// Prioritizer is implemented by transports that can deliver messages by
// priority (RabbitMQ's priority queues).
type Prioritizer interface {
	// Priorities reports whether this transport's queue delivers waiting
	// messages with a higher AttrPriority (a lower number) first.
	Priorities() bool
}

// SupportsPriority reports whether tr delivers waiting messages by
// AttrPriority (it implements Prioritizer and says so).
func SupportsPriority(tr Transport) bool {
	p, ok := tr.(Prioritizer)
	return ok && p.Priorities()
}

// CheckPriority returns an error wrapping claimcheck.ErrConfig if a job
// priority was asked for (priority != 0) and tr does not deliver by
// priority: SQS and JetStream have no per-message priority, and a
// RabbitMQ queue has one only when declared with max_priority. Producers
// call it before storing anything, so a priority is never silently
// ignored.
func CheckPriority(tr Transport, priority int) error {
	if priority == 0 {
		return nil
	}
	if SupportsPriority(tr) {
		return nil
	}
	return fmt.Errorf("broker: this transport has no message priorities (SQS and NATS JetStream have none; a RabbitMQ queue has them only with max_priority=4 in its URL): submit without a priority, or use the job database's queue, or a RabbitMQ priority queue: %w", claimcheck.ErrConfig)
}

// Message is what a transport carries: a body and string attributes (SQS
// message attributes, AMQP headers, NATS headers).
type Message struct {
	Body       []byte
	Attributes map[string]string
	// Types holds the data type of each attribute that is not a String,
	// by name, as SQS names data types: "Number" (a decimal string, such
	// as the AWS pointer's size marker; SQS Developer Guide, "Amazon SQS
	// message attributes"). An attribute absent from Types is a String.
	// SQS writes and reads these types, and keeps them on every copy it
	// makes (dead letters included); transports without typed attributes
	// (AMQP, NATS) carry the values only.
	Types map[string]string
}

// AttrNumber is the data type of a numeric attribute (Message.Types).
const AttrNumber = "Number"

// AttributeType is the data type of m's attribute name: its Types entry,
// else "String".
func (m Message) AttributeType(name string) string {
	if t := m.Types[name]; t != "" {
		return t
	}
	return attributeType
}

// Delivery is a received message.
type Delivery struct {
	Message
	// ID is the transport's identifier for the message, stable across
	// retries where the transport allows it.
	ID string
	// Attempt counts deliveries of this message from 1, retries included.
	Attempt int
	// Handle is the transport's own handle (an AMQP delivery, an SQS
	// receipt handle). Only the transport that returned the Delivery reads
	// it; callers must leave it alone.
	Handle any
}

// Transport is one queue of one broker. Every method is safe for
// concurrent use unless the transport documents otherwise.
type Transport interface {
	// MaxMessageSize is the largest message, as counted by Size, that
	// Publish accepts.
	MaxMessageSize() int64
	// Publish sends msgs and returns only once the broker has confirmed
	// every one of them. A message larger than MaxMessageSize fails the
	// whole call with ErrMessageTooLarge before anything is sent. If some
	// messages are not confirmed the error is a *PublishError naming them;
	// those messages may or may not have been delivered and are safe to
	// publish again only where consumers are idempotent (claim checks are).
	Publish(ctx context.Context, msgs []Message) error
	// Receive blocks until at least one message is available or ctx is
	// done, then returns up to max messages. On ctx done it returns
	// ctx.Err() and no messages.
	Receive(ctx context.Context, max int) ([]*Delivery, error)
	// Ack settles d as done: it is never delivered again.
	Ack(ctx context.Context, d *Delivery) error
	// Retry settles d and has it delivered again, with Attempt incremented,
	// no sooner than delay from now.
	Retry(ctx context.Context, d *Delivery, delay time.Duration) error
	// DeadLetter settles d by moving it to the transport's dead-letter
	// destination, with reason recorded as its AttrReason attribute.
	DeadLetter(ctx context.Context, d *Delivery, reason string) error
	// Extend asks the broker not to redeliver d for at least another by
	// (a lease, SQS's visibility timeout). A no-op where the broker has no
	// lease.
	Extend(ctx context.Context, d *Delivery, by time.Duration) error
	// Close releases the transport's connections. Unsettled deliveries are
	// redelivered later by the broker.
	Close() error
}

// Pinger is implemented by transports that can ask their broker whether it
// answers, for a worker's readiness (/readyz). Ping returns nil when it
// does, else the transport's error, classified (claimcheck.ErrUnavailable
// with its cause) and naming the broker without its password.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Ping asks tr's broker whether it answers: tr's Ping (Pinger), else its
// Lease (Leaser, which SQS answers from the broker), else nil (nothing to
// ask).
func Ping(ctx context.Context, tr Transport) error {
	switch p := tr.(type) {
	case Pinger:
		return p.Ping(ctx)
	case Leaser:
		_, err := p.Lease(ctx)
		return err
	}
	return nil
}

// QueueNamer is implemented by transports that can name the queue they
// receive from. Consume records each outcome in the Inbox per message and
// consuming queue, so a message the broker itself copies to several queues
// (a RabbitMQ fanout exchange, an SNS topic feeding several SQS queues)
// runs its handler once in each. A transport that does not implement it
// receives from the queue "".
type QueueNamer interface {
	// QueueName names the queue, unique on its broker and prefixed with
	// the transport's scheme ("amqp:jobs", "nats:STREAM/CONSUMER",
	// "sqs:https://…/jobs"). It never contains a password.
	QueueName() string
}

// Leaser is implemented by transports whose broker redelivers a delivery
// left unsettled for a while (a lease): SQS's visibility timeout,
// JetStream's AckWait. Consume extends every delivery it holds (Extend)
// well before its lease runs out.
type Leaser interface {
	// Lease is how long the broker keeps a received delivery from other
	// consumers before it redelivers it, as the queue is configured. A
	// transport may ask the broker (SQS GetQueueAttributes); errors are the
	// transport's, wrapped.
	Lease(ctx context.Context) (time.Duration, error)
}

// FanOut is implemented by transports whose broker may copy every message
// Publish sends to several queues: a RabbitMQ fanout exchange, an SNS topic
// feeding several SQS queues. The relay registers one reference to a
// payload per queue it names, so that deletion on acknowledgement
// (ConsumeOptions.DeleteOnAck) deletes the object only once every queue's
// consumer has acknowledged its copy; a consumer whose transport reports a
// fan-out it cannot count refuses DeleteOnAck at start-up. A transport
// that does not implement FanOut delivers each message to its own queue
// only.
type FanOut interface {
	// FanOutQueues names, as their consumers' transports name them
	// (QueueNamer), every queue that receives a copy of each message
	// Publish sends, the transport's own included. An error wrapping
	// ErrFanOutUnknown if the transport cannot tell.
	FanOutQueues() ([]string, error)
}

// ErrFanOutUnknown is returned (wrapped) by FanOut.FanOutQueues when the
// broker copies messages to queues the transport cannot list.
var ErrFanOutUnknown = errors.New("the queues this destination's messages are copied to are unknown")

// CheckFanOut returns nil if consumers of tr can count the references the
// broker creates: tr does not fan out, or names every queue it fans out to,
// its own (QueueName) among them. Otherwise an error wrapping
// claimcheck.ErrConfig that says why (and ErrFanOutUnknown where that is
// the cause).
func CheckFanOut(tr Transport) error {
	fo, ok := tr.(FanOut)
	if !ok {
		return nil
	}
	qs, err := fo.FanOutQueues()
	if err != nil {
		return fmt.Errorf("%w: %w", err, claimcheck.ErrConfig)
	}
	own := QueueName(tr)
	for _, q := range qs {
		if q == own {
			return nil
		}
	}
	return fmt.Errorf("broker: queue %q is not among the queues its messages are copied to (%s): %w", own, strings.Join(qs, ", "), claimcheck.ErrConfig)
}

// QueueName is tr's QueueNamer name, or "" if it has none.
func QueueName(tr Transport) string {
	if n, ok := tr.(QueueNamer); ok {
		return n.QueueName()
	}
	return ""
}

// DeadLetterReader is implemented by transports that can read their own
// dead-letter destination (for operators and the conformance suite).
// Deliveries it returns are settled with Ack on the same transport.
type DeadLetterReader interface {
	ReceiveDead(ctx context.Context, max int) ([]*Delivery, error)
}

// ErrMessageTooLarge is returned by Publish for a message whose Size
// exceeds the transport's MaxMessageSize. It wraps
// claimcheck.ErrPayloadTooLarge (an inline ticket carries its payload), so
// claimcheck.Classify finds it permanent: publishing it again cannot help.
var ErrMessageTooLarge = fmt.Errorf("message too large for the transport: %w", claimcheck.ErrPayloadTooLarge)

// PublishError reports which messages of a Publish call were not confirmed.
type PublishError struct {
	// Failed maps the index in the msgs slice to why it failed.
	Failed map[int]error
	// Total is the number of messages in the call.
	Total int
}

func (e *PublishError) Error() string {
	idx := make([]int, 0, len(e.Failed))
	for i := range e.Failed {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	parts := make([]string, 0, len(idx))
	for _, i := range idx {
		parts = append(parts, fmt.Sprintf("#%d: %v", i, e.Failed[i]))
	}
	return fmt.Sprintf("broker: %d of %d messages not confirmed: %s", len(idx), e.Total, strings.Join(parts, "; "))
}

// Unwrap returns the failures, so errors.Is sees through to their causes.
func (e *PublishError) Unwrap() []error {
	errs := make([]error, 0, len(e.Failed))
	for _, err := range e.Failed {
		errs = append(errs, err)
	}
	return errs
}

// attributeType is the data type of an attribute without a Types entry.
const attributeType = "String"

// Size is m's size as brokers count it: the body plus, for every attribute,
// its name, its data type label ("String", or its Types entry) and its
// value, all in UTF-8
// bytes. This is the rule Amazon SQS applies ("The message size includes
// the message body and all message attribute components: name, type and
// value", Amazon SQS Developer Guide, "Amazon SQS message attributes" and
// "Amazon SQS message quotas"); claimcheck applies it to every transport so
// a message that fits one fits all. Invalid UTF-8 is counted byte for byte.
func Size(m Message) int64 {
	n := int64(len(m.Body))
	for k, v := range m.Attributes {
		n += int64(len(k)) + int64(len(m.AttributeType(k))) + int64(len(v))
	}
	return n
}

// CheckSize returns ErrMessageTooLarge, wrapped with the sizes, if any of
// msgs is larger than max; nothing if max <= 0.
func CheckSize(msgs []Message, max int64) error {
	if max <= 0 {
		return nil
	}
	for i, m := range msgs {
		if s := Size(m); s > max {
			return fmt.Errorf("broker: message #%d is %d bytes, more than %d: %w", i, s, max, ErrMessageTooLarge)
		}
	}
	return nil
}

// NewMessage encodes a ticket as a message: the ticket's JSON as the body,
// kind and tenant as the AttrKind and AttrTenant attributes.
func NewMessage(kind string, t *claimcheck.Ticket) (Message, error) {
	if kind == "" || !utf8.ValidString(kind) {
		return Message{}, fmt.Errorf("broker: invalid kind %q: %w", kind, claimcheck.ErrConfig)
	}
	b, err := t.Marshal()
	if err != nil {
		return Message{}, err
	}
	return Message{Body: b, Attributes: map[string]string{AttrKind: kind, AttrTenant: t.Tenant}}, nil
}

// MaxMessageOverhead is the most bytes, as Size counts them, that
// NewMessage adds to a ticket for kind: the AttrKind and AttrTenant
// attributes, with a tenant of the longest length claimcheck allows.
func MaxMessageOverhead(kind string) int64 {
	return int64(len(AttrKind)+len(attributeType)+len(kind)) +
		int64(len(AttrTenant)+len(attributeType)+claimcheck.MaxTenantLen)
}

// CheckConfig returns ErrConfig if a ticket from store for one of kinds
// could exceed tr's MaxMessageSize: the store's inline threshold is too
// high for the transport (claimcheck.InlineTicketSize). Producers call it at
// start-up, so that no ticket is ever refused by the broker for its size.
func CheckConfig(store *claimcheck.Store, tr Transport, kinds ...string) error {
	worst := claimcheck.InlineTicketSize(store.InlineThreshold())
	for _, kind := range kinds {
		if n := worst + MaxMessageOverhead(kind); n > tr.MaxMessageSize() {
			return fmt.Errorf("broker: a ticket message for kind %q can reach %d bytes (inline threshold %d), more than the transport's maximum %d: lower the threshold or raise the maximum: %w",
				kind, n, store.InlineThreshold(), tr.MaxMessageSize(), claimcheck.ErrConfig)
		}
	}
	return nil
}
