package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/pipeline/pipelinetest"
)

// stubGate is a Gate for these tests: loopback peers are local, and the
// one token it accepts is "good". (serve's gate is the shared one of the
// HTTP API; these tests check what the console does with a Gate's
// answers.)
type stubGate struct{}

func (stubGate) Local(r *http.Request) bool { return LoopbackPeer(r.RemoteAddr) }

func (stubGate) Verify(_ context.Context, token string) error {
	if token == "good" {
		return nil
	}
	return errors.New("unknown token")
}

type bundle struct {
	p   *pipeline.Pipeline
	mux *http.ServeMux
	c   *Console
	// bucket is the file store's directory.
	bucket string
}

// setup opens a pipeline on a fresh SQLite database and a signing file
// store, and mounts the console on a mux.
func setup(t *testing.T) *bundle {
	t.Helper()
	return setupDB(t, pipelinetest.SQLiteDatabase(t))
}

// setupDB is setup on the job database database.
func setupDB(t *testing.T, database string) *bundle {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.Join(dir, "bucket"), &claimcheck.Options{
		SpoolDir: filepath.Join(dir, "spool"), Secret: []byte("console-test-secret-0123456789"), SignTickets: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p, err := pipeline.Open(ctx, pipeline.Config{Database: database, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r, err := claimcheck.ComputeRetention(claimcheck.RetentionInputs{Backlog: 24 * 3600e9, RetryWindow: 3600e9, DeadLetter: 14 * 24 * 3600e9, ReplayMargin: 7 * 24 * 3600e9})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	ready := []ReadyCheck{{"database", p.DB().PingContext}, {"store", p.CheckStores}}
	c, err := Mount(ctx, mux, Options{Pipeline: p, Gate: stubGate{}, Retention: r, StoreURL: "file://" + filepath.Join(dir, "bucket"), Ready: ready})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{p: p, mux: mux, c: c, bucket: filepath.Join(dir, "bucket")}
}

// do serves one request from remote (ip:port) naming host.
func (b *bundle) do(method, path, remote, host string, h http.Header, body io.Reader) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, body)
	req.RemoteAddr, req.Host = remote, host
	for k, v := range h {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	b.mux.ServeHTTP(rec, req)
	return rec
}

func TestLoopbackPeer(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5000": true, "127.0.0.2:5000": true, "127.255.255.254:1": true, "[::1]:80": true,
		"[::ffff:127.0.0.1]:80": true, "192.0.2.1:80": false, "10.0.0.1:1": false, "[::ffff:10.0.0.1]:1": false,
		"[2001:db8::1]:80": false, "0.0.0.0:1": false, "": false, "127.0.0.1": false, "localhost:80": false,
	} {
		if got := LoopbackPeer(addr); got != want {
			t.Errorf("LoopbackPeer(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "LOCALHOST": true, "localhost.": true, "app.localhost:1": true,
		"[::1]:8080": true, "127.3.4.5": true, "attacker.example": false, "attacker.example:8080": false,
		"localhost.attacker.example": false, "192.0.2.1:8080": false, "": false, "[::ffff:127.0.0.1]:1": true,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestGate: a local request is served; from another address, no token is
// 401, a wrong one 403, the right one (header or login cookie) is served;
// a loopback peer naming another host (DNS rebinding) is not local; a
// cross-site POST is refused whoever sends it.
func TestGate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		name, remote, host string
		h                  http.Header
		want               int
	}{
		{"local", "127.0.0.1:4000", "127.0.0.1:8080", nil, 200},
		{"local ::1", "[::1]:4000", "localhost:8080", nil, 200},
		{"other host, no token", "192.0.2.7:4000", "192.0.2.1:8080", nil, 401},
		{"other host, wrong token", "192.0.2.7:4000", "192.0.2.1:8080", http.Header{"Authorization": {"Bearer bad"}}, 403},
		{"other host, token", "192.0.2.7:4000", "192.0.2.1:8080", http.Header{"Authorization": {"Bearer good"}}, 200},
		{"other host, cookie", "192.0.2.7:4000", "192.0.2.1:8080", http.Header{"Cookie": {TokenCookie + "=good"}}, 200},
		{"rebinding", "127.0.0.1:4000", "attacker.example", nil, 401},
	} {
		for _, path := range []string{"/", "/console/dead", "/riverui/api/jobs?state=available"} {
			if rec := b.do("GET", path, c.remote, c.host, c.h, nil); rec.Code != c.want {
				t.Errorf("%s: GET %s: %d %s, want %d", c.name, path, rec.Code, rec.Body, c.want)
			}
		}
	}
	cross := http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"http://attacker.example"}}
	if rec := b.do("POST", "/console/dead/1/replay", "127.0.0.1:4000", "127.0.0.1:8080", cross, nil); rec.Code != 403 || !strings.Contains(rec.Body.String(), "cross-origin") {
		t.Errorf("cross-site replay: %d %s", rec.Code, rec.Body)
	}
	if rec := b.do("POST", "/riverui/api/jobs/retry", "127.0.0.1:4000", "127.0.0.1:8080", cross, strings.NewReader(`{"ids":["1"]}`)); rec.Code != 403 {
		t.Errorf("cross-site River UI retry: %d %s", rec.Code, rec.Body)
	}
	same := http.Header{"Sec-Fetch-Site": {"same-origin"}, "Content-Type": {"application/x-www-form-urlencoded"}}
	rec := b.do("POST", "/console/login", "192.0.2.7:4000", "192.0.2.1:8080", same, strings.NewReader("token=good"))
	if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Set-Cookie"), "HttpOnly") || !strings.Contains(rec.Header().Get("Set-Cookie"), "SameSite=Strict") {
		t.Errorf("login: %d %v", rec.Code, rec.Header())
	}
	if rec := b.do("POST", "/console/login", "192.0.2.7:4000", "192.0.2.1:8080", same, strings.NewReader("token=bad")); rec.Code != 403 || rec.Header().Get("Set-Cookie") != "" {
		t.Errorf("login with a wrong token: %d %v", rec.Code, rec.Header())
	}
}

// TestRiverUIRedacted: River UI runs on SQLite and PostgreSQL, and its API's job answers
// carry redacted tickets: no key, no inline payload, no signature, no full
// digest; the arguments still say tenant, size and placement.
func TestRiverUIRedacted(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(testing.TB) string{"sqlite": pipelinetest.SQLiteDatabase, "postgres": pipelinetest.PostgresDatabase} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testRiverUIRedacted(t, setupDB(t, db(t)))
		})
	}
}

func testRiverUIRedacted(t *testing.T, b *bundle) {
	if b.c.RiverUIError != nil {
		t.Fatalf("River UI does not run on %s: %v", b.p.Dialect(), b.c.RiverUIError)
	}
	ctx := t.Context()
	marker := "CONSOLE-TEST-MARKER"
	small, err := b.p.Enqueue(ctx, "echo", "acme", strings.NewReader(marker+" inline"), nil)
	if err != nil {
		t.Fatal(err)
	}
	big, err := b.p.Enqueue(ctx, "echo", "acme", bytes.NewReader(bytes.Repeat([]byte(marker+" offloaded\n"), 10000)), nil)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{marker, base64.StdEncoding.EncodeToString([]byte(marker + " inline"))[:20]}
	for _, res := range []*pipeline.EnqueueResult{small, big} {
		j, err := b.p.Get(ctx, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		tk := j.Ticket()
		secrets = append(secrets, tk.SHA256, tk.Sig)
		if tk.Key != "" {
			secrets = append(secrets, tk.Key)
		}
	}
	for _, path := range []string{"/riverui/api/jobs?state=available", "/riverui/api/jobs/" + jsonID(small.JobID), "/riverui/api/jobs/" + jsonID(big.JobID)} {
		rec := b.do("GET", path, "127.0.0.1:4000", "127.0.0.1:8080", nil, nil)
		body := rec.Body.String()
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, rec.Code, body)
		}
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("GET %s shows %q:\n%s", path, s, body)
			}
		}
		if !strings.Contains(body, `\"placement\":`) || !strings.Contains(body, `\"tenant\":\"acme\"`) {
			t.Errorf("GET %s: no redacted ticket in the arguments:\n%s", path, body)
		}
	}
}

func jsonID(id int64) string { b, _ := json.Marshal(id); return string(b) }

// FuzzLoopbackHost: whatever the Host header, LoopbackHost never panics,
// and says yes only for localhost names and loopback addresses.
func FuzzLoopbackHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "localhost", "[::1]:1", "attacker.example", "127.0.0.1.attacker.example", "[::ffff:127.0.0.1]", "%31%32%37.0.0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !LoopbackHost(host) {
			return
		}
		h := strings.ToLower(host)
		if !strings.Contains(h, "localhost") && !strings.Contains(h, "127.") && !strings.Contains(h, "::1") {
			t.Errorf("LoopbackHost(%q) is true", host)
		}
	})
}

// FuzzRedactJSON: whatever River UI answers, what leaves is JSON whose
// every "args" is a redacted ticket (no inline payload, wrapped key or
// signature; a key cut after the tenant's prefix) or says it is not one,
// and whose recorded output holds only redacted result tickets.
func FuzzRedactJSON(f *testing.F) {
	f.Add(`{"data":[{"id":1,"args":"{\"kind\":\"echo\",\"tenant\":\"acme\",\"ticket\":{\"v\":1,\"tenant\":\"acme\",\"store\":\"default\",\"key\":\"payloads/acme/ab/abababababababababababababababababababababababababababababababab\",\"sha256\":\"abababababababababababababababababababababababababababababababab\",\"size\":3,\"created\":\"2026-01-01T00:00:00Z\"}}","metadata":{"output":{"result":{"key":"results/acme/x"}}}}]}`)
	f.Add(`{"args":{"key":"SECRET"},"metadata":"SECRET"}`)
	f.Add(`[{"args":"SECRET","metadata":{"output":"SECRET"}}]`)
	f.Fuzz(func(t *testing.T, doc string) {
		out, err := redactJSON([]byte(doc))
		if err != nil {
			return
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("redactJSON gave invalid JSON %q", out)
		}
		checkRedacted(t, v)
	})
}

// checkRedacted fails unless every args and metadata output in v is
// redacted.
func checkRedacted(t *testing.T, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			switch k {
			case "args":
				s, ok := e.(string)
				if !ok {
					t.Fatalf("args is %T, not a string", e)
				}
				var a struct {
					Ticket map[string]any `json:"ticket"`
				}
				if s != string(pipeline.RedactArgs(nil)) && (json.Unmarshal([]byte(s), &a) != nil || !redactedTicket(a.Ticket)) {
					t.Fatalf("args not redacted: %s", s)
				}
			case "metadata":
				md, ok := e.(map[string]any)
				if !ok {
					if m, _ := json.Marshal(e); string(m) != string(pipeline.RedactArgs(nil)) {
						t.Fatalf("metadata not redacted: %s", m)
					}
					continue
				}
				if o, ok := md["output"].(map[string]any); ok {
					if r, ok := o["result"].(map[string]any); ok && !redactedTicket(r) && r["redacted"] == nil {
						t.Fatalf("result ticket not redacted: %v", r)
					}
				}
			default:
				checkRedacted(t, e)
			}
		}
	case []any:
		for _, e := range v {
			checkRedacted(t, e)
		}
	}
}

// redactedTicket reports whether a decoded ticket is a RedactedTicket.
func redactedTicket(tk map[string]any) bool {
	if tk == nil {
		return false
	}
	for _, f := range []string{"inline", "dek", "sig", "sha256"} {
		if _, ok := tk[f]; ok {
			return false
		}
	}
	key, _ := tk["key"].(string)
	return key == "" || strings.HasSuffix(key, "…")
}

// FuzzReadIDs: River UI's action bodies parse or are refused, never panic,
// and every id read is a positive job id.
func FuzzReadIDs(f *testing.F) {
	for _, s := range []string{`{"ids":["1","2"]}`, `{"ids":[3]}`, `{"ids":[]}`, `{"ids":["-1"]}`, `{"ids":["1e3"]}`, `nope`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "/riverui/api/jobs/retry", strings.NewReader(body))
		ids, err := readIDs(req)
		if err != nil {
			return
		}
		for _, id := range ids {
			if id <= 0 {
				t.Errorf("readIDs(%q) gave id %d", body, id)
			}
		}
	})
}

// TestOutboxAndStorage: on SQLite and on PostgreSQL, the outbox page
// counts entries waiting per destination with the oldest one's age, and
// the storage page sums the claims registry per tenant, each object once.
func TestOutboxAndStorage(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(testing.TB) string{"sqlite": pipelinetest.SQLiteDatabase, "postgres": pipelinetest.PostgresDatabase} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupDB(t, db(t))
			ctx := t.Context()
			data := bytes.Repeat([]byte("outbox payload\n"), 10000) // 150,000 bytes: offloaded
			for _, dests := range [][]string{{"orders"}, {"orders", "audit"}} {
				if _, err := b.p.Enqueue(ctx, "echo", "acme", bytes.NewReader(data), &pipeline.EnqueueOptions{Destinations: dests}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := b.p.Enqueue(ctx, "echo", "globex", bytes.NewReader(data[:100000]), nil); err != nil {
				t.Fatal(err)
			}
			stats, err := b.p.OutboxStats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(stats) != 2 || stats[0].Destination != "audit" || stats[0].Depth != 1 || stats[1].Destination != "orders" || stats[1].Depth != 2 || stats[1].Oldest.IsZero() {
				t.Errorf("OutboxStats = %+v, want audit 1, orders 2 with their oldest", stats)
			}
			rec := b.do("GET", "/console/outbox", "127.0.0.1:4000", "127.0.0.1:8080", nil, nil)
			if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, `id="outbox-orders"`) || !strings.Contains(body, `<td class="depth">2</td>`) {
				t.Errorf("outbox page: %d %s", rec.Code, body)
			}
			usage, err := b.p.StorageByTenant(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []pipeline.TenantStorage{{Tenant: "acme", Role: "payload", Objects: 1, Bytes: int64(len(data))}, {Tenant: "globex", Role: "payload", Objects: 1, Bytes: 100000}}
			if len(usage) != 2 || usage[0] != want[0] || usage[1] != want[1] {
				t.Errorf("StorageByTenant = %+v, want %+v", usage, want)
			}
			if rec := b.do("GET", "/console/storage", "127.0.0.1:4000", "127.0.0.1:8080", nil, nil); rec.Code != 200 || !strings.Contains(rec.Body.String(), "globex") {
				t.Errorf("storage page: %d %s", rec.Code, rec.Body)
			}
		})
	}
}
