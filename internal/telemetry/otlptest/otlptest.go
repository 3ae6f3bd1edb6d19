// Package otlptest is an in-test OpenTelemetry collector: it receives
// spans and metrics over OTLP/HTTP (protobuf, POST /v1/traces and
// /v1/metrics) or OTLP/gRPC (the collector's TraceService and
// MetricsService), decoded with go.opentelemetry.io/proto/otlp, for tests
// that run claimcheck's processes with the standard OTEL_* variables.
package otlptest

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is a span the receiver got, with the service.name of the process
// that sent it. IDs are lowercase hex; Parent is "" for a root.
type Span struct {
	Service, Name, Kind string
	Trace, ID, Parent   string
	Start               uint64 // Unix ns
	Status              string // the status's code and message: "Error: payload-missing", "" when unset
	Attrs               map[string]string
}

// Metric is one data point of a metric the receiver got.
type Metric struct {
	Service, Name string
	Attrs         map[string]string
}

// Receiver collects what it is sent. Its Endpoint is the value for
// OTEL_EXPORTER_OTLP_ENDPOINT and Protocol for OTEL_EXPORTER_OTLP_PROTOCOL.
type Receiver struct {
	Endpoint, Protocol string

	mu      sync.Mutex
	spans   []Span
	metrics []Metric
}

// Env is the environment a process needs to export to r as service:
// the endpoint, the protocol, OTEL_SERVICE_NAME, a 100 ms batch delay.
func (r *Receiver) Env(service string) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=" + r.Protocol,
		"OTEL_SERVICE_NAME=" + service, "OTEL_BSP_SCHEDULE_DELAY=100"}
}

// NewHTTP starts an OTLP/HTTP receiver, closed when the test ends.
func NewHTTP(t testing.TB) *Receiver {
	r := &Receiver{Protocol: "http/protobuf"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var out proto.Message
		switch {
		case err != nil:
		case req.URL.Path == "/v1/traces":
			var in coltracepb.ExportTraceServiceRequest
			if err = proto.Unmarshal(body, &in); err == nil {
				r.addSpans(&in)
			}
			out = &coltracepb.ExportTraceServiceResponse{}
		case req.URL.Path == "/v1/metrics":
			var in colmetricpb.ExportMetricsServiceRequest
			if err = proto.Unmarshal(body, &in); err == nil {
				r.addMetrics(&in)
			}
			out = &colmetricpb.ExportMetricsServiceResponse{}
		default:
			err = fmt.Errorf("no such path")
		}
		if err != nil {
			t.Errorf("OTLP receiver: %s %s: %v", req.Method, req.URL.Path, err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		b, _ := proto.Marshal(out)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	r.Endpoint = srv.URL
	return r
}

// NewGRPC starts an OTLP/gRPC receiver (plaintext), stopped when the
// test ends.
func NewGRPC(t testing.TB) *Receiver {
	r := &Receiver{Protocol: "grpc"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, traceService{r: r})
	colmetricpb.RegisterMetricsServiceServer(srv, metricsService{r: r})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	r.Endpoint = "http://" + ln.Addr().String()
	return r
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ context.Context, in *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.addSpans(in)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	colmetricpb.UnimplementedMetricsServiceServer
	r *Receiver
}

func (s metricsService) Export(_ context.Context, in *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	s.r.addMetrics(in)
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

func serviceOf(attrs []*commonpb.KeyValue) string {
	return attrMap(attrs)["service.name"]
}

func attrMap(attrs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range attrs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.GetKey()] = fmt.Sprint(v.GetValue())
		}
	}
	return m
}

func (r *Receiver) addSpans(in *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range in.GetResourceSpans() {
		service := serviceOf(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				status := ""
				if st := s.GetStatus(); st.GetCode() != tracepb.Status_STATUS_CODE_UNSET {
					status = strings.TrimPrefix(st.GetCode().String(), "STATUS_CODE_") + ": " + st.GetMessage()
				}
				r.spans = append(r.spans, Span{Service: service, Name: s.GetName(),
					Kind:  strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_")),
					Trace: hex.EncodeToString(s.GetTraceId()), ID: hex.EncodeToString(s.GetSpanId()),
					Parent: hex.EncodeToString(s.GetParentSpanId()), Start: s.GetStartTimeUnixNano(),
					Status: status, Attrs: attrMap(s.GetAttributes())})
			}
		}
	}
}

func (r *Receiver) addMetrics(in *colmetricpb.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rm := range in.GetResourceMetrics() {
		service := serviceOf(rm.GetResource().GetAttributes())
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				for _, attrs := range pointAttrs(m) {
					r.metrics = append(r.metrics, Metric{Service: service, Name: m.GetName(), Attrs: attrMap(attrs)})
				}
			}
		}
	}
}

// pointAttrs are the attribute sets of m's data points.
func pointAttrs(m *metricpb.Metric) [][]*commonpb.KeyValue {
	var out [][]*commonpb.KeyValue
	switch d := m.GetData().(type) {
	case *metricpb.Metric_Sum:
		for _, p := range d.Sum.GetDataPoints() {
			out = append(out, p.GetAttributes())
		}
	case *metricpb.Metric_Gauge:
		for _, p := range d.Gauge.GetDataPoints() {
			out = append(out, p.GetAttributes())
		}
	case *metricpb.Metric_Histogram:
		for _, p := range d.Histogram.GetDataPoints() {
			out = append(out, p.GetAttributes())
		}
	case *metricpb.Metric_ExponentialHistogram:
		for _, p := range d.ExponentialHistogram.GetDataPoints() {
			out = append(out, p.GetAttributes())
		}
	}
	return out
}

// Spans are the spans received so far, in start order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := slices.Clone(r.spans)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Start < s[j].Start })
	return s
}

// Metrics are the metric data points received so far.
func (r *Receiver) Metrics() []Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.metrics)
}

// Trace is the spans of trace id, in start order.
func (r *Receiver) Trace(id string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.Trace == id {
			out = append(out, s)
		}
	}
	return out
}

// Format lists spans one a line: service, name, kind, span id, parent
// (and its name), status and the attributes whose keys start with one of
// prefixes (all when none given), sorted.
func Format(spans []Span, prefixes ...string) string {
	names := map[string]string{}
	for _, s := range spans {
		names[s.ID] = s.Name
	}
	var lines []string
	for _, s := range spans {
		parent := "(root)"
		if s.Parent != "" {
			parent = s.Parent + " " + names[s.Parent]
		}
		var attrs []string
		for k, v := range s.Attrs {
			if len(prefixes) == 0 || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
				attrs = append(attrs, k+"="+v)
			}
		}
		sort.Strings(attrs)
		line := fmt.Sprintf("%-8s %-28s %-8s span %s parent %s", s.Service, s.Name, s.Kind, s.ID, parent)
		if s.Status != "" {
			line += " status " + s.Status
		}
		if len(attrs) > 0 {
			line += "\n    " + strings.Join(attrs, " ")
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
