package httpapi_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/apiauth"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/internal/httpapi"
	"github.com/claimcheck/claimcheck/internal/testenv"
	"github.com/claimcheck/claimcheck/pipeline"
	_ "github.com/claimcheck/claimcheck/stores/s3store"
)

const docPath = "../../docs/openapi.yaml"

// backend is a job database and store pair the API is tested on.
type backend struct {
	name string
	open func(t *testing.T) (database, storeURL string)
}

var backends = []backend{
	{"sqlite+file", func(t *testing.T) (string, string) {
		return dbtest.SQLite(t), "file://" + filepath.Join(t.TempDir(), "objects")
	}},
	{"postgres+s3", func(t *testing.T) (string, string) {
		s3 := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", `scripts/seaweedfs.sh build && scripts/seaweedfs.sh start && eval "$(scripts/seaweedfs.sh env)"`)
		var b [6]byte
		rand.Read(b[:])
		return dbtest.Postgres(t), s3 + fmt.Sprintf("&prefix=httpapi-%x/", b)
	}},
}

// fixture is a running API on a real job database and store.
type fixture struct {
	t      *testing.T
	p      *pipeline.Pipeline
	store  *claimcheck.Store
	cold   *claimcheck.Store // the named store "cold"
	api    *httpapi.API
	srv    *httptest.Server
	tokens *apiauth.Store
	client *http.Client
	logs   *logSink
}

// logSink keeps the API's log lines and signals each.
type logSink struct {
	mu    sync.Mutex
	lines []string
	ch    chan string
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(p))
	l.mu.Unlock()
	select {
	case l.ch <- string(p):
	default:
	}
	return len(p), nil
}

func (l *logSink) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "")
}

func newFixture(t *testing.T, be backend, o httpapi.Options) *fixture {
	t.Helper()
	ctx := t.Context()
	database, storeURL := be.open(t)
	store, err := claimcheck.OpenStore(ctx, storeURL, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// A named store beside the default one (serve's --store cold=URL).
	cold, err := claimcheck.OpenStore(ctx, "file://"+filepath.Join(t.TempDir(), "cold"), &claimcheck.Options{Name: "cold", SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cold.Close() })
	p, err := pipeline.Open(ctx, pipeline.Config{Database: database, Store: store, Stores: []*claimcheck.Store{cold}, Retry: claimcheck.RetryPolicy{Base: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	f := &fixture{t: t, p: p, store: store, cold: cold, tokens: apiauth.New(p.DB()), logs: &logSink{ch: make(chan string, 64)}}
	o.Pipeline, o.Tokens = p, f.tokens
	o.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	if f.api, err = httpapi.New(o); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(httpapi.PathPrefix, f.api.Handler())
	f.srv = httptest.NewServer(mux)
	t.Cleanup(func() { f.srv.Close(); f.api.Close() })
	f.client = &http.Client{Transport: newValidator(t, f.srv.URL)}
	return f
}

// objects lists the store's objects at final keys.
func (f *fixture) objects() []string {
	f.t.Helper()
	var keys []string
	it := f.store.Bucket().List(nil)
	for {
		obj, err := it.Next(f.t.Context())
		if errors.Is(err, io.EOF) {
			return keys
		}
		if err != nil {
			f.t.Fatalf("list the store: %v", err)
		}
		if !claimcheck.IsTempKey(obj.Key) && obj.Key != claimcheck.NamespaceMarkerKey {
			keys = append(keys, obj.Key)
		}
	}
}

// jobCount counts the job database's jobs.
func (f *fixture) jobCount() int {
	f.t.Helper()
	var n int
	if err := f.p.DB().QueryRowContext(f.t.Context(), `SELECT COUNT(*) FROM river_job`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// do sends a request and returns the answer, its body read.
func (f *fixture) do(method, path, token string, body io.Reader, hdr map[string]string) (*http.Response, []byte) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.srv.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	return resp, b
}

// want checks an answer's status, and for an error its reason.
func (f *fixture) want(resp *http.Response, body []byte, status int, reason string) {
	f.t.Helper()
	if resp.StatusCode != status {
		f.t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	if reason != "" {
		var e httpapi.Error
		if err := json.Unmarshal(body, &e); err != nil || e.Reason != reason || e.Message == "" {
			f.t.Fatalf("%s %s: body %s, want reason %q", resp.Request.Method, resp.Request.URL.Path, body, reason)
		}
	}
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha-256=:" + base64.StdEncoding.EncodeToString(s[:]) + ":"
}

func (f *fixture) submit(kind, tenant, token string, payload []byte, hdr map[string]string) httpapi.Submitted {
	f.t.Helper()
	if hdr == nil {
		hdr = map[string]string{}
	}
	hdr["Content-Digest"] = digest(payload)
	resp, body := f.do("POST", "/v1/jobs?kind="+kind+"&tenant="+tenant, token, bytes.NewReader(payload), hdr)
	if resp.StatusCode != 201 && resp.StatusCode != 200 {
		f.t.Fatalf("submit: status %d: %s", resp.StatusCode, body)
	}
	var s httpapi.Submitted
	if err := json.Unmarshal(body, &s); err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) claim(kind, token, query string) (httpapi.Claim, bool) {
	f.t.Helper()
	resp, body := f.do("POST", "/v1/claims?kind="+kind+query, token, nil, nil)
	if resp.StatusCode == 204 {
		return httpapi.Claim{}, false
	}
	f.want(resp, body, 200, "")
	var c httpapi.Claim
	if err := json.Unmarshal(body, &c); err != nil {
		f.t.Fatal(err)
	}
	return c, true
}

func (f *fixture) job(id int64, token string) pipeline.JobInfo {
	f.t.Helper()
	resp, body := f.do("GET", fmt.Sprintf("/v1/jobs/%d", id), token, nil, nil)
	f.want(resp, body, 200, "")
	var j pipeline.JobInfo
	if err := json.Unmarshal(body, &j); err != nil {
		f.t.Fatal(err)
	}
	return j
}

// waitJob polls the job until cond holds (the rescue and retries run on
// River's own schedule; bounded by the test's deadline).
func (f *fixture) waitJob(id int64, what string, cond func(pipeline.JobInfo) bool) pipeline.JobInfo {
	f.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		j, err := f.p.Get(f.t.Context(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		if cond(*j) {
			return *j
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("job %d: not %s after 90s: %+v", id, what, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func TestAPI(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			t.Run("ProduceWorkResult", func(t *testing.T) { testProduceWorkResult(t, be) })
			t.Run("Refusals", func(t *testing.T) { testRefusals(t, be) })
			t.Run("Tenants", func(t *testing.T) { testTenants(t, be) })
			t.Run("LeaseExpires", func(t *testing.T) { testLeaseExpires(t, be) })
			t.Run("ListCancelReplay", func(t *testing.T) { testListCancelReplay(t, be) })
			t.Run("LegacyRiverKind", func(t *testing.T) { testLegacyRiverKind(t, be) })
			t.Run("Attachments", func(t *testing.T) { testAttachments(t, be) })
			t.Run("NamedStore", func(t *testing.T) { testNamedStore(t, be) })
		})
	}
}

// testLegacyRiverKind: a job of River kind "claimcheck", as every job was
// before River kinds were claimcheck kinds, is shown, claimed by a remote
// worker and completed; a job submitted now has its kind as River kind.
func testLegacyRiverKind(t *testing.T, be backend) {
	f := newFixture(t, be, httpapi.Options{})
	old := f.submit("render", "acme", "", []byte("an old job"), nil)
	riverKind := func(id int64) string {
		var k string
		if err := f.p.DB().QueryRowContext(t.Context(), `SELECT kind FROM river_job WHERE id = $1`, id).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	if k := riverKind(old.ID); k != "render" {
		t.Fatalf("submitted job's River kind %q, want render", k)
	}
	if _, err := f.p.DB().ExecContext(t.Context(), `UPDATE river_job SET kind = 'claimcheck' WHERE id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	if j := f.job(old.ID, ""); j.Kind != "render" || j.State != "available" {
		t.Fatalf("legacy job: %+v", j)
	}
	c, ok := f.claim("render", "", "&wait=20")
	if !ok || c.Job.ID != old.ID {
		t.Fatalf("claim: %+v, %v; want the legacy job %d", c, ok, old.ID)
	}
	resp, body := f.do("POST", "/v1/claims/"+c.Lease+"/complete", "", nil, nil)
	f.want(resp, body, 200, "")
	// Without a result River's completer settles the job, a moment later.
	f.waitJob(old.ID, "completed", func(j pipeline.JobInfo) bool { return j.State == "completed" })
}

// testProduceWorkResult submits, claims, streams, completes and fetches;
// and fails one job permanently and one transiently.
func testProduceWorkResult(t *testing.T, be backend) {
	f := newFixture(t, be, httpapi.Options{})
	payload := randomBytes(300 << 10) // offloaded
	s := f.submit("render", "acme", "", payload, map[string]string{"Idempotency-Key": "doc-1", "Content-Type": "application/pdf"})
	if s.Duplicate || s.Ticket.Size != int64(len(payload)) || s.Ticket.Inline || s.Ticket.Type != "application/pdf" || s.Tenant != "acme" {
		t.Fatalf("submit: %+v", s)
	}
	if again := f.submit("render", "acme", "", payload, map[string]string{"Idempotency-Key": "doc-1"}); !again.Duplicate || again.ID != s.ID {
		t.Fatalf("second submit with the idempotency key: %+v, want the first job as a duplicate", again)
	}
	resp, body := f.do("POST", "/v1/jobs?kind=render&tenant=acme", "", bytes.NewReader([]byte("other bytes")), map[string]string{"Idempotency-Key": "doc-1"})
	f.want(resp, body, 409, httpapi.ReasonIdempotencyConflict)
	small := f.submit("render", "acme", "", []byte("small inline payload"), nil)
	if !small.Ticket.Inline {
		t.Fatalf("small submit not inline: %+v", small)
	}
	if j := f.job(s.ID, ""); j.State != "available" || j.Kind != "render" || j.Attempts != 0 {
		t.Fatalf("job before work: %+v", j)
	}
	resp, body = f.do("GET", fmt.Sprintf("/v1/jobs/%d/result", s.ID), "", nil, nil)
	f.want(resp, body, 409, httpapi.ReasonNoResult)

	submitted := map[int64][]byte{s.ID: payload, small.ID: []byte("small inline payload")}
	for range 2 {
		c, ok := f.claim("render", "", "&wait=20")
		if !ok {
			t.Fatal("claim: no job within 20s")
		}
		want, ok := submitted[c.Job.ID]
		if !ok || c.Job.Attempt != 1 || c.Payload.SHA256 == "" || c.Lease == "" {
			t.Fatalf("claim: %+v, want one of the jobs submitted", c)
		}
		delete(submitted, c.Job.ID)
		resp, got := f.do("GET", "/v1/claims/"+c.Lease+"/payload", "", nil, nil)
		f.want(resp, got, 200, "")
		if !bytes.Equal(got, want) || resp.Header.Get("Content-Digest") != digest(want) {
			t.Fatalf("payload: %d bytes, digest %q; want the %d bytes submitted", len(got), resp.Header.Get("Content-Digest"), len(want))
		}
		resp, body := f.do("POST", "/v1/claims/"+c.Lease+"/extend", "", nil, nil)
		f.want(resp, body, 200, "")
		result := append([]byte("result of "), want[:16]...)
		resp, body = f.do("POST", "/v1/claims/"+c.Lease+"/complete", "", bytes.NewReader(result), map[string]string{"Content-Type": "text/plain", "Content-Digest": digest(result)})
		f.want(resp, body, 200, "")
		var o httpapi.OutcomeJSON
		if err := json.Unmarshal(body, &o); err != nil || o.State != "completed" || o.ID != c.Job.ID {
			t.Fatalf("complete: %s", body)
		}
		resp, body = f.do("POST", "/v1/claims/"+c.Lease+"/complete", "", bytes.NewReader(result), nil)
		f.want(resp, body, 404, httpapi.ReasonLeaseNotFound)
		j := f.job(c.Job.ID, "")
		if j.State != "completed" || !j.HasResult || j.FinalizedAt == nil {
			t.Fatalf("job after complete: %+v", j)
		}
		resp, got = f.do("GET", fmt.Sprintf("/v1/jobs/%d/result", c.Job.ID), "", nil, nil)
		f.want(resp, got, 200, "")
		if !bytes.Equal(got, result) || resp.Header.Get("Content-Type") != "text/plain" || resp.Header.Get("Content-Digest") != digest(result) {
			t.Fatalf("result: %q (%s), want %q", got, resp.Header.Get("Content-Type"), result)
		}
	}

	// Failures: permanent dead-letters now, transient retries.
	dead := f.submit("render", "acme", "", randomBytes(70<<10), nil)
	c, ok := f.claim("render", "", "&wait=20")
	if !ok || c.Job.ID != dead.ID {
		t.Fatalf("claim: %+v %v", c, ok)
	}
	resp, body = f.do("POST", "/v1/claims/"+c.Lease+"/fail", "", strings.NewReader(`{"message":"unreadable\u0000 document","permanent":true}`), map[string]string{"Content-Type": "application/json"})
	f.want(resp, body, 200, "")
	var o httpapi.OutcomeJSON
	if err := json.Unmarshal(body, &o); err != nil || o.State != "dead" || o.Reason != claimcheck.ReasonHandler {
		t.Fatalf("permanent fail: %s", body)
	}
	j := f.waitJob(dead.ID, "dead", func(j pipeline.JobInfo) bool { return j.Dead })
	if j.Reason != claimcheck.ReasonHandler || !strings.Contains(j.Error, "unreadable  document") {
		t.Fatalf("dead job: %+v", j)
	}
	retry := f.submit("render", "acme", "", randomBytes(70<<10), nil)
	c, _ = f.claim("render", "", "&wait=20")
	resp, body = f.do("POST", "/v1/claims/"+c.Lease+"/fail", "", strings.NewReader(`{"message":"busy"}`), map[string]string{"Content-Type": "application/json"})
	f.want(resp, body, 200, "")
	if err := json.Unmarshal(body, &o); err != nil || o.State != "retrying" || o.Reason != claimcheck.ReasonTransient {
		t.Fatalf("transient fail: %s", body)
	}
	c2, ok := f.claim("render", "", "&wait=20")
	if !ok || c2.Job.ID != retry.ID || c2.Job.Attempt != 2 {
		t.Fatalf("claim after a transient failure: %+v, want job %d attempt 2", c2, retry.ID)
	}
	resp, body = f.do("POST", "/v1/claims/"+c2.Lease+"/complete", "", nil, nil)
	f.want(resp, body, 200, "")
	// Without a result River's completer completes it, a moment later.
	f.waitJob(retry.ID, "completed", func(j pipeline.JobInfo) bool { return j.State == "completed" })
	if j := f.job(retry.ID, ""); j.State != "completed" || j.HasResult || j.Attempts != 2 {
		t.Fatalf("job completed with no result: %+v", j)
	}
	if _, ok := f.claim("render", "", "&wait=0"); ok {
		t.Fatal("claim on an empty queue returned a job")
	}
	if logs := f.logs.all(); strings.Contains(logs, "payloads/") || strings.Contains(logs, "results/") {
		t.Fatalf("a log line names an object key:\n%s", logs)
	}
}

// testRefusals: a digest mismatch and a connection dropped halfway leave
// no job and no object; malformed input gets 400; too large gets 413.
func testRefusals(t *testing.T, be backend) {
	f := newFixture(t, be, httpapi.Options{MaxPayloadSize: 4 << 20})
	payload := randomBytes(1 << 20)
	resp, body := f.do("POST", "/v1/jobs?kind=render&tenant=acme", "", bytes.NewReader(payload), map[string]string{"Content-Digest": digest([]byte("something else"))})
	f.want(resp, body, 422, httpapi.ReasonDigestMismatch)
	if n, objs := f.jobCount(), f.objects(); n != 0 || len(objs) != 0 {
		t.Fatalf("after a digest mismatch: %d jobs, %d objects; want none", n, len(objs))
	}

	// A connection dropped halfway through a 2 MiB body.
	u, _ := url.Parse(f.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/jobs?kind=render&tenant=acme HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nContent-Digest: %s\r\n\r\n", u.Host, 2*len(payload), digest(append(payload, payload...)))
	if _, err := conn.Write(payload); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	for line := range f.logs.ch { // the submit's end, logged
		if strings.Contains(line, "route=\"POST /v1/jobs\"") {
			if strings.Contains(line, "status=422") {
				continue
			}
			break
		}
	}
	if n, objs := f.jobCount(), f.objects(); n != 0 || len(objs) != 0 {
		t.Fatalf("after a dropped connection: %d jobs, %d objects; want none", n, len(objs))
	}

	resp, body = f.do("POST", "/v1/jobs?kind=render&tenant=acme", "", bytes.NewReader(make([]byte, 5<<20)), nil)
	f.want(resp, body, 413, claimcheck.ReasonPayloadTooLarge)
	// An empty body, by its Content-Length and chunked (its length
	// unknown until its end), as `claimcheck submit` without --allow-empty.
	resp, body = f.do("POST", "/v1/jobs?kind=render&tenant=acme", "", http.NoBody, nil)
	f.want(resp, body, 422, httpapi.ReasonPayloadEmpty)
	resp, body = f.do("POST", "/v1/jobs?kind=render&tenant=acme&allow_empty=false", "", io.MultiReader(), nil)
	f.want(resp, body, 422, httpapi.ReasonPayloadEmpty)
	if n, objs := f.jobCount(), f.objects(); n != 0 || len(objs) != 0 {
		t.Fatalf("after empty submits: %d jobs, %d objects; want none", n, len(objs))
	}
	for _, q := range []string{"kind=render&tenant=acme&allow_empty=yes", "kind=Render&tenant=acme", "tenant=acme", "kind=render", "kind=render&tenant=acme&tenant=globex", "kind=render&tenant=acme&bogus=1", "kind=render&tenant=acme&priority=9", "kind=render&tenant=ac%zz"} {
		resp, body = f.do("POST", "/v1/jobs?"+q, "", strings.NewReader("x"), nil)
		f.want(resp, body, 400, claimcheck.ReasonTicketInvalid)
	}
	resp, body = f.do("POST", "/v1/jobs?kind=render&tenant=acme", "", strings.NewReader("x"), map[string]string{"Content-Digest": "sha-256=:notbase64:"})
	f.want(resp, body, 400, httpapi.ReasonBadRequest)
	resp, body = f.do("GET", "/v1/jobs/x", "", nil, nil)
	f.want(resp, body, 400, httpapi.ReasonBadRequest)
	resp, body = f.do("GET", "/v1/jobs/999999", "", nil, nil)
	f.want(resp, body, 404, httpapi.ReasonJobNotFound)
	resp, body = f.do("GET", "/v1/jobs/999999/result", "", nil, nil)
	f.want(resp, body, 404, httpapi.ReasonJobNotFound)
	resp, body = f.do("POST", "/v1/claims/0123/extend", "", nil, nil)
	f.want(resp, body, 404, httpapi.ReasonLeaseNotFound)
	resp, body = f.do("POST", "/v1/claims?kind=Bad", "", nil, nil)
	f.want(resp, body, 400, claimcheck.ReasonTicketInvalid)
	if n, objs := f.jobCount(), f.objects(); n != 0 || len(objs) != 0 {
		t.Fatalf("after the refusals: %d jobs, %d objects; want none", n, len(objs))
	}
	// allow_empty=true: an empty payload is a job, by Content-Length or
	// chunked.
	for _, b := range []io.Reader{http.NoBody, io.MultiReader()} {
		resp, body = f.do("POST", "/v1/jobs?kind=render&tenant=acme&allow_empty=true", "", b, nil)
		f.want(resp, body, 201, "")
		var s httpapi.Submitted
		if err := json.Unmarshal(body, &s); err != nil || s.Ticket.Size != 0 {
			t.Fatalf("empty submit with allow_empty=true: %s (%v), want a job of 0 bytes", body, err)
		}
	}

	// A route's path with another method: 405 with Allow and the JSON
	// body; headers over MaxHeaderBytes: 431 with it (not net/http's
	// text/plain). Sent around the validator: the document has no such
	// operations.
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/claims", "POST"}, {"DELETE", "/v1/jobs", "POST, GET"}, {"GET", "/v1/jobs/1/cancel", "POST"},
		{"POST", "/v1/dead", "GET"}, {"PUT", "/v1/claims/0123/payload", "GET"},
	} {
		status, hdr, e := rawJSON(t, c.method, f.srv.URL+c.path, nil)
		if status != 405 || hdr.Get("Allow") != c.allow || e.Reason != httpapi.ReasonMethodNotAllowed || e.Message == "" || !e.Permanent {
			t.Errorf("%s %s: %d Allow %q %+v, want 405 Allow %q method-not-allowed", c.method, c.path, status, hdr.Get("Allow"), e, c.allow)
		}
	}
	if status, _, e := rawJSON(t, "GET", f.srv.URL+"/v1/nothing", nil); status != 404 || e.Reason != httpapi.ReasonBadRequest {
		t.Errorf("GET /v1/nothing: %d %+v, want 404 bad-request", status, e)
	}
	status, _, e := rawJSON(t, "GET", f.srv.URL+"/v1/jobs/1", map[string]string{"X-Big": strings.Repeat("x", httpapi.MaxHeaderBytes)})
	if status != 431 || e.Reason != httpapi.ReasonHeadersTooLarge || e.Message == "" {
		t.Errorf("oversized headers: %d %+v, want 431 headers-too-large", status, e)
	}

	// Without tokens, another host gets nothing; with one, a request
	// without it gets 401.
	req := httptest.NewRequest("GET", "/v1/jobs/1", nil)
	req.RemoteAddr = "192.0.2.7:40000"
	rec := httptest.NewRecorder()
	f.api.Handler().ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Fatalf("another host without tokens: %d, want 401", rec.Code)
	}
	req = httptest.NewRequest("GET", "/v1/jobs/1", nil)
	req.RemoteAddr, req.Host = "127.0.0.1:40000", "attacker.example"
	rec = httptest.NewRecorder()
	f.api.Handler().ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Fatalf("a loopback peer naming another host (DNS rebinding): %d, want 401", rec.Code)
	}
	if _, _, err := f.tokens.Create(t.Context(), "", []string{"acme"}); err != nil {
		t.Fatal(err)
	}
	resp, body = f.do("GET", "/v1/jobs/1", "", nil, nil)
	f.want(resp, body, 401, httpapi.ReasonUnauthorized)
	resp, body = f.do("GET", "/v1/jobs/1", apiauth.TokenPrefix+strings.Repeat("A", 43), nil, nil)
	f.want(resp, body, 401, httpapi.ReasonUnauthorized)
}

// twoTenants makes a token for tenant acme and one for globex.
func (f *fixture) twoTenants() (acme, globex string) {
	f.t.Helper()
	acme, _, err := f.tokens.Create(f.t.Context(), "acme", []string{"acme"})
	if err != nil {
		f.t.Fatal(err)
	}
	globex, _, err = f.tokens.Create(f.t.Context(), "globex", []string{"globex"})
	if err != nil {
		f.t.Fatal(err)
	}
	return acme, globex
}

// testTenants: a token for acme gets 403 on globex for submit and claim
// (which name the tenant), and for globex's job and lease the same 404 as
// for a missing one (status, result, the lease endpoints), with nothing
// fetched from the store.
func testTenants(t *testing.T, be backend) {
	f := newFixture(t, be, httpapi.Options{})
	acme, globex := f.twoTenants()
	payload := randomBytes(200 << 10)
	g := f.submit("render", "globex", globex, payload, nil)
	c, ok := f.claim("render", globex, "&wait=20")
	if !ok || c.Job.ID != g.ID {
		t.Fatal("globex claim")
	}
	result := randomBytes(100 << 10) // offloaded
	resp, body := f.do("POST", "/v1/claims/"+c.Lease+"/complete", globex, bytes.NewReader(result), nil)
	f.want(resp, body, 200, "")
	pending := f.submit("render", "globex", globex, randomBytes(100<<10), nil)
	objects := len(f.objects())

	// Submit: refused before the body is read; nothing stored.
	resp, body = f.do("POST", "/v1/jobs?kind=render&tenant=globex", acme, bytes.NewReader(payload), nil)
	f.want(resp, body, 403, claimcheck.ReasonTicketForbidden)
	// The same from a client that sends Connection: close (Python's
	// urllib does) and writes its whole 512 KiB body before reading: it
	// reads the 403, not a connection reset mid-body.
	if status, err := f.rawSubmit("/v1/jobs?kind=render&tenant=globex", acme, 512<<10); err != nil || status != 403 {
		t.Fatalf("a refused submit with Connection: close: status %d, %v; want 403", status, err)
	}
	// Status and result: refused on the job row. The result's object is
	// deleted first: a fetch would answer 410, the refusal comes first.
	if err := f.store.Bucket().Delete(t.Context(), mustResultKey(t, f, g.ID)); err != nil {
		t.Fatal(err)
	}
	resp, body = f.do("GET", fmt.Sprintf("/v1/jobs/%d", g.ID), acme, nil, nil)
	f.want(resp, body, 404, httpapi.ReasonJobNotFound)
	other := strings.ReplaceAll(string(body), strconv.FormatInt(g.ID, 10), "ID")
	missingID := g.ID + 1000
	resp, body = f.do("GET", fmt.Sprintf("/v1/jobs/%d", missingID), acme, nil, nil)
	f.want(resp, body, 404, httpapi.ReasonJobNotFound)
	if missing := strings.ReplaceAll(string(body), strconv.FormatInt(missingID, 10), "ID"); missing != other {
		t.Errorf("another tenant's job answers %s, a missing job %s: want the same", other, missing)
	}
	resp, body = f.do("GET", fmt.Sprintf("/v1/jobs/%d/result", g.ID), acme, nil, nil)
	f.want(resp, body, 404, httpapi.ReasonJobNotFound)
	// globex's own request does claim it: missing (on S3 within the
	// store's consistency grace, not visible yet: retry later).
	resp, body = f.do("GET", fmt.Sprintf("/v1/jobs/%d/result", g.ID), globex, nil, nil)
	if resp.StatusCode == http.StatusServiceUnavailable {
		f.want(resp, body, 503, claimcheck.ReasonNotVisibleYet)
	} else {
		f.want(resp, body, 410, claimcheck.ReasonPayloadMissing)
	}
	// Claim: a globex tenant is refused; without one, acme's token never
	// gets globex's job. Its payload object is deleted first: had anything
	// fetched it, the job would be dead (payload-missing).
	resp, body = f.do("POST", "/v1/claims?kind=render&tenant=globex", acme, nil, nil)
	f.want(resp, body, 403, claimcheck.ReasonTicketForbidden)
	pj, err := f.p.Get(t.Context(), pending.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Bucket().Delete(t.Context(), pj.Ticket().Key); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.claim("render", acme, "&wait=3"); ok {
		t.Fatal("acme's token claimed a globex job")
	}
	j := f.waitJob(pending.ID, "back in its queue", func(j pipeline.JobInfo) bool { return j.State != "running" })
	if j.Dead || j.Reason != "" || j.State == "completed" {
		t.Fatalf("globex's pending job after acme's claim: %+v, want back in its queue, its payload never fetched", j)
	}
	if n := len(f.objects()); n != objects-2 {
		t.Fatalf("objects: %d, want %d (only the two deleted gone)", n, objects-2)
	}
	if f.jobCount() != 2 {
		t.Fatalf("%d jobs, want 2", f.jobCount())
	}
	// The lease endpoints refuse another tenant's lease. (The job whose
	// payload was deleted is dead-lettered by the claim, which waits on.)
	third := f.submit("render", "globex", globex, randomBytes(100<<10), nil)
	c, ok = f.claim("render", globex, "&wait=20")
	if !ok || c.Job.ID != third.ID {
		t.Fatalf("globex claim: %+v, want job %d", c, third.ID)
	}
	resp, body = f.do("GET", "/v1/claims/"+c.Lease+"/payload", acme, nil, nil)
	f.want(resp, body, 404, httpapi.ReasonLeaseNotFound)
	for _, p := range []string{"/extend", "/complete"} {
		resp, body = f.do("POST", "/v1/claims/"+c.Lease+p, acme, nil, nil)
		f.want(resp, body, 404, httpapi.ReasonLeaseNotFound)
	}
	resp, body = f.do("POST", "/v1/claims/"+c.Lease+"/fail", acme, strings.NewReader(`{"message":"x"}`), map[string]string{"Content-Type": "application/json"})
	f.want(resp, body, 404, httpapi.ReasonLeaseNotFound)
	resp, body = f.do("POST", "/v1/claims/"+c.Lease+"/complete", globex, nil, nil)
	f.want(resp, body, 200, "")
	// The job whose payload was deleted is never handed out: the claim
	// that takes it dead-letters it and waits on.
	// (On S3 it stays "not visible yet" for the store's consistency
	// grace: retried without spending an attempt, and never handed out.)
	for i := 0; i < 4; i++ {
		if c, ok := f.claim("render", globex, "&wait=5"); ok {
			t.Fatalf("claim handed out job %d, whose payload is gone", c.Job.ID)
		}
		if j, err := f.p.Get(t.Context(), pending.ID); err != nil || j.Dead {
			break
		}
	}
	if j, err := f.p.Get(t.Context(), pending.ID); err != nil || j.State == "completed" || j.Dead && j.Reason != claimcheck.ReasonPayloadMissing {
		t.Fatalf("job whose payload was deleted: %+v (%v), want not handed out, dead only as payload-missing", j, err)
	}
}

// rawJSON sends a request without the validator and decodes its JSON
// error body (failing the test if it is not JSON).
func rawJSON(t *testing.T, method, url string, hdr map[string]string) (int, http.Header, httpapi.Error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e httpapi.Error
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || json.Unmarshal(body, &e) != nil {
		t.Errorf("%s %s: %d %s %q, want a JSON error body", method, url, resp.StatusCode, ct, body)
	}
	return resp.StatusCode, resp.Header, e
}

// list GETs a listing and decodes it.
func (f *fixture) list(path, token string) httpapi.JobList {
	f.t.Helper()
	resp, body := f.do("GET", path, token, nil, nil)
	f.want(resp, body, 200, "")
	var l httpapi.JobList
	if err := json.Unmarshal(body, &l); err != nil {
		f.t.Fatal(err)
	}
	return l
}

func ids(l httpapi.JobList) []int64 {
	var out []int64
	for _, j := range l.Jobs {
		out = append(out, j.ID)
	}
	return out
}

// sameAsMissing checks that a request on another tenant's job id answers
// exactly as on a missing id: 404 job-not-found, the same body.
func (f *fixture) sameAsMissing(method, pathf, token string, other int64) {
	f.t.Helper()
	resp, body := f.do(method, fmt.Sprintf(pathf, other), token, nil, nil)
	f.want(resp, body, 404, httpapi.ReasonJobNotFound)
	got := strings.ReplaceAll(string(body), strconv.FormatInt(other, 10), "ID")
	missing := other + 1000
	resp, body = f.do(method, fmt.Sprintf(pathf, missing), token, nil, nil)
	f.want(resp, body, 404, httpapi.ReasonJobNotFound)
	if want := strings.ReplaceAll(string(body), strconv.FormatInt(missing, 10), "ID"); got != want {
		f.t.Errorf("%s %s on another tenant's job answers %s, on a missing one %s: want the same", method, pathf, got, want)
	}
}

// testListCancelReplay: GET /v1/jobs and /v1/dead list the token's
// tenants' jobs only, newest first, by kind and state, a page at a time;
// cancel and replay act as `claimcheck dead replay` does (409 job-finished,
// not-dead, payload-missing), and another tenant's job is a missing one.
func testListCancelReplay(t *testing.T, be backend) {
	f := newFixture(t, be, httpapi.Options{})
	acme, globex := f.twoTenants()
	a1 := f.submit("render", "acme", acme, []byte("one"), nil)
	g1 := f.submit("render", "globex", globex, []byte("globex"), nil)
	a2 := f.submit("render", "acme", acme, randomBytes(100<<10), nil) // offloaded
	a3 := f.submit("mail", "acme", acme, []byte("three"), nil)

	if got, want := ids(f.list("/v1/jobs", acme)), []int64{a3.ID, a2.ID, a1.ID}; !slices.Equal(got, want) {
		t.Fatalf("acme's jobs: %v, want %v (newest first, no globex job)", got, want)
	}
	if got := ids(f.list("/v1/jobs", globex)); !slices.Equal(got, []int64{g1.ID}) {
		t.Fatalf("globex's jobs: %v, want [%d]", got, g1.ID)
	}
	page := f.list("/v1/jobs?limit=2", acme)
	if got := ids(page); !slices.Equal(got, []int64{a3.ID, a2.ID}) || page.NextAfter != a2.ID {
		t.Fatalf("first page: %v next %d, want [%d %d] next %d", got, page.NextAfter, a3.ID, a2.ID, a2.ID)
	}
	page = f.list(fmt.Sprintf("/v1/jobs?limit=2&after=%d", page.NextAfter), acme)
	if got := ids(page); !slices.Equal(got, []int64{a1.ID}) || page.NextAfter != 0 {
		t.Fatalf("second page: %v next %d, want [%d], no next", got, page.NextAfter, a1.ID)
	}
	if got := ids(f.list("/v1/jobs?kind=mail", acme)); !slices.Equal(got, []int64{a3.ID}) {
		t.Fatalf("kind=mail: %v, want [%d]", got, a3.ID)
	}
	if got := ids(f.list("/v1/jobs?state=available&kind=render&tenant=acme", acme)); !slices.Equal(got, []int64{a2.ID, a1.ID}) {
		t.Fatalf("state=available kind=render: %v, want [%d %d]", got, a2.ID, a1.ID)
	}
	if got := ids(f.list("/v1/jobs?state=completed", acme)); len(got) != 0 {
		t.Fatalf("state=completed: %v, want none", got)
	}
	resp, body := f.do("GET", "/v1/jobs?tenant=globex", acme, nil, nil)
	f.want(resp, body, 403, claimcheck.ReasonTicketForbidden)
	for _, q := range []string{"state=bogus", "kind=Bad", "limit=0", "limit=1001", "after=x", "bogus=1"} {
		resp, body = f.do("GET", "/v1/jobs?"+q, acme, nil, nil)
		f.want(resp, body, 400, claimcheck.ReasonTicketInvalid)
	}
	resp, body = f.do("GET", "/v1/dead?state=dead", acme, nil, nil)
	f.want(resp, body, 400, claimcheck.ReasonTicketInvalid)

	// Cancel: once; another tenant's job is a missing one.
	resp, body = f.do("POST", fmt.Sprintf("/v1/jobs/%d/cancel", a1.ID), acme, nil, nil)
	f.want(resp, body, 200, "")
	var j pipeline.JobInfo
	if err := json.Unmarshal(body, &j); err != nil || j.State != "cancelled" || !j.Dead {
		t.Fatalf("cancelled job: %s (%v), want state cancelled, dead", body, err)
	}
	resp, body = f.do("POST", fmt.Sprintf("/v1/jobs/%d/cancel", a1.ID), acme, nil, nil)
	f.want(resp, body, 409, httpapi.ReasonJobFinished)
	f.sameAsMissing("POST", "/v1/jobs/%d/cancel", acme, g1.ID)
	if j := f.job(g1.ID, globex); j.State != "available" {
		t.Fatalf("globex's job after acme's cancel: %s, want available", j.State)
	}
	resp, body = f.do("POST", fmt.Sprintf("/v1/jobs/%d/cancel", a2.ID), acme, nil, nil)
	f.want(resp, body, 200, "")

	// Dead letters: acme's two, newest first, paged; none of globex's.
	if got := ids(f.list("/v1/dead", acme)); !slices.Equal(got, []int64{a2.ID, a1.ID}) {
		t.Fatalf("acme's dead letters: %v, want [%d %d]", got, a2.ID, a1.ID)
	}
	page = f.list("/v1/dead?limit=1", acme)
	if got := ids(page); !slices.Equal(got, []int64{a2.ID}) || page.NextAfter != a2.ID {
		t.Fatalf("dead, first page: %v next %d", got, page.NextAfter)
	}
	if got := ids(f.list(fmt.Sprintf("/v1/dead?limit=1&after=%d", a2.ID), acme)); !slices.Equal(got, []int64{a1.ID}) {
		t.Fatalf("dead, second page: %v, want [%d]", got, a1.ID)
	}
	if got := ids(f.list("/v1/dead?kind=mail", acme)); len(got) != 0 {
		t.Fatalf("dead of kind mail: %v, want none", got)
	}
	if got := ids(f.list("/v1/dead", globex)); len(got) != 0 {
		t.Fatalf("globex's dead letters: %v, want none", got)
	}

	// Replay: a1 goes back; then it is not dead. a2's payload object is
	// gone: refused, still dead.
	f.sameAsMissing("POST", "/v1/dead/%d/replay", acme, g1.ID)
	resp, body = f.do("POST", fmt.Sprintf("/v1/dead/%d/replay", a1.ID), acme, nil, nil)
	f.want(resp, body, 200, "")
	if err := json.Unmarshal(body, &j); err != nil || j.State != "available" || j.Dead {
		t.Fatalf("replayed job: %s (%v), want available", body, err)
	}
	resp, body = f.do("POST", fmt.Sprintf("/v1/dead/%d/replay", a1.ID), acme, nil, nil)
	f.want(resp, body, 409, httpapi.ReasonNotDead)
	pj, err := f.p.Get(t.Context(), a2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Bucket().Delete(t.Context(), pj.Ticket().Key); err != nil {
		t.Fatal(err)
	}
	resp, body = f.do("POST", fmt.Sprintf("/v1/dead/%d/replay", a2.ID), acme, nil, nil)
	f.want(resp, body, 409, claimcheck.ReasonPayloadMissing)
	if j := f.job(a2.ID, acme); !j.Dead {
		t.Fatalf("job whose payload is gone, after a refused replay: %s, want still dead", j.State)
	}
	// A running job (held for a remote worker): the cancel answers at
	// once, the job is cancelled when its handler returns (its context
	// cancelled), and the lease is gone.
	a4 := f.submit("cancel-me", "acme", acme, []byte("four"), nil)
	c, ok := f.claim("cancel-me", acme, "&wait=20")
	if !ok || c.Job.ID != a4.ID {
		t.Fatalf("claim: %+v %v, want job %d", c, ok, a4.ID)
	}
	resp, body = f.do("POST", fmt.Sprintf("/v1/jobs/%d/cancel", a4.ID), acme, nil, nil)
	f.want(resp, body, 200, "")
	f.waitJob(a4.ID, "cancelled", func(j pipeline.JobInfo) bool { return j.State == "cancelled" })
	resp, body = f.do("POST", "/v1/claims/"+c.Lease+"/complete", acme, strings.NewReader("late"), nil)
	f.want(resp, body, 404, httpapi.ReasonLeaseNotFound)
	// Every route taking a job id answers another tenant's as a missing one.
	for _, r := range []struct{ method, path string }{{"GET", "/v1/jobs/%d"}, {"GET", "/v1/jobs/%d/result"}, {"POST", "/v1/jobs/%d/cancel"}, {"POST", "/v1/dead/%d/replay"}} {
		f.sameAsMissing(r.method, r.path, globex, a1.ID)
	}
}

func mustResultKey(t *testing.T, f *fixture, id int64) string {
	t.Helper()
	j, err := f.p.Get(t.Context(), id)
	if err != nil || j.ResultTicket() == nil || j.ResultTicket().Key == "" {
		t.Fatalf("job %d has no offloaded result: %v", id, err)
	}
	return j.ResultTicket().Key
}

// testLeaseExpires: a worker that neither finishes nor extends loses the
// job when its lease runs out; another claims and completes it, once.
func testLeaseExpires(t *testing.T, be backend) {
	f := newFixture(t, be, httpapi.Options{Lease: 2 * time.Second})
	s := f.submit("render", "acme", "", randomBytes(100<<10), nil)
	first, ok := f.claim("render", "", "&wait=20")
	if !ok || first.Job.ID != s.ID || first.LeaseSeconds != 2 {
		t.Fatalf("first claim: %+v", first)
	}
	second, ok := f.claim("render", "", "&wait=30")
	if !ok || second.Job.ID != s.ID || second.Job.Attempt != 2 {
		t.Fatalf("claim after the first lease ran out: %+v %v, want job %d attempt 2", second, ok, s.ID)
	}
	resp, body := f.do("POST", "/v1/claims/"+first.Lease+"/complete", "", strings.NewReader("late"), nil)
	f.want(resp, body, 404, httpapi.ReasonLeaseNotFound)
	onTime := randomBytes(100 << 10) // offloaded: a registry row
	resp, body = f.do("POST", "/v1/claims/"+second.Lease+"/complete", "", bytes.NewReader(onTime), nil)
	f.want(resp, body, 200, "")
	j := f.job(s.ID, "")
	if j.State != "completed" || j.Attempts != 2 {
		t.Fatalf("job: %+v, want completed on attempt 2", j)
	}
	resp, got := f.do("GET", fmt.Sprintf("/v1/jobs/%d/result", s.ID), "", nil, nil)
	f.want(resp, got, 200, "")
	if !bytes.Equal(got, onTime) {
		t.Fatalf("result %q, want the second worker's", got)
	}
	rows, err := pipelineClaims(t, f, s.ID)
	if err != nil || rows != 2 { // payload + one result
		t.Fatalf("claims-registry rows of the job: %d (%v), want 2: the payload and one result", rows, err)
	}
}

func pipelineClaims(t *testing.T, f *fixture, id int64) (int, error) {
	var n int
	err := f.p.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM claimcheck_claim WHERE job_id = $1`, id).Scan(&n)
	return n, err
}

// TestOpenAPIRoutes checks every route of the API is in docs/openapi.yaml
// and every path and method of the document is a route.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	doc := loadDoc(t)
	api, err := httpapi.New(httpapi.Options{Pipeline: &pipeline.Pipeline{}, Tokens: apiauth.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for _, r := range api.Routes() {
		routes[r.Method+" "+r.Pattern] = true
	}
	// The claim's answer documents the job's trace context.
	if h := doc.Paths.Value("/v1/claims").Post.Responses.Value("200").Value.Headers; h["traceparent"] == nil {
		t.Error("POST /v1/claims: the traceparent response header is not documented")
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented[method+" "+path] = true
			// Every refusal and failure has the JSON Error body, and every
			// route may answer 401 and 431.
			for _, code := range []string{"401", "431"} {
				if op.Responses.Value(code) == nil {
					t.Errorf("%s %s: no %s answer documented", method, path, code)
				}
			}
			for code, r := range op.Responses.Map() {
				if code < "400" {
					continue
				}
				mt := r.Value.Content.Get("application/json")
				if mt == nil || mt.Schema == nil || mt.Schema.Ref != "#/components/schemas/Error" {
					t.Errorf("%s %s: answer %s has no JSON Error body", method, path, code)
				}
			}
		}
	}
	for r := range routes {
		if !documented[r] {
			t.Errorf("route %s is not in %s", r, docPath)
		}
	}
	for d := range documented {
		if !routes[d] {
			t.Errorf("%s documents %s, which the API does not route", docPath, d)
		}
	}
}

func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", docPath, err)
	}
	return doc
}

// validator is a transport that validates every request and answer
// against docs/openapi.yaml (openapi3filter): parameters, headers, JSON
// bodies and status codes. Streamed payloads are not buffered.
type validator struct {
	t      *testing.T
	router routers.Router
}

func newValidator(t *testing.T, base string) *validator {
	doc := loadDoc(t)
	doc.Servers = openapi3.Servers{{URL: base}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &validator{t: t, router: r}
}

func (v *validator) RoundTrip(req *http.Request) (*http.Response, error) {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		v.t.Errorf("%s %s: not in the OpenAPI document: %v", req.Method, req.URL.Path, err)
		return http.DefaultTransport.RoundTrip(req)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	isJSON := strings.HasPrefix(req.Header.Get("Content-Type"), "application/json")
	if !isJSON {
		opts.ExcludeRequestBody = true
	}
	if isJSON && req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(b))
		check := req.Clone(req.Context())
		check.Body = io.NopCloser(bytes.NewReader(b))
		in.Request = check
	}
	reqErr := openapi3filter.ValidateRequest(req.Context(), in)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ro := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: ro}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.StatusCode == 204 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		rin.SetBodyBytes(b)
	} else {
		ro.ExcludeResponseBody = true
	}
	if err := openapi3filter.ValidateResponse(req.Context(), rin); err != nil {
		v.t.Errorf("%s %s: answer %d does not match the OpenAPI document: %v", req.Method, req.URL.Path, resp.StatusCode, err)
	}
	// A request the API accepted must be one the document allows (the
	// tests' malformed requests are refused, and are not checked).
	if reqErr != nil && resp.StatusCode < 300 {
		v.t.Errorf("%s %s: accepted (%d), but the OpenAPI document refuses the request: %v", req.Method, req.URL.Path, resp.StatusCode, reqErr)
	}
	return resp, nil
}

// rawSubmit POSTs n bytes to path over a connection of its own, as a
// client that sends "Connection: close" and writes its whole body before
// it reads the answer, and returns the answer's status.
func (f *fixture) rawSubmit(path, token string, n int) (int, error) {
	u, err := url.Parse(f.srv.URL)
	if err != nil {
		return 0, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", path, u.Host, token, n)
	if _, err := io.WriteString(conn, head); err != nil {
		return 0, fmt.Errorf("write the request head: %w", err)
	}
	// Slowly, as a loaded client does: longer than the server lingers on
	// a connection it closes (half a second).
	chunk := make([]byte, 64<<10)
	for sent := 0; sent < n; sent += len(chunk) {
		if _, err := conn.Write(chunk[:min(len(chunk), n-sent)]); err != nil {
			return 0, fmt.Errorf("write the body (%d of %d bytes sent): %w", sent, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, fmt.Errorf("read the answer: %w", err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
