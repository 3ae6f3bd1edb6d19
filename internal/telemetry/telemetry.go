// Package telemetry sets up OpenTelemetry for the claimcheck command: a
// meter provider whose metrics a Prometheus handler serves (/metrics) and,
// when the standard OTEL_* environment variables ask for it, pushes to an
// exporter too; and a tracer provider that exports spans the same way
// (none by default). The exporters are the specification's, chosen by
// go.opentelemetry.io/contrib/exporters/autoexport. It installs nothing
// globally: the command hands the providers to the store
// (claimcheck.Options), and through it to the pipeline, the broker
// consumer and River's middleware (otelriver). gocloud.dev's own spans,
// whose attributes hold full object keys, go to OpenTelemetry's global
// tracer provider, which this package leaves a no-op, so they are never
// exported. docs/observability.md lists the variables, metrics and spans.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is the service.name resource attribute unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES set one.
const DefaultServiceName = "claimcheck"

// Telemetry is one process's OpenTelemetry providers.
type Telemetry struct {
	meters   *sdkmetric.MeterProvider
	tracer   trace.TracerProvider
	traces   *sdktrace.TracerProvider // nil when no span is exported
	registry *promclient.Registry
}

// Options configure New.
type Options struct {
	// SpanExporter, if set, receives every span instead of what the
	// environment configures (tests).
	SpanExporter sdktrace.SpanExporter
}

// New makes the providers from the process environment
// (autoexport, which follows the OpenTelemetry specification's
// variables):
//
//   - metrics always, collected when the MetricsHandler is scraped; and
//     pushed, every OTEL_METRIC_EXPORT_INTERVAL and on Shutdown, to the
//     exporter OTEL_METRICS_EXPORTER names (otlp, console, prometheus:
//     a server of its own on OTEL_EXPORTER_PROMETHEUS_HOST:PORT, none);
//   - spans exported, batched (OTEL_BSP_*), to the exporter
//     OTEL_TRACES_EXPORTER names (otlp, console, none), sampled as
//     OTEL_TRACES_SAMPLER says (default parentbased_always_on).
//
// OTLP's protocol is OTEL_EXPORTER_OTLP_PROTOCOL (or the signal's own
// ..._TRACES_/..._METRICS_PROTOCOL): http/protobuf (the default) or grpc.
// Unlike the specification's default (otlp), an unset OTEL_*_EXPORTER
// exports nothing unless OTEL_EXPORTER_OTLP_ENDPOINT or the signal's own
// endpoint is set, so that a command run without a collector does not
// try to reach one on localhost. OTEL_SDK_DISABLED=true exports nothing
// (metrics are still served).
//
// Errors: an exporter name or protocol autoexport does not know, or the
// exporter's own configuration errors.
func New(ctx context.Context, opts Options) (*Telemetry, error) {
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(serviceName())))
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	t := &Telemetry{registry: promclient.NewRegistry(), tracer: noop.NewTracerProvider()}
	exp, err := otelprom.New(otelprom.WithRegisterer(t.registry))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	readers := []sdkmetric.Option{sdkmetric.WithReader(exp), sdkmetric.WithResource(res)}
	if exporting("METRICS") {
		pushed, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTEL_METRICS_EXPORTER: %w", err)
		}
		if !autoexport.IsNoneMetricReader(pushed) {
			readers = append(readers, sdkmetric.WithReader(pushed))
		}
	}
	t.meters = sdkmetric.NewMeterProvider(readers...)
	spans := opts.SpanExporter
	if spans == nil && exporting("TRACES") {
		if spans, err = autoexport.NewSpanExporter(ctx); err != nil {
			_ = t.meters.Shutdown(ctx)
			return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER: %w", err)
		}
		if autoexport.IsNoneSpanExporter(spans) {
			spans = nil
		}
	}
	if spans != nil {
		t.traces = sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
		t.tracer = t.traces
	}
	return t, nil
}

// exporting reports whether autoexport is asked for the signal's
// (TRACES, METRICS) exporter: not when OTEL_SDK_DISABLED is true; when
// OTEL_{signal}_EXPORTER is set; when it is unset, only if
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_{signal}_ENDPOINT is
// (autoexport's default is then otlp).
func exporting(signal string) bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if os.Getenv("OTEL_"+signal+"_EXPORTER") != "" {
		return true
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

// serviceName is OTEL_SERVICE_NAME, else DefaultServiceName (an
// OTEL_RESOURCE_ATTRIBUTES service.name is merged over it by the resource).
func serviceName() string {
	if n := os.Getenv("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return DefaultServiceName
}

// MeterProvider is the provider every metric goes to.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.meters }

// TracerProvider is the provider every span goes to: a no-op when no
// span is exported.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tracer }

// Propagator is W3C trace context, which carries a trace from producer to
// worker in job metadata and message attributes.
func (t *Telemetry) Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// MetricsHandler serves the metrics in Prometheus's text format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{})
}

// Shutdown flushes pending spans and metrics (a pushing reader exports
// its last collection) and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	if t.traces != nil {
		errs = append(errs, t.traces.Shutdown(ctx))
	}
	errs = append(errs, t.meters.Shutdown(ctx))
	return errors.Join(errs...)
}

type contextKey struct{}

// NewContext returns ctx carrying t, for a program (or a test) that runs
// several commands on one set of providers.
func NewContext(ctx context.Context, t *Telemetry) context.Context {
	return context.WithValue(ctx, contextKey{}, t)
}

// FromContext returns the Telemetry NewContext put in ctx, or nil.
func FromContext(ctx context.Context) *Telemetry {
	t, _ := ctx.Value(contextKey{}).(*Telemetry)
	return t
}
