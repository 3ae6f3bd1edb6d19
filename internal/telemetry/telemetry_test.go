package telemetry_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/claimcheck/claimcheck/internal/telemetry"
	"github.com/claimcheck/claimcheck/internal/telemetry/otlptest"
)

// TestExportersFromEnvironment: the OTEL_* variables choose the exporters
// (autoexport): OTLP over http/protobuf and over grpc deliver one span and
// one counter to an in-test receiver on Shutdown alone (a short-lived
// command's exit), console and none start, an unknown exporter or
// protocol is an error, and no variable exports nothing.
func TestExportersFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  func(testing.TB) *otlptest.Receiver
	}{
		{"http/protobuf", otlptest.NewHTTP},
		{"grpc", otlptest.NewGRPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.rec(t)
			setenv(t, append(rec.Env("unit"), "OTEL_METRICS_EXPORTER=otlp", "OTEL_TRACES_EXPORTER=otlp")...)
			use(t)
			if got := rec.Spans(); len(got) != 1 || got[0].Name != "unit-span" || got[0].Service != "unit" {
				t.Errorf("spans received: %+v, want one unit-span from service unit", got)
			}
			if !slices.ContainsFunc(rec.Metrics(), func(m otlptest.Metric) bool {
				return m.Name == "unit.counter" && m.Attrs["claimcheck.tenant"] == "acme"
			}) {
				t.Errorf("metrics received: %+v, want unit.counter{claimcheck.tenant=acme}", rec.Metrics())
			}
		})
	}
	t.Run("console and none", func(t *testing.T) {
		setenv(t, "OTEL_TRACES_EXPORTER=console", "OTEL_METRICS_EXPORTER=none")
		use(t)
	})
	t.Run("no variable", func(t *testing.T) {
		rec := otlptest.NewHTTP(t)
		setenv(t, "OTEL_SERVICE_NAME=unit")
		use(t)
		if n := len(rec.Spans()) + len(rec.Metrics()); n != 0 {
			t.Errorf("%d items exported with no OTEL_* variable", n)
		}
	})
	for _, bad := range []string{"OTEL_TRACES_EXPORTER=zipkin-nope", "OTEL_METRICS_EXPORTER=nope", "OTEL_EXPORTER_OTLP_PROTOCOL=http/json-nope"} {
		t.Run(bad, func(t *testing.T) {
			setenv(t, bad, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1")
			if tel, err := telemetry.New(context.Background(), telemetry.Options{}); err == nil {
				tel.Shutdown(context.Background())
				t.Errorf("%s: no error", bad)
			} else {
				t.Logf("%s: %v", bad, err)
			}
		})
	}
}

// setenv clears the OTEL_* variables of the test's process, then sets kvs.
func setenv(t *testing.T, kvs ...string) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// use makes the providers, records one span and one counter, and shuts
// them down.
func use(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.New(ctx, telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.TracerProvider().Tracer("unit").Start(ctx, "unit-span")
	span.End()
	c, err := tel.MeterProvider().Meter("unit").Int64Counter("unit.counter")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(ctx, 1, metric.WithAttributes(attribute.String("claimcheck.tenant", "acme")))
	if err := tel.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
