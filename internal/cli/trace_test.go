package cli

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/claimcheck/claimcheck/broker/brokertest"
)

// receivedSpan is a span an OTLP/HTTP receiver got, with the
// service.name of the process that sent it.
type receivedSpan struct {
	service, name     string
	trace, id, parent string
	start             uint64
	attrs             map[string]string
}

// otlpReceiver is an in-test OTLP/HTTP trace receiver (POST /v1/traces,
// protobuf), decoding with go.opentelemetry.io/proto/otlp.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
	srv   *httptest.Server
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var in coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &in)
		}
		if req.URL.Path != "/v1/traces" || err != nil {
			t.Errorf("OTLP receiver: %s %s: %v", req.Method, req.URL.Path, err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		r.add(&in)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) add(in *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range in.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, received(service, s))
			}
		}
	}
}

func received(service string, s *tracepb.Span) receivedSpan {
	attrs := map[string]string{}
	for _, kv := range s.GetAttributes() {
		attrs[kv.GetKey()] = fmt.Sprint(kv.GetValue().GetValue())
	}
	return receivedSpan{service: service, name: s.GetName(), trace: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()),
		parent: hex.EncodeToString(s.GetParentSpanId()), start: s.GetStartTimeUnixNano(), attrs: attrs}
}

func (r *otlpReceiver) all() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// command runs claimcheck as a process of its own (the test binary, see
// TestMain), exporting its spans to rec as service.
func (b *cliBundle) command(rec *otlpReceiver, service string, args ...string) string {
	b.t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"--data", b.data}, args...)...)
	cmd.Env = append(os.Environ(), envAsCommand+"=1", "OTEL_EXPORTER_OTLP_ENDPOINT="+rec.srv.URL, "OTEL_SERVICE_NAME="+service, "OTEL_BSP_SCHEDULE_DELAY=100")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.t.Fatalf("claimcheck %s (%s): %v\n%s", strings.Join(args, " "), service, err, out)
	}
	return string(out)
}

// TestTraceAcrossProcesses: one trace id from submit (the producer
// process) to work (the consumer process), on the job database (trace
// context in the job's River metadata) and through RabbitMQ (submit's
// relay → the message's headers), captured by an in-test OTLP/HTTP
// receiver. No exported span attribute holds the payload's key or its
// bytes, and gocloud.dev's own spans are never exported.
func TestTraceAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		broker func(t *testing.T) string
		want   []string // span names in the trace, besides River's
	}{
		{"database", nil, []string{"claimcheck.submit", "claimcheck.enqueue", "claimcheck.check_in", "claimcheck.work", "claimcheck.claim", "claimcheck.verify", "claimcheck.handler"}},
		{"RabbitMQ", brokers[0].url, []string{"claimcheck.submit", "claimcheck.enqueue", "claimcheck.check_in", "claimcheck.relay.publish", "claimcheck.receive", "claimcheck.claim", "claimcheck.verify", "claimcheck.handler"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.broker != nil {
				brokertest.ServerURL(t, "CLAIMCHECK_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
			}
			rec := newOTLPReceiver(t)
			b := setup(t)
			marker := "PAYLOAD-MARKER-" + rand.Text()
			file := filepath.Join(t.TempDir(), "payload.txt")
			if err := os.WriteFile(file, []byte(strings.Repeat(marker+"\n", 5000)), 0o600); err != nil { // offloaded: over 64 KiB
				t.Fatal(err)
			}
			var global []string
			if tc.broker != nil {
				global = []string{"--broker", tc.broker(t)}
			}
			b.command(rec, "submit", append(global, "submit", "--kind", "traced", "--tenant", "acme", file)...)
			work := append(global, "work", "--kind", "traced", "--until-empty", "--exec", "--", "wc", "-c")
			if tc.broker != nil {
				work = append(global, "work", "--kind", "traced", "--until-empty", "--idle", "1s", "--exec", "--", "wc", "-c")
			}
			b.command(rec, "work", work...)
			key := b.payloadKey(1, global...)

			spans := rec.all()
			var root *receivedSpan
			for i, s := range spans {
				if s.name == "claimcheck.submit" {
					root = &spans[i]
				}
			}
			if root == nil {
				t.Fatalf("no claimcheck.submit span among %d", len(spans))
			}
			var trace []receivedSpan
			for _, s := range spans {
				if s.trace == root.trace {
					trace = append(trace, s)
				}
				for k, v := range s.attrs {
					if strings.Contains(v, key) || strings.Contains(v, "PAYLOAD-MARKER") {
						t.Errorf("span %s attribute %s holds the payload's key or bytes: %q", s.name, k, v)
					}
				}
				if strings.HasPrefix(s.name, "gocloud.dev") {
					t.Errorf("gocloud.dev's span %s was exported", s.name)
				}
			}
			slices.SortFunc(trace, func(a, b receivedSpan) int { return int(int64(a.start - b.start)) })
			names := map[string]string{} // span id → name
			for _, s := range trace {
				names[s.id] = s.name
			}
			var lines []string
			services := map[string]bool{}
			for _, s := range trace {
				services[s.service] = true
				parent := "(root)"
				if s.parent != "" {
					parent = s.parent + " " + names[s.parent]
				}
				lines = append(lines, fmt.Sprintf("%-7s %-26s span %s parent %s", s.service, s.name, s.id, parent))
			}
			t.Logf("trace %s, %d spans:\n%s", root.trace, len(trace), strings.Join(lines, "\n"))
			for _, want := range tc.want {
				if !slices.ContainsFunc(trace, func(s receivedSpan) bool { return s.name == want }) {
					t.Errorf("trace %s has no %s span", root.trace, want)
				}
			}
			if !services["submit"] || !services["work"] {
				t.Errorf("trace %s does not span both processes: %v", root.trace, services)
			}
			for _, s := range trace {
				if s.parent != "" && names[s.parent] == "" {
					t.Errorf("span %s's parent %s is not in the trace", s.name, s.parent)
				}
			}
		})
	}
}
