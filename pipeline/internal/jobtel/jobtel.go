// Package jobtel is package pipeline's OpenTelemetry: its metric
// instruments and tracer (Instruments), River's otelriver middleware
// passed over while it would record nothing (River), and the W3C trace
// context a job's metadata and a broker message carry (FromMetadata).
// docs/observability.md lists the metrics.
package jobtel

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/claimcheck/claimcheck"
)

// Instruments are a Pipeline's metric instruments and tracer, on its
// store's providers (claimcheck.Store.Telemetry).
type Instruments struct {
	Tracer                                                 trace.Tracer
	Attempts, DeadLetters, StoreErrors, KeeperErrors, Dups metric.Int64Counter
	RelayPublish                                           metric.Float64Histogram
}

// New makes the instruments on store's providers (Store.Telemetry).
func New(store *claimcheck.Store) *Instruments {
	mp, tp := store.Telemetry()
	m := mp.Meter(claimcheck.InstrumentationName)
	return &Instruments{Tracer: tp.Tracer(claimcheck.InstrumentationName),
		Attempts: Must(m.Int64Counter("claimcheck.job.attempts",
			metric.WithUnit("{attempt}"), metric.WithDescription("Attempts at jobs, by kind, outcome (completed, retrying, waiting, dead, released, left) and reason."))),
		DeadLetters: Must(m.Int64Counter("claimcheck.job.dead_letters",
			metric.WithUnit("{job}"), metric.WithDescription("Jobs that went to the dead letters, by kind and reason."))),
		StoreErrors: Must(m.Int64Counter("claimcheck.store.errors",
			metric.WithUnit("{error}"), metric.WithDescription("Failed attempts caused by the object store, by class (reason) and cause."))),
		KeeperErrors: Must(m.Int64Counter("claimcheck.keeper.errors",
			metric.WithUnit("{error}"), metric.WithDescription("Failed attempts caused by the keeper (payload encryption keys), by cause."))),
		Dups: Must(m.Int64Counter("claimcheck.inbox.duplicates",
			metric.WithUnit("{message}"), metric.WithDescription("Broker messages the inbox had already processed: acknowledged without running the handler."))),
		RelayPublish: Must(m.Float64Histogram("claimcheck.relay.publish.duration",
			metric.WithUnit("s"), metric.WithDescription("Time of one Publish call (up to 10 outbox entries) until the broker confirmed them, by destination and, on failure, error.type."),
			metric.WithExplicitBucketBoundaries(claimcheck.DurationBuckets...))),
	}
}

// NewRiver is River's OpenTelemetry middleware (otelriver) on store's
// providers, injecting W3C trace context into each job's metadata, passed
// over while it would record nothing (River).
func NewRiver(store *claimcheck.Store) *River {
	mp, tp := store.Telemetry()
	return &River{
		mw: otelriver.NewMiddleware(&otelriver.MiddlewareConfig{MeterProvider: mp, TracerProvider: tp, EnableTracePropagation: true}),
		tp: tp, mp: mp, tpGlobal: otelGlobal(tp), mpGlobal: otelGlobal(mp),
	}
}

// River is otelriver's middleware and hook (insert, work, River's
// metrics), called only while something can come of it: a provider that
// records (anything but OpenTelemetry's no-op providers, or its global
// ones before a program sets its own), or, for insert and work, a span
// context in ctx to propagate into the job's metadata. Else each call
// goes straight to River's: with the global no-op providers otelriver's
// spans, attribute sets and metadata scan were 3% of a small job's
// enqueue CPU and 5% of its work on PostgreSQL. A provider set after Open
// (otel.SetTracerProvider) turns it on from the next call.
type River struct {
	river.PluginDefaults
	mw                 *otelriver.Middleware
	tp                 trace.TracerProvider
	mp                 metric.MeterProvider
	tpGlobal, mpGlobal bool // tp, mp are OpenTelemetry's global ones (otelGlobal)
}

var (
	_ rivertype.JobInsertMiddleware = (*River)(nil)
	_ rivertype.WorkerMiddleware    = (*River)(nil)
	_ rivertype.HookMetricEmit      = (*River)(nil)
)

func (r *River) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	if r.Off(ctx) {
		return doInner(ctx)
	}
	return r.mw.InsertMany(ctx, params, doInner)
}

// Work runs otelriver's work middleware around doInner, handing it the
// attempt's error as its reason only (reasonOnly), which otelriver puts in
// river.work's span status: never the message, which may carry a
// handler's output. River gets the error itself.
func (r *River) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if r.Off(ctx) {
		return doInner(ctx)
	}
	var inner error
	err := r.mw.Work(ctx, job, func(ctx context.Context) error {
		if inner = doInner(ctx); inner != nil {
			return reasonOnly{inner}
		}
		return nil
	})
	if _, ok := err.(reasonOnly); ok {
		return inner
	}
	return err
}

// reasonOnly is an error whose message is its claimcheck.Reason; it
// unwraps to the error, for errors.Is and As (River's snooze).
type reasonOnly struct{ err error }

func (e reasonOnly) Error() string { return claimcheck.Reason(e.err) }
func (e reasonOnly) Unwrap() error { return e.err }

func (r *River) MetricEmit(ctx context.Context, params *rivertype.HookMetricEmitParams) {
	if !r.MetricsOff() {
		r.mw.MetricEmit(ctx, params)
	}
}

// Off reports whether otelriver would neither record nor propagate
// anything for a call with ctx.
func (r *River) Off(ctx context.Context) bool {
	return r.MetricsOff() && r.TracesOff() && !trace.SpanContextFromContext(ctx).IsValid()
}

// TracesOff reports whether r's tracer provider records no span: a no-op
// provider, or the global one while no program has set its own.
func (r *River) TracesOff() bool {
	switch r.tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return true
	}
	return r.tpGlobal && otel.GetTracerProvider() == r.tp
}

// MetricsOff is TracesOff for the meter provider.
func (r *River) MetricsOff() bool {
	switch r.mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return true
	}
	return r.mpGlobal && otel.GetMeterProvider() == r.mp
}

// otelGlobal reports whether provider is OpenTelemetry's global delegate
// (what otel.GetTracerProvider and GetMeterProvider return until a
// provider is set, which it then forwards to), a pointer of its
// internal/global package. If OpenTelemetry moves it, this is false and
// otelriver is always called.
func otelGlobal(provider any) bool {
	t := reflect.TypeOf(provider)
	return t != nil && t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// TraceContext is W3C trace context, the propagation between producer and
// worker: in River job metadata and in broker message attributes.
var TraceContext = propagation.TraceContext{}

// FromMetadata returns ctx with the trace context River's middleware put
// in a job's metadata as the remote parent, and a link to the span ctx
// already holds (River's work span, which only links to the producer).
func FromMetadata(ctx context.Context, metadata []byte) (context.Context, trace.SpanStartOption) {
	link := trace.WithLinks(trace.LinkFromContext(ctx))
	var m map[string]any
	if json.Unmarshal(metadata, &m) != nil {
		return ctx, link
	}
	carrier := propagation.MapCarrier{}
	for _, k := range TraceContext.Fields() {
		if v, ok := m[k].(string); ok {
			carrier[k] = v
		}
	}
	if len(carrier) == 0 {
		return ctx, link
	}
	return TraceContext.Extract(ctx, carrier), link
}

// AttrCause is a failed attempt's claimcheck.CauseOf.
const AttrCause = attribute.Key("claimcheck.cause")

// JobAttrs are a job's span attributes.
func JobAttrs(id int64, kind, tenant string, attempt int) []attribute.KeyValue {
	return []attribute.KeyValue{claimcheck.AttrJob.Int64(id), claimcheck.AttrKind.String(kind),
		claimcheck.AttrTenant.String(tenant), claimcheck.AttrAttempt.Int(attempt)}
}

// Must is v, err handed to OpenTelemetry's error handler.
func Must[T any](v T, err error) T {
	if err != nil {
		otel.Handle(err)
	}
	return v
}
