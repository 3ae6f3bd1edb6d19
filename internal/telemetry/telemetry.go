// Package telemetry sets up OpenTelemetry for the claimcheck command: a
// meter provider whose metrics a Prometheus handler serves (/metrics), and
// a tracer provider that exports spans over OTLP/HTTP when the standard
// OTEL_* environment variables ask for it (none by default). It installs
// nothing globally: the command hands the providers to the store
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
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
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
	// Getenv reads the OTEL_* variables; nil: os.Getenv. (The OTLP
	// exporter reads its own OTEL_EXPORTER_OTLP_* variables from the
	// process environment.)
	Getenv func(string) string
	// SpanExporter, if set, receives every span instead of what the
	// environment configures (tests).
	SpanExporter sdktrace.SpanExporter
}

// New makes the providers:
//
//   - metrics always, collected when the MetricsHandler is scraped;
//   - spans exported over OTLP/HTTP (protobuf) when OTEL_TRACES_EXPORTER
//     is "otlp", or is unset and OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; none when
//     OTEL_TRACES_EXPORTER is "none", when OTEL_SDK_DISABLED is "true",
//     or by default. The sampler is OTEL_TRACES_SAMPLER's (default
//     parentbased_always_on), the batching OTEL_BSP_*'s.
//
// Errors: an OTEL_TRACES_EXPORTER other than otlp or none, an
// OTEL_EXPORTER_OTLP_PROTOCOL other than http/protobuf, or the exporter's
// own configuration errors.
func New(ctx context.Context, opts Options) (*Telemetry, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(serviceName(getenv))))
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	t := &Telemetry{registry: promclient.NewRegistry(), tracer: noop.NewTracerProvider()}
	exp, err := otelprom.New(otelprom.WithRegisterer(t.registry))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	t.meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	spans := opts.SpanExporter
	if spans == nil {
		if spans, err = spanExporter(ctx, getenv); err != nil {
			_ = t.meters.Shutdown(ctx)
			return nil, err
		}
	}
	if spans != nil {
		t.traces = sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
		t.tracer = t.traces
	}
	return t, nil
}

// serviceName is OTEL_SERVICE_NAME, else DefaultServiceName (an
// OTEL_RESOURCE_ATTRIBUTES service.name is merged over it by the resource).
func serviceName(getenv func(string) string) string {
	if n := getenv("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return DefaultServiceName
}

// spanExporter is the exporter the environment asks for, nil for none.
func spanExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	switch kind := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); kind {
	case "none":
		return nil, nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q: use otlp or none", kind)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=%q: claimcheck exports spans over http/protobuf only", proto)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP span exporter: %w", err)
	}
	return exp, nil
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

// Shutdown flushes pending spans and stops the providers.
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
