package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/claimcheck/claimcheck"
)

// spanAttr is span s's string attribute key, "" if it has none.
func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
}

// traceparentOf is the W3C traceparent River's middleware put in job id's
// metadata, "" for none.
func (b *testBundle) traceparentOf(t *testing.T, id int64) string {
	t.Helper()
	row, err := b.p.client.JobGet(b.ctx, id)
	if err != nil {
		t.Fatalf("JobGet(%d): %v", id, err)
	}
	var md map[string]any
	if err := json.Unmarshal(row.Metadata, &md); err != nil {
		t.Fatalf("job %d's metadata %q: %v", id, row.Metadata, err)
	}
	s, _ := md["traceparent"].(string)
	return s
}

// TestRiverTelemetryRecorded: with providers that record, River's
// middleware (otelriver) runs on every insert and work: its spans and
// metrics, and the insert's trace context in the job's metadata.
func TestRiverTelemetryRecorded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		b := setup(t, newDB(t), &testOpts{store: claimcheck.Options{TracerProvider: tp, MeterProvider: mp}})
		if b.p.riverTelemetry().Off(b.ctx) {
			t.Fatal("River's middleware is passed over with recording providers")
		}
		res, err := b.p.Enqueue(b.ctx, "traced", "acme", strings.NewReader("small"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tpar := b.traceparentOf(t, res.JobID); tpar == "" {
			t.Error("no traceparent in the job's metadata")
		}
		b.work(t, map[string]claimcheck.Handler{"traced": &recorder{}})
		// A failed attempt: River's span status and the attempt's span carry
		// the reason only, not the message (a handler's output).
		if _, err := b.p.Enqueue(b.ctx, "failing", "acme", strings.NewReader("small"), nil); err != nil {
			t.Fatal(err)
		}
		b.work(t, map[string]claimcheck.Handler{"failing": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
			return nil, claimcheck.Permanent(errors.New(`exit status 65; stderr: "HANDLER-OUTPUT-XYZ"`))
		})})
		names := map[string]bool{}
		for _, s := range spans.Ended() {
			names[s.Name()] = true
			if s.Name() == "river.work" {
				// River's span says the claimcheck kind (River kind = claimcheck kind).
				if kind := spanAttr(s, "kind"); kind != "traced" && kind != "failing" {
					t.Errorf("river.work span's kind %q, want traced or failing", kind)
				}
			}
			if s.Name() == "river.work" || s.Name() == "process failing" {
				if st := s.Status(); strings.Contains(st.Description, "HANDLER-OUTPUT") {
					t.Errorf("span %s's status carries the error's message: %q", s.Name(), st.Description)
				} else if st.Code.String() == "Error" {
					t.Logf("span %s: status %s %q", s.Name(), st.Code, st.Description)
				}
			}
		}
		for _, want := range []string{"river.insert_many", "river.work", "send traced"} {
			if !names[want] {
				t.Errorf("no %s span among %v", want, names)
			}
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		metrics := map[string]bool{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				metrics[m.Name] = true
				if m.Name != "river.work_count" {
					continue
				}
				sum, ok := m.Data.(metricdata.Sum[int64])
				if !ok || len(sum.DataPoints) == 0 {
					t.Errorf("river.work_count is %T with no points", m.Data)
					continue
				}
				for _, dp := range sum.DataPoints {
					if kind, _ := dp.Attributes.Value("kind"); kind.AsString() != "traced" && kind.AsString() != "failing" {
						t.Errorf("river.work_count's kind %q, want traced or failing", kind.AsString())
					}
				}
			}
		}
		for _, want := range []string{"river.insert_count", "river.work_count"} {
			if !metrics[want] {
				t.Errorf("no %s metric among %v", want, metrics)
			}
		}
	})
}

// TestRiverTelemetryOff: with OpenTelemetry's global providers unset (no
// test of this package sets them), River's middleware is passed over, and
// a job's metadata has no trace context; a span context in the enqueue's
// ctx (a caller's remote parent) still goes into the metadata, as
// otelriver puts it there with a tracer that records nothing.
func TestRiverTelemetryOff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), nil)
		r := b.p.riverTelemetry()
		if !r.Off(b.ctx) {
			t.Fatalf("River's middleware runs with the global providers unset (traces off %v, metrics off %v)", r.TracesOff(), r.MetricsOff())
		}
		res, err := b.p.Enqueue(b.ctx, "untraced", "acme", strings.NewReader("small"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tpar := b.traceparentOf(t, res.JobID); tpar != "" {
			t.Errorf("traceparent %q in the metadata of a job enqueued without a span", tpar)
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
			TraceFlags: trace.FlagsSampled, Remote: true})
		ctx := trace.ContextWithRemoteSpanContext(b.ctx, sc)
		if r.Off(ctx) {
			t.Error("River's middleware is passed over with a span context to propagate")
		}
		res, err = b.p.Enqueue(ctx, "untraced", "acme", strings.NewReader("small"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tpar := b.traceparentOf(t, res.JobID); !strings.Contains(tpar, sc.TraceID().String()) {
			t.Errorf("traceparent %q of a job enqueued under trace %s", tpar, sc.TraceID())
		}
		b.work(t, map[string]claimcheck.Handler{"untraced": &recorder{}})
	})
}
