package claimcheck

// OpenTelemetry instrumentation of check-in, claim, verification and the
// handler. Instruments and spans come from the global providers
// (go.opentelemetry.io/otel): no-ops until a program installs its own
// (the command does, internal/telemetry). docs/observability.md lists
// every metric and span; none carries payload bytes or a full object key.

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/messagingconv"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName is the OpenTelemetry instrumentation scope of this
// module's spans and metrics.
const InstrumentationName = "github.com/claimcheck/claimcheck"

// DurationBuckets are the bucket bounds, in seconds, of this module's
// duration histograms: 5 ms to 5 min, for calls from an inline payload's
// decryption to a multi-gigabyte upload.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// instruments are a Store's tracer and metric instruments.
type instruments struct {
	mp     metric.MeterProvider
	tp     trace.TracerProvider
	tracer trace.Tracer

	checkedIn, claimed, verifyFailures                              metric.Int64Counter
	checkInDuration, claimDuration, verifyDuration, handlerDuration metric.Float64Histogram

	// OpenTelemetry's messaging metrics (StartMessaging).
	opDuration   messagingconv.ClientOperationDuration
	procDuration messagingconv.ProcessDuration
	sent         messagingconv.ClientSentMessages
	consumed     messagingconv.ClientConsumedMessages
}

// newInstruments makes a Store's instruments from mp and tp (nil: the
// global providers, otel.GetMeterProvider and otel.GetTracerProvider).
func newInstruments(mp metric.MeterProvider, tp trace.TracerProvider) *instruments {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(InstrumentationName)
	hist := func(name, desc string) metric.Float64Histogram {
		return must(m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(DurationBuckets...)))
	}
	return &instruments{mp: mp, tp: tp, tracer: tp.Tracer(InstrumentationName),
		checkedIn: must(m.Int64Counter("claimcheck.payload.checked_in",
			metric.WithUnit("By"), metric.WithDescription("Payload and result bytes checked in (tenant, placement inline|object, role payload|result)."))),
		claimed: must(m.Int64Counter("claimcheck.payload.claimed",
			metric.WithUnit("By"), metric.WithDescription("Payload bytes claimed and verified for a handler (tenant, kind)."))),
		verifyFailures: must(m.Int64Counter("claimcheck.verify.failures",
			metric.WithUnit("{failure}"), metric.WithDescription("Claims whose payload was missing or failed verification (kind, reason)."))),
		checkInDuration: hist("claimcheck.check_in.duration", "Time to check a payload or result in (role, outcome ok or the reason)."),
		claimDuration:   hist("claimcheck.claim.duration", "Time to claim a ticket: its checks, and for a manifest the fetch of its documents (kind, outcome)."),
		verifyDuration:  hist("claimcheck.verify.duration", "Time to fetch a payload and verify its size and SHA-256 (kind, outcome)."),
		handlerDuration: hist("claimcheck.handler.duration", "Time a handler ran (kind, outcome)."),
		opDuration:      must(messagingconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(DurationBuckets...))),
		procDuration:    must(messagingconv.NewProcessDuration(m, metric.WithExplicitBucketBoundaries(DurationBuckets...))),
		sent:            must(messagingconv.NewClientSentMessages(m)),
		consumed:        must(messagingconv.NewClientConsumedMessages(m)),
	}
}

// Telemetry returns the OpenTelemetry providers the store reports to
// (Options.MeterProvider and TracerProvider, else the global ones), for the
// packages built on it (pipeline, broker) to report to the same.
func (s *Store) Telemetry() (metric.MeterProvider, trace.TracerProvider) {
	return s.tel.mp, s.tel.tp
}

func must[T any](v T, err error) T {
	if err != nil {
		otel.Handle(err)
	}
	return v
}

// Timings are how long the steps of one attempt took (Store.Run fills
// them in on its Job). Zero for a step that did not run.
type Timings struct {
	// Claim is the ticket's checks (and for a manifest, the fetch and
	// verification of its documents).
	Claim time.Duration
	// Verify is the payload's fetch and the check of its size and SHA-256
	// (zero for a Lazy handler, which verifies as it reads).
	Verify time.Duration
	// Handler is the handler's run.
	Handler time.Duration
}

// claimcheck's own attributes, on spans and metrics alike, beside
// OpenTelemetry's messaging semantic conventions (messaging.*, error.type;
// docs/observability.md). None ever holds a key, a full digest or object
// key, or a payload byte.
const (
	AttrTenant       = attribute.Key("claimcheck.tenant")        // the ticket's tenant
	AttrKind         = attribute.Key("claimcheck.kind")          // the job's kind
	AttrDigestPrefix = attribute.Key("claimcheck.sha256_prefix") // Ticket.DigestPrefix: 12 hex digits
	AttrSize         = attribute.Key("claimcheck.size")          // the payload's size, bytes
	AttrPlacement    = attribute.Key("claimcheck.placement")     // inline or object
	AttrRole         = attribute.Key("claimcheck.role")          // payload or result
	AttrReason       = attribute.Key("claimcheck.reason")        // Reason of a failure
	AttrOutcome      = attribute.Key("claimcheck.outcome")       // a job attempt's outcome (pipeline.JobState)
	AttrAttempt      = attribute.Key("claimcheck.attempt")       // the attempt's number, from 1
	AttrJob          = attribute.Key("claimcheck.job")           // the job's id in the job database
)

// ticketAttrs are a ticket's span attributes: never its key, nor a byte of
// its payload.
func ticketAttrs(t *Ticket) []attribute.KeyValue {
	if t == nil {
		return nil
	}
	return []attribute.KeyValue{
		AttrTenant.String(t.Tenant),
		AttrDigestPrefix.String(t.DigestPrefix()),
		AttrSize.Int64(t.Size),
		AttrPlacement.String(placementOf(t)),
	}
}

// ErrorAttrs are a failure's attributes, on spans and metrics alike:
// error.type and claimcheck.reason, both the error's Reason (never its
// message); none for a nil err.
func ErrorAttrs(err error) []attribute.KeyValue {
	if err == nil {
		return nil
	}
	r := Reason(err)
	return []attribute.KeyValue{semconv.ErrorTypeKey.String(r), AttrReason.String(r)}
}

// endSpan records err (its reason as error.type, claimcheck.reason and
// the status's description, never its message, which may be long and
// hold a handler's output) and ends span.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(ErrorAttrs(err)...)
		span.SetStatus(codes.Error, Reason(err))
	}
	span.End()
}

// startSpan starts one of the store's spans.
func (s *Store) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return s.tel.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// EndSpan ends span recording err's reason (Reason), never its message, as
// its status, for the spans of the packages built on a Store.
func EndSpan(span trace.Span, err error) { endSpan(span, err) }

// TicketAttributes are the span attributes of a ticket: tenant, digest
// prefix, size, placement; never its key.
func TicketAttributes(t *Ticket) []attribute.KeyValue { return ticketAttrs(t) }

// MessagingSystemRiver is the messaging.system of the job database's
// operations (River's queues); a broker's is its own (rabbitmq, nats,
// aws_sqs: broker.System).
const MessagingSystemRiver = "river"

// Messaging is one messaging operation, described by OpenTelemetry's
// messaging semantic conventions
// (https://opentelemetry.io/docs/specs/semconv/messaging/), for
// StartMessaging.
type Messaging struct {
	// System is messaging.system: MessagingSystemRiver, or the broker's.
	System string
	// Type is messaging.operation.type: send (a producer's) or process (a
	// consumer's handling of one message).
	Type messagingconv.OperationTypeAttr
	// Name is messaging.operation.name, claimcheck's word for it: enqueue,
	// publish, work, receive.
	Name string
	// Destination is messaging.destination.name: the job's kind (its
	// queue) on the job database, the outbox destination or the broker's
	// queue.
	Destination string
	// MessageID is messaging.message.id ("" until known: SetMessageID).
	MessageID string
}

// StartMessaging starts op's span, named "{type} {destination}" (a
// producer's span for send, a consumer's for process) with the messaging
// attributes and attrs, and returns the function that ends it: that
// records the failure's reason (error.type, claimcheck.reason, the
// status), never its message, and the operation's metrics:
// messaging.client.operation.duration and messaging.client.sent.messages
// for a send, messaging.process.duration and
// messaging.client.consumed.messages for a process, each with
// messaging.system, messaging.operation.name and .type,
// messaging.destination.name and, on failure, error.type and
// claimcheck.reason.
func (s *Store) StartMessaging(ctx context.Context, op Messaging, attrs []attribute.KeyValue, opts ...trace.SpanStartOption) (context.Context, trace.Span, func(err error)) {
	kind := trace.SpanKindProducer
	if op.Type != messagingconv.OperationTypeSend {
		kind = trace.SpanKindConsumer
	}
	common := []attribute.KeyValue{semconv.MessagingSystemKey.String(op.System),
		semconv.MessagingOperationTypeKey.String(string(op.Type)), semconv.MessagingOperationName(op.Name),
		semconv.MessagingDestinationName(op.Destination)}
	spanAttrs := append(slices.Clip(common), attrs...)
	if op.MessageID != "" {
		spanAttrs = append(spanAttrs, semconv.MessagingMessageID(op.MessageID))
	}
	ctx, span := s.tel.tracer.Start(ctx, string(op.Type)+" "+op.Destination,
		append(opts, trace.WithSpanKind(kind), trace.WithAttributes(spanAttrs...))...)
	start := time.Now()
	return ctx, span, func(err error) {
		took := time.Since(start).Seconds()
		system := messagingconv.SystemAttr(op.System)
		mattrs := append([]attribute.KeyValue{common[1], common[3]}, ErrorAttrs(err)...) // type, destination
		if op.Type == messagingconv.OperationTypeSend {
			s.tel.opDuration.Record(ctx, took, op.Name, system, mattrs...)
			s.tel.sent.Add(ctx, 1, op.Name, system, mattrs...)
		} else {
			s.tel.procDuration.Record(ctx, took, op.Name, system, mattrs...)
			s.tel.consumed.Add(ctx, 1, op.Name, system, mattrs...)
		}
		endSpan(span, err)
	}
}

// SetMessageID sets a messaging span's messaging.message.id, once known.
func SetMessageID(span trace.Span, id string) {
	span.SetAttributes(semconv.MessagingMessageID(id))
}
