package pipeline

// Metrics and the per-attempt log line of the one worker (Work, over the
// job database or a broker): both settle each attempt through observe.
// docs/observability.md lists the metrics.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline/internal/jobs"
)

// instruments are a Pipeline's metric instruments and tracer, on its
// store's providers (claimcheck.Store.Telemetry).
type instruments struct {
	tracer                                                 trace.Tracer
	attempts, deadLetters, storeErrors, keeperErrors, dups metric.Int64Counter
	relayPublish                                           metric.Float64Histogram
}

func newInstruments(store *claimcheck.Store) *instruments {
	mp, tp := store.Telemetry()
	m := mp.Meter(claimcheck.InstrumentationName)
	return &instruments{tracer: tp.Tracer(claimcheck.InstrumentationName),
		attempts: must(m.Int64Counter("claimcheck.job.attempts",
			metric.WithUnit("{attempt}"), metric.WithDescription("Attempts at jobs, by kind, outcome (completed, retrying, waiting, dead, released, left) and reason."))),
		deadLetters: must(m.Int64Counter("claimcheck.job.dead_letters",
			metric.WithUnit("{job}"), metric.WithDescription("Jobs that went to the dead letters, by kind and reason."))),
		storeErrors: must(m.Int64Counter("claimcheck.store.errors",
			metric.WithUnit("{error}"), metric.WithDescription("Failed attempts caused by the object store, by class (reason) and cause."))),
		keeperErrors: must(m.Int64Counter("claimcheck.keeper.errors",
			metric.WithUnit("{error}"), metric.WithDescription("Failed attempts caused by the keeper (payload encryption keys), by cause."))),
		dups: must(m.Int64Counter("claimcheck.inbox.duplicates",
			metric.WithUnit("{message}"), metric.WithDescription("Broker messages the inbox had already processed: acknowledged without running the handler."))),
		relayPublish: must(m.Float64Histogram("claimcheck.relay.publish.duration",
			metric.WithUnit("s"), metric.WithDescription("Time of one Publish call (up to 10 outbox entries) until the broker confirmed them, by destination and, on failure, error.type."),
			metric.WithExplicitBucketBoundaries(claimcheck.DurationBuckets...))),
	}
}

// registerGauges registers the pipeline's observable gauges, read when
// the metrics are collected (a /metrics scrape): the outbox's depth and
// oldest entry's age per destination (OutboxStats) and the queue's jobs
// per kind and state, oldest job still to be worked per kind and dead
// letters per kind and reason (QueueStats), each read at most once per
// QueueStatsCachePeriod; the bytes and objects the claims registry holds
// per tenant and role (StorageByTenant), at most once per
// StorageCachePeriod. Only the first collection waits for the job
// database; later ones are answered from the last reading while the next
// is made in the background (cached). The registration ends with Close.
func (p *Pipeline) registerGauges() {
	mp, _ := p.store.Telemetry()
	m := mp.Meter(claimcheck.InstrumentationName)
	depth := must(m.Int64ObservableGauge("claimcheck.outbox.depth",
		metric.WithUnit("{entry}"), metric.WithDescription("Outbox entries not yet confirmed by the broker, by destination.")))
	age := must(m.Float64ObservableGauge("claimcheck.outbox.oldest_age",
		metric.WithUnit("s"), metric.WithDescription("Age of the oldest outbox entry not yet confirmed, by destination (0 when none).")))
	queued := must(m.Int64ObservableGauge("claimcheck.queue.jobs",
		metric.WithUnit("{job}"), metric.WithDescription("Jobs in the job database by kind and state (River's states, and waiting); outbox entries excluded. Read at most every 5 s.")))
	oldest := must(m.Float64ObservableGauge("claimcheck.queue.oldest_age",
		metric.WithUnit("s"), metric.WithDescription("Age of the oldest job still to be worked (available, retryable or waiting) by kind, from its enqueue (0 when none).")))
	dead := must(m.Int64ObservableGauge("claimcheck.queue.dead_letters",
		metric.WithUnit("{job}"), metric.WithDescription("Dead letters in the job database (cancelled and discarded jobs) by kind and reason.")))
	heldBytes := must(m.Int64ObservableGauge("claimcheck.storage.held",
		metric.WithUnit("By"), metric.WithDescription("Payload bytes of the objects the claims registry records, by tenant and role (payload, result). Read at most every 30 s.")))
	heldObjects := must(m.Int64ObservableGauge("claimcheck.storage.held_objects",
		metric.WithUnit("{object}"), metric.WithDescription("Objects the claims registry records, by tenant and role (payload, result).")))
	now := func() time.Time {
		if p.gaugeNow != nil {
			return p.gaugeNow()
		}
		return time.Now()
	}
	outbox := jobs.NewCached(QueueStatsCachePeriod, now, p.OutboxStats)
	queue := jobs.NewCached(QueueStatsCachePeriod, now, p.QueueStats)
	storage := jobs.NewCached(StorageCachePeriod, now, p.StorageByTenant)
	reg, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var errs []error
		if stats, err := outbox.Get(ctx); err != nil {
			errs = append(errs, err)
		} else {
			for _, st := range stats {
				dest := metric.WithAttributes(semconv.MessagingDestinationName(st.Destination))
				o.ObserveInt64(depth, st.Depth, dest)
				a := 0.0
				if !st.Oldest.IsZero() {
					a = now().Sub(st.Oldest).Seconds()
				}
				o.ObserveFloat64(age, a, dest)
			}
		}
		if kinds, err := queue.Get(ctx); err != nil {
			errs = append(errs, err)
		} else {
			for _, k := range kinds {
				kind := claimcheck.AttrKind.String(k.Kind)
				for state, n := range k.States {
					o.ObserveInt64(queued, n, metric.WithAttributes(kind, attribute.String("claimcheck.state", state)))
				}
				for reason, n := range k.Dead {
					o.ObserveInt64(dead, n, metric.WithAttributes(kind, claimcheck.AttrReason.String(reason)))
				}
				a := 0.0
				if !k.Oldest.IsZero() {
					a = max(now().Sub(k.Oldest).Seconds(), 0)
				}
				o.ObserveFloat64(oldest, a, metric.WithAttributes(kind))
			}
		}
		if held, err := storage.Get(ctx); err != nil {
			errs = append(errs, err)
		} else {
			for _, h := range held {
				attrs := metric.WithAttributes(claimcheck.AttrTenant.String(h.Tenant), claimcheck.AttrRole.String(h.Role))
				o.ObserveInt64(heldBytes, h.Bytes, attrs)
				o.ObserveInt64(heldObjects, h.Objects, attrs)
			}
		}
		return errors.Join(errs...)
	}, depth, age, queued, oldest, dead, heldBytes, heldObjects)
	if err == nil {
		p.gauges = reg
	}
}

// riverTelemetry is River's OpenTelemetry middleware (otelriver) on the
// store's providers, injecting W3C trace context into each job's metadata,
// passed over while it would record nothing (riverOTel).
func (p *Pipeline) riverTelemetry() *riverOTel {
	mp, tp := p.store.Telemetry()
	return &riverOTel{
		mw: otelriver.NewMiddleware(&otelriver.MiddlewareConfig{MeterProvider: mp, TracerProvider: tp, EnableTracePropagation: true}),
		tp: tp, mp: mp, tpGlobal: otelGlobal(tp), mpGlobal: otelGlobal(mp),
	}
}

// riverOTel is otelriver's middleware and hook (insert, work, River's
// metrics), called only while something can come of it: a provider that
// records (anything but OpenTelemetry's no-op providers, or its global
// ones before a program sets its own), or, for insert and work, a span
// context in ctx to propagate into the job's metadata. Else each call
// goes straight to River's: with the global no-op providers otelriver's
// spans, attribute sets and metadata scan were 3% of a small job's
// enqueue CPU and 5% of its work on PostgreSQL. A provider set after Open
// (otel.SetTracerProvider) turns it on from the next call.
type riverOTel struct {
	river.PluginDefaults
	mw                 *otelriver.Middleware
	tp                 trace.TracerProvider
	mp                 metric.MeterProvider
	tpGlobal, mpGlobal bool // tp, mp are OpenTelemetry's global ones (otelGlobal)
}

var (
	_ rivertype.JobInsertMiddleware = (*riverOTel)(nil)
	_ rivertype.WorkerMiddleware    = (*riverOTel)(nil)
	_ rivertype.HookMetricEmit      = (*riverOTel)(nil)
)

func (r *riverOTel) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	if r.off(ctx) {
		return doInner(ctx)
	}
	return r.mw.InsertMany(ctx, params, doInner)
}

// Work runs otelriver's work middleware around doInner, handing it the
// attempt's error as its reason only (reasonOnly), which otelriver puts in
// river.work's span status: never the message, which may carry a
// handler's output. River gets the error itself.
func (r *riverOTel) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if r.off(ctx) {
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

func (r *riverOTel) MetricEmit(ctx context.Context, params *rivertype.HookMetricEmitParams) {
	if !r.metricsOff() {
		r.mw.MetricEmit(ctx, params)
	}
}

// off reports whether otelriver would neither record nor propagate
// anything for a call with ctx.
func (r *riverOTel) off(ctx context.Context) bool {
	return r.metricsOff() && r.tracesOff() && !trace.SpanContextFromContext(ctx).IsValid()
}

// tracesOff reports whether r's tracer provider records no span: a no-op
// provider, or the global one while no program has set its own.
func (r *riverOTel) tracesOff() bool {
	switch r.tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return true
	}
	return r.tpGlobal && otel.GetTracerProvider() == r.tp
}

// metricsOff is tracesOff for the meter provider.
func (r *riverOTel) metricsOff() bool {
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

// traceContext is W3C trace context, the propagation between producer and
// worker: in River job metadata and in broker message attributes.
var traceContext = propagation.TraceContext{}

// fromMetadata returns ctx with the trace context River's middleware put
// in a job's metadata as the remote parent, and a link to the span ctx
// already holds (River's work span, which only links to the producer).
func fromMetadata(ctx context.Context, metadata []byte) (context.Context, trace.SpanStartOption) {
	link := trace.WithLinks(trace.LinkFromContext(ctx))
	var m map[string]any
	if json.Unmarshal(metadata, &m) != nil {
		return ctx, link
	}
	carrier := propagation.MapCarrier{}
	for _, k := range traceContext.Fields() {
		if v, ok := m[k].(string); ok {
			carrier[k] = v
		}
	}
	if len(carrier) == 0 {
		return ctx, link
	}
	return traceContext.Extract(ctx, carrier), link
}

// attrCause is a failed attempt's claimcheck.CauseOf.
const attrCause = attribute.Key("claimcheck.cause")

// jobAttrs are a job's span attributes.
func jobAttrs(id int64, kind, tenant string, attempt int) []attribute.KeyValue {
	return []attribute.KeyValue{claimcheck.AttrJob.Int64(id), claimcheck.AttrKind.String(kind),
		claimcheck.AttrTenant.String(tenant), claimcheck.AttrAttempt.Int(attempt)}
}

func must[T any](v T, err error) T {
	if err != nil {
		otel.Handle(err)
	}
	return v
}

// observe records one settled attempt: its metrics and, at info, one log
// line with the job's id, kind, tenant, digest prefix, size, attempt,
// outcome, reason and the durations of claim, verification and handler.
// Neither holds a payload byte or a full object key.
func (p *Pipeline) observe(ctx context.Context, o Outcome) {
	kind := claimcheck.AttrKind.String(o.Kind)
	if p.tel.attempts.Enabled(ctx) { // no attribute set for a meter that records nothing
		p.tel.attempts.Add(ctx, 1, metric.WithAttributes(append(claimcheck.ErrorAttrs(o.Err), kind, claimcheck.AttrOutcome.String(string(o.State)))...))
	}
	if o.State == JobDead {
		p.tel.deadLetters.Add(ctx, 1, metric.WithAttributes(append(claimcheck.ErrorAttrs(o.Err), kind)...))
	}
	if o.Err != nil {
		cause, _ := claimcheck.CauseOf(o.Err)
		switch o.Reason {
		case claimcheck.ReasonUnavailable, claimcheck.ReasonAccessDenied, claimcheck.ReasonNotVisibleYet:
			p.tel.storeErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("claimcheck.class", o.Reason), attrCause.String(cause)))
		case claimcheck.ReasonKeeper:
			p.tel.keeperErrors.Add(ctx, 1, metric.WithAttributes(attrCause.String(cause)))
		}
	}
	level := slog.LevelInfo
	if o.State == JobDead {
		level = slog.LevelWarn
	}
	if !p.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.Int64("job", o.JobID), slog.String("kind", o.Kind), slog.String("tenant", o.Tenant),
		slog.String("sha256", o.SHA256), slog.Int64("size", o.Size), slog.Int("attempt", o.Attempt),
		slog.String("outcome", string(o.State)), slog.String("reason", o.Reason),
		slog.Duration("claim", o.Timings.Claim.Round(time.Microsecond)), slog.Duration("verify", o.Timings.Verify.Round(time.Microsecond)),
		slog.Duration("handler", o.Timings.Handler.Round(time.Microsecond)),
	}
	if o.MessageID != "" {
		attrs = append(attrs, slog.String("message", o.MessageID))
	}
	if o.Err != nil {
		attrs = append(attrs, slog.String("error", o.Err.Error()))
	}
	p.logger.LogAttrs(ctx, level, "job attempt", attrs...)
}
