// Package httpapi is the versioned HTTP API that `claimcheck serve` mounts
// under /v1, described by docs/openapi.yaml: producers submit payloads as
// streamed request bodies (checked in and enqueued by pipeline.Enqueue,
// the one check-in, with the client's Content-Digest compared before
// anything is enqueued), read jobs and their verified results, and workers
// in any language claim jobs under a lease, fetch their verified payloads
// and complete or fail them.
//
// The worker endpoints do not duplicate the worker: serve runs
// pipeline.Work for each kind being claimed, with a handler that hands
// each job to a waiting HTTP claimer, so the claim and verification of the
// payload (claimcheck.Store.Run), the job lease and its renewal, the
// retry policy, the error classifier and the result's check-in are the
// same as for `claimcheck work`. A remote worker's lease is kept in this
// process: when it runs out, the attempt fails transiently and the retry
// policy returns the job to its queue. Should serve itself die, River's
// rescuer returns the job once its lease (pipeline.Config.Lease) expires.
//
// Auth: with no live API token (internal/apiauth), only loopback peers
// naming a loopback host are answered; with tokens, every request needs
// Authorization: Bearer, and a token acts only on its tenants (403 before
// anything is fetched from the store). Forwarded headers (X-Forwarded-For,
// Forwarded) are never read: behind a proxy, configure tokens.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/propagation"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/apiauth"
	"github.com/claimcheck/claimcheck/internal/console"
	"github.com/claimcheck/claimcheck/pipeline"
)

// PathPrefix is where the API is mounted.
const PathPrefix = "/v1/"

// Defaults of Options.
const (
	// DefaultMaxWait is the longest claim long poll, and the default wait.
	DefaultMaxWait = 60 * time.Second
	// DefaultStallTimeout is how long a request or response body may make
	// no progress at all before the connection is closed.
	DefaultStallTimeout = 60 * time.Second
	// DefaultMaxLeases is how many jobs of one kind this server holds
	// for remote workers at once (the dispatcher's River concurrency).
	DefaultMaxLeases = 16
	// MaxKinds is how many kinds may be claimed through one server.
	MaxKinds = 64
	// MaxWaiting is how many claims may wait at once.
	MaxWaiting = 1024
	// MaxFailureMessage is the longest failure message kept, in bytes.
	MaxFailureMessage = 1024
)

// Options configure the API.
type Options struct {
	// Pipeline enqueues and works the jobs. Required.
	Pipeline *pipeline.Pipeline
	// Tokens are the API tokens; required (an empty table means loopback
	// only).
	Tokens *apiauth.Store
	// Logger gets one line per failed request (reason and message; never
	// payload bytes, tokens or full keys). Default: discard.
	Logger *slog.Logger
	// MaxPayloadSize, in bytes, refuses a larger submit from its
	// Content-Length before reading it (the store refuses it anyway once
	// read past the size: claimcheck.Options.MaxPayloadSize). 0: none.
	MaxPayloadSize int64
	// Lease is a remote worker's lease. Default the pipeline's
	// (pipeline.Pipeline.Lease).
	Lease time.Duration
	// MaxWait bounds a claim's long poll. Default DefaultMaxWait.
	MaxWait time.Duration
	// StallTimeout bounds a body's silence. Default DefaultStallTimeout.
	StallTimeout time.Duration
	// MaxLeases is DefaultMaxLeases by default.
	MaxLeases int
	// HandoffWait is how long a job taken from the queue waits for a
	// claimer of its tenant before going back (pipeline.ErrReturnToQueue).
	// Default 2s.
	HandoffWait time.Duration
}

// API is the /v1 handler. Close it to return held jobs to their queues.
type API struct {
	o      Options
	p      *pipeline.Pipeline
	log    *slog.Logger
	mux    *http.ServeMux
	ctx    context.Context
	cancel context.CancelFunc

	mu          sync.Mutex
	dispatchers map[string]*dispatcher
	leases      map[string]*lease
	byJob       map[int64]*lease
	waiting     int
	closed      bool
	wg          sync.WaitGroup
}

// Route is one route of the API: method and net/http pattern.
type Route struct{ Method, Pattern string }

// Routes are the API's routes, as docs/openapi.yaml describes them.
func (a *API) Routes() []Route {
	return []Route{
		{"POST", "/v1/jobs"},
		{"GET", "/v1/jobs"},
		{"GET", "/v1/jobs/{id}"},
		{"GET", "/v1/jobs/{id}/result"},
		{"POST", "/v1/jobs/{id}/cancel"},
		{"GET", "/v1/dead"},
		{"POST", "/v1/dead/{id}/replay"},
		{"POST", "/v1/claims"},
		{"GET", "/v1/claims/{lease}/payload"},
		{"GET", "/v1/claims/{lease}/attachments/{name}"},
		{"POST", "/v1/claims/{lease}/extend"},
		{"POST", "/v1/claims/{lease}/complete"},
		{"POST", "/v1/claims/{lease}/fail"},
	}
}

// New returns the API. Errors: claimcheck.ErrConfig for a missing
// Pipeline or Tokens.
func New(o Options) (*API, error) {
	if o.Pipeline == nil || o.Tokens == nil {
		return nil, fmt.Errorf("httpapi: no pipeline or token store: %w", claimcheck.ErrConfig)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Lease <= 0 {
		o.Lease = o.Pipeline.Lease()
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.MaxLeases <= 0 {
		o.MaxLeases = DefaultMaxLeases
	}
	if o.HandoffWait <= 0 {
		o.HandoffWait = 2 * time.Second
	}
	a := &API{o: o, p: o.Pipeline, log: o.Logger, mux: http.NewServeMux(), dispatchers: map[string]*dispatcher{}, leases: map[string]*lease{}, byJob: map[int64]*lease{}}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	handlers := map[string]func(http.ResponseWriter, *http.Request, *principal) *Error{
		"POST /v1/jobs":                             a.submit,
		"GET /v1/jobs":                              a.listJobs,
		"POST /v1/jobs/{id}/cancel":                 a.cancelJob,
		"GET /v1/dead":                              a.listDead,
		"POST /v1/dead/{id}/replay":                 a.replayDead,
		"GET /v1/jobs/{id}":                         a.getJob,
		"GET /v1/jobs/{id}/result":                  a.getResult,
		"POST /v1/claims":                           a.claim,
		"GET /v1/claims/{lease}/payload":            a.leasePayload,
		"GET /v1/claims/{lease}/attachments/{name}": a.leaseAttachment,
		"POST /v1/claims/{lease}/extend":            a.extend,
		"POST /v1/claims/{lease}/complete":          a.complete,
		"POST /v1/claims/{lease}/fail":              a.fail,
	}
	for _, rt := range a.Routes() {
		h := handlers[rt.Method+" "+rt.Pattern]
		a.mux.Handle(rt.Method+" "+rt.Pattern, a.guard(h))
	}
	a.mux.Handle(PathPrefix, a.guard(func(w http.ResponseWriter, r *http.Request, _ *principal) *Error {
		if allow := a.allowed(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return refusal(http.StatusMethodNotAllowed, ReasonMethodNotAllowed, fmt.Sprintf("%s is not allowed on this route: %s is (see docs/openapi.yaml)", truncate(r.Method, 16), strings.Join(allow, ", ")))
		}
		return refusal(http.StatusNotFound, ReasonBadRequest, "no such API route (see docs/openapi.yaml)")
	}))
	return a, nil
}

// allowed returns the methods r's path is routed for, in Routes' order
// (none: no route has the path).
func (a *API) allowed(r *http.Request) []string {
	var allow []string
	for _, rt := range a.Routes() {
		if slices.Contains(allow, rt.Method) {
			continue
		}
		probe := *r
		probe.Method = rt.Method
		if _, pattern := a.mux.Handler(&probe); pattern != PathPrefix && pattern != "" {
			allow = append(allow, rt.Method)
		}
	}
	return allow
}

// Handler is the API's handler, for a mux's PathPrefix.
func (a *API) Handler() http.Handler { return a.mux }

// Close stops the dispatchers: jobs held for remote workers go back to
// their queues without spending an attempt.
func (a *API) Close() error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	return nil
}

// principal is who a request acts for: a token, or (token nil) a
// loopback peer of a server without tokens, which may act on any tenant.
type principal struct{ token *apiauth.Token }

func (p *principal) allows(tenant string) bool { return p.token == nil || p.token.Allows(tenant) }

func (p *principal) forbid(tenant string) *Error {
	return refusal(http.StatusForbidden, claimcheck.ReasonTicketForbidden, fmt.Sprintf("this token may not act on tenant %q", tenant))
}

// traceContext is W3C trace context, read from every request's
// traceparent and tracestate headers and written on a claim's answer.
var traceContext = propagation.TraceContext{}

// guard authenticates the request, sets the security headers and turns the
// handler's error into its answer (and one log line).
func (a *API) guard(h func(http.ResponseWriter, *http.Request, *principal) *Error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		// The caller's W3C trace context (traceparent, tracestate), if
		// any, is the parent of what the request does: a job enqueued
		// joins the caller's trace.
		r = r.WithContext(traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		var pr *principal
		var e *Error
		if n := headerBytes(r.Header); n > MaxHeaderBytes {
			e = refusal(http.StatusRequestHeaderFieldsTooLarge, ReasonHeadersTooLarge, fmt.Sprintf("request headers of %d bytes, above the maximum of %d bytes", n, MaxHeaderBytes))
		} else {
			pr, e = a.authenticate(r)
		}
		if e == nil {
			e = h(w, r, pr)
		}
		if e != nil {
			if e.status == 0 {
				e.status = http.StatusInternalServerError
			}
			a.log.WarnContext(r.Context(), "httpapi: request refused", "method", r.Method, "route", r.Pattern, "status", e.status, "reason", e.Reason, "message", e.Message)
			drainBody(r)
			writeError(w, e)
		}
	})
}

// MaxHeaderBytes is the most request header bytes (names, values and
// their separators) the API takes; more gets 431 headers-too-large with
// the JSON body of every refusal. A server mounting the API sets
// http.Server.MaxHeaderBytes to ServerMaxHeaderBytes, above this: beyond
// that net/http itself refuses the request before the API sees it (431,
// text/plain).
const MaxHeaderBytes = 64 << 10

// ServerMaxHeaderBytes is the http.Server.MaxHeaderBytes of a server
// mounting the API (`claimcheck serve`): 1 MiB, net/http's default.
const ServerMaxHeaderBytes = 1 << 20

// headerBytes counts h's bytes as they travel: "Name: value\r\n" each.
func headerBytes(h http.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// DrainLimit is how much of a refused request's unread body, in bytes, the
// API reads and discards before it answers. A client that sends
// "Connection: close" (Python's urllib always does) and writes its whole
// body before reading the answer would otherwise see the connection reset
// mid-body instead of the refusal: net/http closes such a connection after
// the answer, with the body unread. A larger body's client may still see
// the connection closed; nothing is stored either way.
const DrainLimit = 8 << 20

// drainBody reads and discards up to DrainLimit bytes of r's body that
// the handler did not read (none, if it read it all).
func drainBody(r *http.Request) {
	if r.Body != nil && r.ContentLength != 0 {
		_, _ = io.CopyN(io.Discard, r.Body, DrainLimit)
	}
}

// authenticate applies the token rule: with no live token, loopback peers
// that name a loopback host only (console.LoopbackPeer, LoopbackHost:
// DNS rebinding gets nothing); with tokens, a live bearer token.
func (a *API) authenticate(r *http.Request) (*principal, *Error) {
	configured, err := a.o.Tokens.Configured(r.Context())
	if err != nil {
		return nil, classify(fmt.Errorf("httpapi: %w: %w", err, claimcheck.ErrUnavailable))
	}
	scheme, tok, hasAuth := strings.Cut(r.Header.Get("Authorization"), " ")
	if !configured {
		if hasAuth {
			return nil, refusal(http.StatusUnauthorized, ReasonUnauthorized, "this server has no API tokens: it answers requests from this host only, without Authorization")
		}
		if console.LoopbackPeer(r.RemoteAddr) && console.LoopbackHost(r.Host) {
			return &principal{}, nil
		}
		return nil, refusal(http.StatusUnauthorized, ReasonUnauthorized, "this server has no API tokens, so it answers requests from this host only (claimcheck tokens create)")
	}
	if !hasAuth || !strings.EqualFold(scheme, "Bearer") {
		return nil, refusal(http.StatusUnauthorized, ReasonUnauthorized, "send Authorization: Bearer TOKEN (claimcheck tokens create)")
	}
	t, err := a.o.Tokens.Verify(r.Context(), strings.TrimSpace(tok))
	if errors.Is(err, apiauth.ErrTokenRefused) {
		return nil, refusal(http.StatusUnauthorized, ReasonUnauthorized, err.Error())
	}
	if err != nil {
		return nil, classify(fmt.Errorf("httpapi: %w: %w", err, claimcheck.ErrUnavailable))
	}
	return &principal{token: t}, nil
}

// stallReader is a request body whose every read must make progress within
// the stall timeout (the connection's read deadline moves on each read).
type stallReader struct {
	r  io.Reader
	rc *http.ResponseController
	d  time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) {
	_ = s.rc.SetReadDeadline(time.Now().Add(s.d))
	return s.r.Read(p)
}

// stallWriter is a response body whose every write must complete within
// the stall timeout.
type stallWriter struct {
	w  io.Writer
	rc *http.ResponseController
	d  time.Duration
}

func (s *stallWriter) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.d))
	return s.w.Write(p)
}

// body is r's body, bounded by the stall timeout.
func (a *API) body(w http.ResponseWriter, r *http.Request) io.Reader {
	return &stallReader{r: r.Body, rc: http.NewResponseController(w), d: a.o.StallTimeout}
}

// stream sends body with the ticket's headers: its type, size and
// Content-Digest.
func (a *API) stream(w http.ResponseWriter, body io.Reader, t *claimcheck.Ticket) {
	h := w.Header()
	ct := t.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatInt(t.Size, 10))
	if d := FormatContentDigest(t.SHA256); d != "" {
		h.Set("Content-Digest", d)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.CopyBuffer(&stallWriter{w: w, rc: http.NewResponseController(w), d: a.o.StallTimeout}, body, make([]byte, 256<<10))
}

// TicketSummary is a ticket without its key, store, data key or
// signature.
type TicketSummary struct {
	Version int       `json:"v"`
	Tenant  string    `json:"tenant"`
	SHA256  string    `json:"sha256"`
	Size    int64     `json:"size"`
	Type    string    `json:"type,omitempty"`
	Inline  bool      `json:"inline"`
	Created time.Time `json:"created"`
	// KID is the id of the key that sealed an inline payload (the
	// ticket's "kid", docs/ticket.md); absent otherwise.
	KID string `json:"kid,omitempty"`
}

func summary(t *claimcheck.Ticket) TicketSummary {
	return TicketSummary{Version: t.Version, Tenant: t.Tenant, SHA256: t.SHA256, Size: t.Size, Type: t.ContentType, Inline: t.IsInline(), Created: t.Created, KID: t.KID}
}

// Submitted answers a submit.
type Submitted struct {
	ID          int64  `json:"id"`
	Kind        string `json:"kind"`
	Tenant      string `json:"tenant"`
	Duplicate   bool   `json:"duplicate"`
	TicketBytes int    `json:"ticket_bytes"`
	// Ticket is the job's ticket: with attachments, its manifest's.
	Ticket TicketSummary `json:"ticket"`
	// Store is the named store the documents went to; absent for the
	// default store.
	Store string `json:"store,omitempty"`
	// Attachments are the job's attachments' names, in order; absent for
	// a job without.
	Attachments []string `json:"attachments,omitempty"`
}

// SubmitQuery is a submit's query, checked by ParseSubmitQuery.
type SubmitQuery struct {
	// Kind and Tenant are required (pipeline.ValidateKind,
	// claimcheck.ValidateTenant).
	Kind, Tenant string
	// Priority (1-4) and MaxAttempts (1-100) are 0 when not given.
	Priority, MaxAttempts int
	// AllowEmpty accepts a 0-byte payload (allow_empty=true); otherwise
	// one is refused with 422 payload-empty (pipeline.ErrEmptyPayload), as
	// `claimcheck submit` refuses it without --allow-empty.
	AllowEmpty bool
	// Store names the pipeline store the job's documents go to
	// (pipeline.EnqueueOptions.Store, serve's --store NAME=URL;
	// pipeline.ValidateStoreName); "" for the default store.
	Store string
	// Attachments are the attach parameters' names, in order
	// (claimcheck.ValidateAttachmentNames, as `submit --attach`): the body
	// is then multipart/form-data, one part per attachment.
	Attachments []string
}

// ParseSubmitQuery checks a submit's query string: kind and tenant
// (required, once each), priority (1-4), max_attempts (1-100),
// allow_empty (true or false), store (a store name) and attach
// (repeatable, attachment names), optional. Errors: a plain error naming
// the parameter.
func ParseSubmitQuery(raw string) (SubmitQuery, error) {
	var sq SubmitQuery
	q, err := parseQuery(raw, "kind", "tenant", "priority", "max_attempts", "allow_empty", "store", "attach")
	if err != nil {
		return sq, err
	}
	if sq.Kind, err = one(q, "kind", true); err != nil {
		return SubmitQuery{}, err
	}
	if err = pipeline.ValidateKind(sq.Kind); err != nil {
		return SubmitQuery{}, fmt.Errorf("kind: %w", err)
	}
	if sq.Tenant, err = one(q, "tenant", true); err != nil {
		return SubmitQuery{}, err
	}
	if err = claimcheck.ValidateTenant(sq.Tenant); err != nil {
		return SubmitQuery{}, fmt.Errorf("tenant: %w", err)
	}
	if sq.Priority, err = intParam(q, "priority", 1, 4); err != nil {
		return SubmitQuery{}, err
	}
	if sq.MaxAttempts, err = intParam(q, "max_attempts", 1, 100); err != nil {
		return SubmitQuery{}, err
	}
	if sq.AllowEmpty, err = boolParam(q, "allow_empty"); err != nil {
		return SubmitQuery{}, err
	}
	if sq.Store, err = one(q, "store", false); err != nil {
		return SubmitQuery{}, err
	}
	if sq.Store != "" {
		if err = pipeline.ValidateStoreName(sq.Store); err != nil {
			return SubmitQuery{}, fmt.Errorf("store: %w", err)
		}
	}
	if len(q["attach"]) > 0 {
		if err = claimcheck.ValidateAttachmentNames(q["attach"]); err != nil {
			return SubmitQuery{}, fmt.Errorf("attach: %w", err)
		}
		sq.Attachments = q["attach"]
	}
	return sq, nil
}

// parseQuery parses a query string, refusing parameters not in known.
func parseQuery(raw string, known ...string) (map[string][]string, error) {
	if len(raw) > 4096 {
		return nil, errors.New("query string longer than 4096 bytes")
	}
	q := map[string][]string{}
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		k, err1 := unescape(k)
		v, err2 := unescape(v)
		if err1 != nil || err2 != nil {
			return nil, errors.New("query string is not valid percent-encoding")
		}
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("unknown query parameter %q (known: %s)", truncate(k, 32), strings.Join(known, ", "))
		}
		q[k] = append(q[k], v)
	}
	return q, nil
}

func unescape(s string) (string, error) {
	return url.QueryUnescape(s)
}

func one(q map[string][]string, name string, required bool) (string, error) {
	v := q[name]
	switch {
	case len(v) > 1:
		return "", fmt.Errorf("%s given %d times, once allowed", name, len(v))
	case len(v) == 0 && required:
		return "", fmt.Errorf("%s is required", name)
	case len(v) == 0:
		return "", nil
	}
	return v[0], nil
}

func intParam(q map[string][]string, name string, lo, hi int) (int, error) {
	s, err := one(q, name, false)
	if err != nil || s == "" {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}

// boolParam is an optional parameter "true" or "false" (false when not
// given).
func boolParam(q map[string][]string, name string) (bool, error) {
	s, err := one(q, name, false)
	switch {
	case err != nil:
		return false, err
	case s == "" || s == "false":
		return false, nil
	case s == "true":
		return true, nil
	}
	return false, fmt.Errorf("%s must be true or false", name)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// submit is POST /v1/jobs. An empty body is refused (422 payload-empty)
// unless allow_empty=true: from its Content-Length before anything is
// read, or, for a body of unknown length, at its end, before anything is
// enqueued (pipeline.NonEmpty); with attach parameters, each attachment
// is checked so (partReader).
func (a *API) submit(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	sq, err := ParseSubmitQuery(r.URL.RawQuery)
	if err != nil {
		return refusal(http.StatusBadRequest, claimcheck.ReasonTicketInvalid, err.Error())
	}
	if !pr.allows(sq.Tenant) {
		return pr.forbid(sq.Tenant)
	}
	opts := &pipeline.EnqueueOptions{
		IdempotencyKey: r.Header.Get("Idempotency-Key"), Priority: sq.Priority, MaxAttempts: sq.MaxAttempts, Store: sq.Store,
	}
	var body io.Reader
	if len(sq.Attachments) > 0 {
		parts, err := newPartReader(r.Header.Get("Content-Type"), a.body(w, r), sq.Attachments, sq.AllowEmpty)
		if err != nil {
			return refusal(http.StatusBadRequest, claimcheck.ReasonTicketInvalid, err.Error())
		}
		opts.Attachments = parts.atts
	} else {
		want, hasDigest, err := ParseContentDigest(r.Header.Get("Content-Digest"))
		if err != nil {
			return badRequest(err.Error())
		}
		if a.o.MaxPayloadSize > 0 && r.ContentLength > a.o.MaxPayloadSize {
			return refusal(http.StatusRequestEntityTooLarge, claimcheck.ReasonPayloadTooLarge,
				fmt.Sprintf("payload of %d bytes, above the maximum of %d bytes: nothing stored", r.ContentLength, a.o.MaxPayloadSize))
		}
		if !sq.AllowEmpty && r.ContentLength == 0 {
			return classify(fmt.Errorf("request body: %w", pipeline.ErrEmptyPayload))
		}
		body = a.body(w, r)
		if !sq.AllowEmpty {
			body = pipeline.NonEmpty(body, "request body")
		}
		if hasDigest {
			body = newDigestReader(body, want)
		}
		opts.CheckIn = claimcheck.CheckInOptions{ContentType: r.Header.Get("Content-Type")}
	}
	res, err := a.p.Enqueue(r.Context(), sq.Kind, sq.Tenant, body, opts)
	if err != nil {
		return classify(err)
	}
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, Submitted{ID: res.JobID, Kind: sq.Kind, Tenant: sq.Tenant, Duplicate: res.Duplicate, TicketBytes: res.TicketBytes, Ticket: summary(res.Ticket),
		Store: sq.Store, Attachments: sq.Attachments})
	return nil
}

// job reads the job in the path and checks the principal may see it. A
// job of a tenant the principal may not act on is answered as a missing
// one (404 job-not-found, the same message), so that a token learns
// neither which job ids exist nor other tenants' names.
func (a *API) job(r *http.Request, pr *principal) (*pipeline.JobInfo, *Error) {
	id, err := pipeline.ParseJobID(r.PathValue("id"))
	if err != nil {
		return nil, badRequest(err.Error())
	}
	j, err := a.p.Get(r.Context(), id)
	if err == nil && !pr.allows(j.Tenant) {
		err = pipeline.JobNotFound(id)
	}
	if err != nil {
		return nil, classify(err)
	}
	return j, nil
}

// getJob is GET /v1/jobs/{id}.
func (a *API) getJob(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	j, e := a.job(r, pr)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

// getResult is GET /v1/jobs/{id}/result: the tenant is checked on the job
// row before the result is claimed; OpenResult verifies it (spooled)
// before a byte is sent.
func (a *API) getResult(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	j, e := a.job(r, pr)
	if e != nil {
		return e
	}
	body, t, err := a.p.OpenResult(r.Context(), j.ID)
	if err != nil {
		return classify(err)
	}
	defer body.Close()
	a.stream(w, body, t)
	return nil
}
