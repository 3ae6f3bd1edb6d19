package clientsuite_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/internal/telemetry/otlptest"
)

// TestClientsTrace: one trace id from a Python producer (submit with the
// caller's traceparent) through serve's HTTP API to a JavaScript worker
// (the claim's traceparent, sent again with its result) and the result's
// check-in, captured by an in-test OTLP receiver over http/protobuf and
// over gRPC; the spans are logged with their messaging attributes.
func TestClientsTrace(t *testing.T) {
	py, js := pythonClient(), jsClient()
	need(t, py)
	need(t, js)
	for _, tc := range []struct {
		name string
		rec  func(testing.TB) *otlptest.Receiver
	}{{"http", otlptest.NewHTTP}, {"grpc", otlptest.NewGRPC}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.rec(t)
			for _, kv := range append(rec.Env("serve"), "OTEL_TRACES_EXPORTER=otlp") {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			d := newDeployment(t, dbtest.SQLite)
			url := d.serve()
			var id [24]byte
			rand.Read(id[:])
			traceID, parent := hex.EncodeToString(id[:16]), hex.EncodeToString(id[16:])
			traceparent := "00-" + traceID + "-" + parent + "-01"

			out := py.runEnv(t, url, nil, "-c", `import sys
from claimcheck import Client
print(Client().submit(b"traced payload", "traced", "acme", traceparent=sys.argv[1])["id"])`, traceparent)
			t.Logf("Python producer: job %s, sent traceparent %s", strings.TrimSpace(out), traceparent)
			out = js.runEnv(t, url, nil, "--input-type=module", "-e", `import { Client } from './index.js';
const c = await new Client().claim('traced', { wait: 30 });
if (!c) throw new Error('no claim');
const outcome = await c.complete(Buffer.from('traced result'));
console.log(JSON.stringify({ traceparent: c.traceparent, outcome }));`)
			var worker struct {
				Traceparent string         `json:"traceparent"`
				Outcome     map[string]any `json:"outcome"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &worker); err != nil {
				t.Fatalf("JavaScript worker printed %q: %v", out, err)
			}
			t.Logf("JavaScript worker: claim's traceparent %s, outcome %v", worker.Traceparent, worker.Outcome)
			if parts := strings.Split(worker.Traceparent, "-"); len(parts) != 4 || parts[1] != traceID {
				t.Errorf("the claim's traceparent %q is not in the producer's trace %s", worker.Traceparent, traceID)
			}
			if worker.Outcome["state"] != "completed" {
				t.Errorf("outcome %v, want completed", worker.Outcome)
			}

			isResult := func(s otlptest.Span) bool {
				return s.Name == "claimcheck.check_in" && s.Attrs["claimcheck.role"] == "result"
			}
			var trace []otlptest.Span
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				// The attempt's span ends last, once the result is checked in.
				if trace = rec.Trace(traceID); slices.ContainsFunc(trace, isResult) && slices.ContainsFunc(trace, func(s otlptest.Span) bool { return s.Name == "process traced" }) {
					break
				}
			}
			t.Logf("trace %s (%s), %d spans:\n%s", traceID, rec.Protocol, len(trace), otlptest.Format(trace, "messaging.", "error.type", "claimcheck."))
			for _, want := range []struct{ name, op string }{
				{"send traced", "enqueue"}, {"process traced", "work"}, {"claimcheck.claim", ""}, {"claimcheck.handler", ""},
			} {
				i := slices.IndexFunc(trace, func(s otlptest.Span) bool { return s.Name == want.name })
				switch {
				case i < 0:
					t.Errorf("trace %s has no %s span", traceID, want.name)
				case want.op != "" && (trace[i].Attrs["messaging.operation.name"] != want.op || trace[i].Attrs["messaging.system"] != "river" ||
					trace[i].Attrs["messaging.destination.name"] != "traced" || trace[i].Attrs["messaging.message.id"] == ""):
					t.Errorf("span %s: messaging attributes %v", want.name, trace[i].Attrs)
				}
			}
			if !slices.ContainsFunc(trace, isResult) {
				t.Errorf("trace %s has no result check-in", traceID)
			}
			if i := slices.IndexFunc(trace, func(s otlptest.Span) bool { return s.Name == "send traced" }); i >= 0 && trace[i].Parent != parent {
				t.Errorf("the enqueue's parent is %s, want the producer's span %s", trace[i].Parent, parent)
			}
			if php := phpClient(); php.missing == "" {
				// The PHP client, producer and worker: the claim's trace id
				// is the one it submitted with.
				rand.Read(id[:])
				traceID = hex.EncodeToString(id[:16])
				out := strings.TrimSpace(php.runEnv(t, url, nil, "-r", `require 'src/ClaimCheck.php';
$c = new ClaimCheck\Client();
$c->submit('php traced', 'traced', 'acme', traceparent: $argv[1]);
$cl = $c->claim('traced', [], 30);
$o = $cl->complete('php result');
echo $cl->traceparent, ' ', $o['state'], "\n";`, "00-"+traceID+"-"+hex.EncodeToString(id[16:])+"-01"))
				t.Logf("PHP producer and worker: %s", out)
				if f := strings.Fields(out); len(f) != 2 || !strings.Contains(f[0], "-"+traceID+"-") || f[1] != "completed" {
					t.Errorf("PHP: claim's traceparent and outcome %q, want trace %s, completed", out, traceID)
				}
			}
		})
	}
}
