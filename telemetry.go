package claimcheck

// OpenTelemetry instrumentation of check-in, claim, verification and the
// handler. Instruments and spans come from the global providers
// (go.opentelemetry.io/otel): no-ops until a program installs its own
// (the command does, internal/telemetry). docs/observability.md lists
// every metric and span; none carries payload bytes or a full object key.

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
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

// ticketAttrs are a ticket's span attributes: never its key, nor a byte of
// its payload.
func ticketAttrs(t *Ticket) []attribute.KeyValue {
	if t == nil {
		return nil
	}
	return []attribute.KeyValue{
		attribute.String("claimcheck.tenant", t.Tenant),
		attribute.String("claimcheck.sha256_prefix", t.DigestPrefix()),
		attribute.Int64("claimcheck.size", t.Size),
		attribute.Bool("claimcheck.inline", t.IsInline()),
	}
}

// outcomeOf is the outcome attribute of a measurement: "ok" or the error's
// reason.
func outcomeOf(err error) string {
	if err == nil {
		return "ok"
	}
	return Reason(err)
}

// endSpan records err (its reason, never its message, which may be long
// but never holds a key) and ends span.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(attribute.String("claimcheck.reason", Reason(err)))
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
