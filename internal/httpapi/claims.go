package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/propagation"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// idleStop is how long a kind's dispatcher runs with no claim waiting and
// no job held before it stops taking jobs from the queue.
const idleStop = 5 * time.Second

// errLeaseExpired fails an attempt whose remote worker neither finished
// nor extended it within its lease: a transient failure, so the retry
// policy returns the job to its queue.
var errLeaseExpired = errors.New("lease expired")

// dispatcher takes the jobs of one kind from the queue, through
// pipeline.Work, while remote workers wait to claim them, and hands each
// to a waiting claim of its tenant. Its fields are guarded by API.mu.
type dispatcher struct {
	a        *API
	kind     string
	waiting  []*claimer
	arrived  chan struct{} // closed, and replaced, when a claimer arrives
	running  bool
	held     int // handlers running
	lastWant time.Time
}

// claimer is one waiting claim. ch gets the lease, or nil when the job it
// was taken for failed its verification (the claim may wait on).
type claimer struct {
	accept func(tenant string) bool
	ch     chan *lease
}

// lease is a job held for a remote worker.
type lease struct {
	id      string
	jobID   int64
	kind    string
	tenant  string
	attempt int
	payload *claimcheck.Payload
	// attachments are the job's, verified, by name; atts lists them for
	// the claim.
	attachments map[string]*claimcheck.Payload
	atts        []NamedTicket
	seconds     int
	trace       propagation.MapCarrier // the attempt's W3C trace context: traceparent, tracestate

	mu       sync.Mutex
	expires  time.Time
	finished bool
	extended chan struct{}  // a renewal, for the handler's timer
	finish   chan finishing // the remote worker's verdict (one)
	outcome  chan pipeline.Outcome
}

// finishing is what the handler returns for the remote worker.
type finishing struct {
	result *claimcheck.Result
	err    error
}

// settle gives the handler its verdict, once; false if it already had one
// (or the lease expired).
func (l *lease) settle(f finishing) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return false
	}
	l.finished = true
	l.finish <- f
	return true
}

// Claim answers a claim and an extend.
type Claim struct {
	Lease          string        `json:"lease"`
	LeaseSeconds   int           `json:"lease_seconds"`
	LeaseExpiresAt time.Time     `json:"lease_expires_at"`
	Job            ClaimedJob    `json:"job"`
	Payload        TicketSummary `json:"payload"`
	// Attachments are the job's named documents, by name (absent for a
	// job without): fetch each from
	// /v1/claims/{lease}/attachments/{name}.
	Attachments []NamedTicket `json:"attachments,omitempty"`
}

// ClaimedJob is the job a claim holds.
type ClaimedJob struct {
	ID      int64  `json:"id"`
	Kind    string `json:"kind"`
	Tenant  string `json:"tenant"`
	Attempt int    `json:"attempt"`
}

func (l *lease) claim() Claim {
	l.mu.Lock()
	exp := l.expires
	l.mu.Unlock()
	return Claim{Lease: l.id, LeaseSeconds: l.seconds, LeaseExpiresAt: exp.UTC(),
		Job: ClaimedJob{ID: l.jobID, Kind: l.kind, Tenant: l.tenant, Attempt: l.attempt}, Payload: summary(l.payload.Ticket()), Attachments: l.atts}
}

// OutcomeJSON answers a complete and a fail: what the attempt came to.
type OutcomeJSON struct {
	ID      int64  `json:"id"`
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ParseClaimQuery checks a claim's query string: kind (required,
// pipeline.ValidateKind), tenant (0 to 16, claimcheck.ValidateTenant,
// repeats allowed and merged) and wait (seconds, 0 to 60; -1 when not
// given). Errors: a plain error naming the parameter.
func ParseClaimQuery(raw string) (kind string, tenants []string, wait int, err error) {
	q, err := parseQuery(raw, "kind", "tenant", "wait")
	if err != nil {
		return "", nil, 0, err
	}
	if kind, err = one(q, "kind", true); err != nil {
		return "", nil, 0, err
	}
	if err = pipeline.ValidateKind(kind); err != nil {
		return "", nil, 0, fmt.Errorf("kind: %w", err)
	}
	if len(q["tenant"]) > 16 {
		return "", nil, 0, errors.New("at most 16 tenant parameters")
	}
	for _, t := range q["tenant"] {
		if err = claimcheck.ValidateTenant(t); err != nil {
			return "", nil, 0, fmt.Errorf("tenant: %w", err)
		}
		if !slices.Contains(tenants, t) {
			tenants = append(tenants, t)
		}
	}
	wait = -1
	if len(q["wait"]) > 0 {
		if wait, err = intParam(q, "wait", 0, 60); err != nil {
			return "", nil, 0, err
		}
	}
	return kind, tenants, wait, nil
}

// claim is POST /v1/claims: a long poll for the next job of a kind.
func (a *API) claim(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	kind, tenants, wait, err := ParseClaimQuery(r.URL.RawQuery)
	if err != nil {
		return refusal(http.StatusBadRequest, claimcheck.ReasonTicketInvalid, err.Error())
	}
	for _, t := range tenants {
		if !pr.allows(t) {
			return pr.forbid(t)
		}
	}
	d := 30 * time.Second
	if wait >= 0 {
		d = time.Duration(wait) * time.Second
	}
	d = min(d, a.o.MaxWait)
	accept := func(t string) bool {
		if len(tenants) > 0 {
			return slices.Contains(tenants, t)
		}
		return pr.allows(t)
	}
	l, e := a.await(r.Context(), kind, accept, d)
	if e != nil {
		return e
	}
	if l == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	for k, v := range l.trace {
		w.Header().Set(k, v)
	}
	writeJSON(w, http.StatusOK, l.claim())
	return nil
}

// await registers a claimer for kind and waits up to d for a lease.
func (a *API) await(ctx context.Context, kind string, accept func(string) bool, d time.Duration) (*lease, *Error) {
	deadline := time.Now().Add(d)
	for {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		c := &claimer{accept: accept, ch: make(chan *lease, 1)}
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			return nil, refusal(http.StatusServiceUnavailable, claimcheck.ReasonUnavailable, "server stopping")
		}
		dp := a.dispatchers[kind]
		if dp == nil {
			if len(a.dispatchers) >= MaxKinds {
				a.mu.Unlock()
				return nil, refusal(http.StatusTooManyRequests, ReasonTooManyRequests, fmt.Sprintf("claims of %d kinds already: at most %d per server", len(a.dispatchers), MaxKinds))
			}
			dp = &dispatcher{a: a, kind: kind, arrived: make(chan struct{})}
			a.dispatchers[kind] = dp
		}
		if a.waiting >= MaxWaiting {
			a.mu.Unlock()
			return nil, refusal(http.StatusTooManyRequests, ReasonTooManyRequests, fmt.Sprintf("%d claims waiting already: at most %d", a.waiting, MaxWaiting))
		}
		dp.waiting = append(dp.waiting, c)
		a.waiting++
		dp.lastWant = time.Now()
		close(dp.arrived)
		dp.arrived = make(chan struct{})
		dp.start()
		a.mu.Unlock()

		var l *lease
		got := false
		select {
		case l = <-c.ch:
			got = true
		case <-timer.C:
		case <-ctx.Done():
		}
		if !got {
			a.mu.Lock()
			if i := slices.Index(dp.waiting, c); i >= 0 {
				dp.waiting = slices.Delete(dp.waiting, i, i+1)
				a.waiting--
				a.mu.Unlock()
				return nil, nil
			}
			a.mu.Unlock()
			l = <-c.ch // taken meanwhile: its lease (or nil) is on its way
		}
		if l != nil {
			if ctx.Err() != nil { // the claimer is gone: the job goes back unworked
				l.settle(finishing{err: fmt.Errorf("httpapi: the claim's connection closed: %w", pipeline.ErrReturnToQueue)})
				return nil, nil
			}
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if time.Until(deadline) <= 0 {
			return nil, nil
		}
		// The job failed its verification: wait on for the next.
	}
}

// take removes and returns the first waiting claimer that accepts tenant,
// or nil. a.mu held.
func (d *dispatcher) take(tenant string) *claimer {
	for i, c := range d.waiting {
		if c.accept(tenant) {
			d.waiting = slices.Delete(d.waiting, i, i+1)
			d.a.waiting--
			return c
		}
	}
	return nil
}

// start runs the kind's pipeline.Work unless it runs; a.mu held. It stops
// after idleStop with no claim waiting and no job held.
func (d *dispatcher) start() {
	a := d.a
	if d.running || a.closed {
		return
	}
	d.running = true
	ctx, cancel := context.WithCancel(a.ctx)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		t := time.NewTicker(idleStop / 5)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			a.mu.Lock()
			idle := len(d.waiting) == 0 && d.held == 0 && time.Since(d.lastWant) > idleStop
			a.mu.Unlock()
			if idle {
				cancel()
				return
			}
		}
	}()
	go func() {
		defer a.wg.Done()
		defer cancel()
		err := a.p.Work(ctx, pipeline.WorkOptions{
			Handlers:     map[string]claimcheck.Handler{d.kind: claimcheck.Lazy(d)},
			Concurrency:  a.o.MaxLeases,
			DrainTimeout: -1,
			OnDone:       a.onDone,
		})
		if err != nil {
			a.log.Error("httpapi: dispatcher stopped", "kind", d.kind, "error", err.Error())
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		d.running = false
		if len(d.waiting) > 0 {
			d.start()
		}
	}()
}

// Handle is the dispatcher's handler (Lazy: nothing is fetched before it
// runs): it waits up to HandoffWait for a claim accepting the job's
// tenant (else the job goes back unworked, pipeline.ErrReturnToQueue),
// verifies the payload (claimcheck.Payload.Verify: a missing or corrupt
// one fails the attempt as for any worker, and the claim waits on), hands
// the lease over and returns the remote worker's verdict: its result, its
// failure, or errLeaseExpired.
func (d *dispatcher) Handle(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
	a := d.a
	a.mu.Lock()
	d.held++
	a.mu.Unlock()
	// The job stays held until the worker has checked its result in: the
	// result's body is the remote worker's upload, read after Handle
	// returns, and the kind's Work must not be stopped as idle meanwhile.
	release := sync.OnceFunc(func() {
		a.mu.Lock()
		d.held--
		d.lastWant = time.Now()
		a.mu.Unlock()
	})
	resultHeld := false
	defer func() {
		if !resultHeld {
			release()
		}
	}()
	handoff := time.NewTimer(a.o.HandoffWait)
	defer handoff.Stop()
	var c *claimer
	for c == nil {
		a.mu.Lock()
		c = d.take(job.Tenant)
		arrived := d.arrived
		a.mu.Unlock()
		if c != nil {
			break
		}
		select {
		case <-arrived:
		case <-handoff.C:
			return nil, fmt.Errorf("httpapi: no claim for tenant %q within %s: %w", job.Tenant, a.o.HandoffWait, pipeline.ErrReturnToQueue)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	if err := job.Payload.Verify(ctx); err != nil {
		c.ch <- nil
		return nil, err
	}
	atts, err := verifyAttachments(ctx, job)
	if err != nil {
		c.ch <- nil
		return nil, err
	}
	id, err := strconv.ParseInt(job.ID, 10, 64)
	if err != nil {
		c.ch <- nil
		return nil, claimcheck.Permanent(fmt.Errorf("httpapi: job id %q: %w", job.ID, err))
	}
	var b [16]byte
	rand.Read(b[:])
	l := &lease{id: hex.EncodeToString(b[:]), jobID: id, kind: job.Kind, tenant: job.Tenant, attempt: job.Attempt, payload: job.Payload,
		attachments: job.Attachments, atts: atts, seconds: int(a.o.Lease / time.Second), expires: time.Now().Add(a.o.Lease),
		extended: make(chan struct{}, 1), finish: make(chan finishing, 1), outcome: make(chan pipeline.Outcome, 1),
		trace: propagation.MapCarrier{}}
	traceContext.Inject(ctx, l.trace) // the handler's span: the remote worker continues the job's trace
	a.mu.Lock()
	a.leases[l.id] = l
	a.byJob[l.jobID] = l
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.leases, l.id)
		a.mu.Unlock()
	}()
	c.ch <- l
	expiry := time.NewTimer(a.o.Lease)
	defer expiry.Stop()
	for {
		select {
		case f := <-l.finish:
			if f.result != nil && f.result.Body != nil {
				resultHeld = true
				f.result.Body = &heldBody{Reader: f.result.Body, release: release}
			}
			return f.result, f.err
		case <-l.extended:
			l.mu.Lock()
			left := time.Until(l.expires)
			l.mu.Unlock()
			expiry.Reset(left)
		case <-expiry.C:
			if !l.settle(finishing{}) { // a verdict came at the last moment
				f := <-l.finish
				return f.result, f.err
			}
			<-l.finish
			return nil, fmt.Errorf("httpapi: job %d: the worker neither finished nor extended its lease of %s: %w", id, a.o.Lease, errLeaseExpired)
		case <-ctx.Done():
			l.mu.Lock()
			l.finished = true
			l.mu.Unlock()
			return nil, context.Cause(ctx)
		}
	}
}

// heldBody is a result's body that releases its job's hold on the
// dispatcher when the worker closes it, once the result is checked in
// (claimcheck.Store.Run's done).
type heldBody struct {
	io.Reader
	release func()
}

// Close releases the hold and closes the body it wraps, if it closes.
func (b *heldBody) Close() error {
	defer b.release()
	if c, ok := b.Reader.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// onDone delivers an attempt's outcome to the lease it was held under.
func (a *API) onDone(o pipeline.Outcome) {
	a.mu.Lock()
	l := a.byJob[o.JobID]
	if l != nil && l.attempt == o.Attempt {
		delete(a.byJob, o.JobID)
	} else {
		l = nil
	}
	a.mu.Unlock()
	if l != nil {
		l.outcome <- o
	}
}

// leaseOf finds the path's live lease and checks the principal may act on
// its tenant.
func (a *API) leaseOf(r *http.Request, pr *principal) (*lease, *Error) {
	a.mu.Lock()
	l := a.leases[r.PathValue("lease")]
	a.mu.Unlock()
	// Another tenant's lease is answered as a missing one: a token
	// learns nothing of other tenants' work.
	if l == nil || !pr.allows(l.tenant) {
		return nil, refusal(http.StatusNotFound, ReasonLeaseNotFound, "no live lease with this id on this server: it expired, was finished, or was granted by another server")
	}
	return l, nil
}

// leasePayload is GET /v1/claims/{lease}/payload: the payload verified
// before the claim answered, from its spooled copy.
func (a *API) leasePayload(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	l, e := a.leaseOf(r, pr)
	if e != nil {
		return e
	}
	rc, err := l.payload.Open(r.Context())
	if err != nil {
		return classify(err)
	}
	defer rc.Close()
	a.stream(w, rc, l.payload.Ticket())
	return nil
}

// extend is POST /v1/claims/{lease}/extend.
func (a *API) extend(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	l, e := a.leaseOf(r, pr)
	if e != nil {
		return e
	}
	l.mu.Lock()
	if l.finished {
		l.mu.Unlock()
		return refusal(http.StatusNotFound, ReasonLeaseNotFound, "the lease is finished or expired")
	}
	l.expires = time.Now().Add(a.o.Lease)
	l.mu.Unlock()
	select {
	case l.extended <- struct{}{}:
	default:
	}
	writeJSON(w, http.StatusOK, l.claim())
	return nil
}

// complete is POST /v1/claims/{lease}/complete: the body is the result,
// handed to the worker's finish (checked in as a payload is).
func (a *API) complete(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	l, e := a.leaseOf(r, pr)
	if e != nil {
		return e
	}
	want, hasDigest, err := ParseContentDigest(r.Header.Get("Content-Digest"))
	if err != nil {
		return badRequest(err.Error())
	}
	var res *claimcheck.Result
	if r.ContentLength != 0 {
		var body io.Reader = a.body(w, r)
		if hasDigest {
			body = newDigestReader(body, want)
		}
		res = &claimcheck.Result{Body: io.NopCloser(body), ContentType: r.Header.Get("Content-Type")}
	}
	return a.settle(w, r, l, finishing{result: res})
}

// Failure is the body of a fail.
type Failure struct {
	Message   string `json:"message"`
	Permanent bool   `json:"permanent"`
}

// fail is POST /v1/claims/{lease}/fail.
func (a *API) fail(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	l, e := a.leaseOf(r, pr)
	if e != nil {
		return e
	}
	var f Failure
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return badRequest("fail: the body must be JSON {\"message\": \"...\", \"permanent\": false}: " + err.Error())
	}
	err := fmt.Errorf("remote worker: %s", CleanMessage(f.Message))
	if f.Permanent {
		err = claimcheck.Permanent(err)
	}
	return a.settle(w, r, l, finishing{err: err})
}

// CleanMessage is a remote worker's failure message as it is recorded:
// control characters replaced by spaces, at most MaxFailureMessage bytes
// (cut at a character boundary), "no message" if empty.
func CleanMessage(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, " "))
	if len(s) > MaxFailureMessage {
		cut := MaxFailureMessage
		for cut > 0 && s[cut]&0xc0 == 0x80 {
			cut--
		}
		s = s[:cut]
	}
	if strings.TrimSpace(s) == "" {
		return "no message"
	}
	return s
}

// settle hands the verdict to the lease's handler and answers with the
// attempt's outcome once the worker settled it.
func (a *API) settle(w http.ResponseWriter, r *http.Request, l *lease, f finishing) *Error {
	if !l.settle(f) {
		return refusal(http.StatusNotFound, ReasonLeaseNotFound, "the lease is finished or expired")
	}
	var o pipeline.Outcome
	select {
	case o = <-l.outcome:
	case <-r.Context().Done():
		return nil
	}
	if o.Err != nil && errors.Is(o.Err, errDigestMismatch) {
		return classify(o.Err)
	}
	out := OutcomeJSON{ID: o.JobID, State: string(o.State), Attempt: o.Attempt, Reason: o.Reason}
	if o.Err != nil {
		out.Message = o.Err.Error()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
