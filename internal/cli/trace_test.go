package cli

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/internal/telemetry/otlptest"
)

// command runs claimcheck as a process of its own (the test binary, see
// TestMain), exporting its spans to rec as service.
func (b *cliBundle) command(rec *otlptest.Receiver, service string, args ...string) string {
	b.t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"--data", b.data}, args...)...)
	cmd.Env = append(append(os.Environ(), envAsCommand+"=1"), rec.Env(service)...)
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
		want   []string // span names (messaging.operation.name for messaging spans) in the trace, besides River's
	}{
		{"database", nil, []string{"claimcheck.submit", "enqueue", "claimcheck.check_in", "work", "claimcheck.claim", "claimcheck.verify", "claimcheck.handler"}},
		{"RabbitMQ", brokers[0].url, []string{"claimcheck.submit", "enqueue", "claimcheck.check_in", "publish", "receive", "claimcheck.claim", "claimcheck.verify", "claimcheck.handler"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.broker != nil {
				brokertest.ServerURL(t, "CLAIMCHECK_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
			}
			rec := otlptest.NewHTTP(t)
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

			spans := rec.Spans()
			var root *otlptest.Span
			for i, s := range spans {
				if s.Name == "claimcheck.submit" {
					root = &spans[i]
				}
			}
			if root == nil {
				t.Fatalf("no claimcheck.submit span among %d", len(spans))
			}
			var trace []otlptest.Span
			for _, s := range spans {
				if s.Trace == root.Trace {
					trace = append(trace, s)
				}
				for k, v := range s.Attrs {
					if strings.Contains(v, key) || strings.Contains(v, "PAYLOAD-MARKER") {
						t.Errorf("span %s attribute %s holds the payload's key or bytes: %q", s.Name, k, v)
					}
				}
				if strings.HasPrefix(s.Name, "gocloud.dev") {
					t.Errorf("gocloud.dev's span %s was exported", s.Name)
				}
			}
			names := map[string]string{} // span id → name
			services := map[string]bool{}
			for _, s := range trace {
				names[s.ID] = s.Name
				services[s.Service] = true
			}
			t.Logf("trace %s, %d spans:\n%s", root.Trace, len(trace), otlptest.Format(trace, "messaging.", "error.type", "claimcheck."))
			for _, want := range tc.want {
				if !slices.ContainsFunc(trace, func(s otlptest.Span) bool { return s.Name == want || s.Attrs["messaging.operation.name"] == want }) {
					t.Errorf("trace %s has no %s span", root.Trace, want)
				}
			}
			if !services["submit"] || !services["work"] {
				t.Errorf("trace %s does not span both processes: %v", root.Trace, services)
			}
			for _, s := range trace {
				if s.Parent != "" && names[s.Parent] == "" {
					t.Errorf("span %s's parent %s is not in the trace", s.Name, s.Parent)
				}
			}
		})
	}
}

// TestSubmitPushesMetrics: a single `submit` process, with
// OTEL_METRICS_EXPORTER=otlp, pushes its metrics as it exits (OTLP over
// gRPC to an in-test receiver): the check-in's bytes and the enqueue's
// messaging metrics.
func TestSubmitPushesMetrics(t *testing.T) {
	rec := otlptest.NewGRPC(t)
	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	b := setup(t)
	file := filepath.Join(t.TempDir(), "payload.txt")
	if err := os.WriteFile(file, []byte("metered"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.command(rec, "submit", "submit", "--kind", "metered", "--tenant", "acme", file)
	got := map[string]map[string]string{}
	for _, m := range rec.Metrics() {
		got[m.Name] = m.Attrs
		t.Logf("%s %s %v", m.Service, m.Name, m.Attrs)
	}
	for _, want := range []string{"claimcheck.payload.checked_in", "messaging.client.operation.duration", "messaging.client.sent.messages"} {
		if got[want] == nil {
			t.Errorf("no %s metric pushed", want)
		}
	}
	if a := got["messaging.client.sent.messages"]; a["messaging.system"] != "river" || a["messaging.destination.name"] != "metered" || a["messaging.operation.name"] != "enqueue" {
		t.Errorf("messaging.client.sent.messages attributes %v", a)
	}
}
