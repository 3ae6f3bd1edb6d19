package claimcheck

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Job is one unit of work as a handler sees it, whatever transport carried
// its ticket.
type Job struct {
	// ID is the transport's identifier for the job (River's job id in the
	// job pipeline).
	ID string
	// Kind names the work to do, and so the handler.
	Kind string
	// Tenant owns the payload.
	Tenant string
	// Attempt counts from 1.
	Attempt int
	// Timings are filled in by Store.Run: how long the claim, the
	// verification and the handler took.
	Timings Timings
	// Payload is the claimed payload. Unless the handler is Lazy, it has been
	// fetched and verified before the handler runs. For a job with
	// attachments and no main payload it is an empty payload (0 bytes).
	Payload *Payload
	// Attachments are the job's named documents (a manifest's, see
	// CheckInManifest), by name; nil for a job without. Unless the
	// handler is Lazy, each has been fetched and verified before the
	// handler runs, and a missing one fails the job (ErrPayloadMissing,
	// naming the attachment) before it does.
	Attachments map[string]*Payload
}

// Result is what a handler hands back: a stream checked in under the results
// prefix like any payload, whose ticket is recorded on the job.
type Result struct {
	Body        io.Reader
	ContentType string
}

// Handler does the work of one kind. Return Permanent(err) for a failure
// that retrying cannot fix (the job is dead-lettered at once); any other
// error is retried with backoff.
type Handler interface {
	Handle(ctx context.Context, job *Job) (*Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job *Job) (*Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, job *Job) (*Result, error) { return f(ctx, job) }

// Lazy wraps a handler that may not need its payload: the payload is not
// fetched before the handler runs, and is verified only if the handler opens
// it (so a consumer that never opens it never downloads it).
func Lazy(h Handler) Handler { return lazyHandler{h} }

type lazyHandler struct{ Handler }

// IsLazy reports whether h was made by Lazy.
func IsLazy(h Handler) bool {
	_, ok := h.(lazyHandler)
	return ok
}

// Work runs the consumer half of the claim check for one job, the same for
// every transport: claim the ticket's payload, verify its size and SHA-256
// before the handler runs (unless the handler is Lazy), run the handler, and
// check in its result. It returns the result's ticket, or nil when the
// handler returned no result.
//
// Errors keep their class (see IsPermanent and Reason): a bad ticket,
// missing or corrupt payload is permanent and the handler never runs; a
// handler's error is returned wrapped; a failed result check-in is returned
// as the store reported it.
func (s *Store) Work(ctx context.Context, job *Job, t *Ticket, h Handler) (*Ticket, error) {
	return s.WorkWith(ctx, job, t, h, s.CheckIn)
}

// CheckInFunc has Store.CheckIn's shape: it checks r in for tenant and
// returns its ticket, with CheckIn's errors.
type CheckInFunc func(ctx context.Context, tenant string, r io.Reader, opts *CheckInOptions) (*Ticket, error)

// WorkWith is Work with the handler's result checked in by checkIn (its
// CheckInOptions have Result set) instead of the store's own CheckIn: for
// a worker whose check-in records more than the object, such as
// pipeline.Pipeline.CheckIn, which commits a check-in intent first so no
// sweep deletes the result before its registry row is written. Errors are
// Work's, with checkIn's for the result.
func (s *Store) WorkWith(ctx context.Context, job *Job, t *Ticket, h Handler, checkIn CheckInFunc) (*Ticket, error) {
	res, done, err := s.Run(ctx, job, t, h)
	if err != nil {
		return nil, err
	}
	defer done()
	if res == nil || res.Body == nil {
		return nil, nil
	}
	rt, err := checkIn(ctx, job.Tenant, res.Body, &CheckInOptions{ContentType: res.ContentType, Result: true})
	if err != nil {
		return nil, fmt.Errorf("claimcheck: check in result of %s: %w", job.Kind, err)
	}
	return rt, nil
}

// Run is Work without the result's check-in: it claims and verifies the
// payload, runs the handler and returns its result (nil if none), for a
// worker that checks the result in itself and retries that step alone.
// Call done once the result is checked in: it releases the payload and
// closes the result's Body if it is an io.Closer. On error done is nil.
func (s *Store) Run(ctx context.Context, job *Job, t *Ticket, h Handler) (res *Result, done func(), err error) {
	if job.Tenant != t.Tenant {
		return nil, nil, fmt.Errorf("claimcheck: job for tenant %q carries a ticket of %s: %w", job.Tenant, t, ErrTicketInvalid)
	}
	_, lazy := h.(lazyHandler)
	var p *Payload
	var atts map[string]*Payload
	kind := AttrKind.String(job.Kind)
	step := func(name string, hist metric.Float64Histogram, took *time.Duration, fn func(context.Context) error) error {
		sctx, span := s.startSpan(ctx, name, append(ticketAttrs(t), kind, AttrAttempt.Int(job.Attempt))...)
		start := time.Now()
		err := fn(sctx)
		*took = time.Since(start)
		// Enabled: no attribute set is built for a meter that records
		// nothing (the global no-op; the sets were 4% of a small job's CPU).
		if hist.Enabled(ctx) {
			hist.Record(ctx, took.Seconds(), metric.WithAttributes(append(ErrorAttrs(err), kind)...))
		}
		endSpan(span, err)
		return err
	}
	verified := func(err error) error {
		if r := Reason(err); r == ReasonPayloadCorrupt || r == ReasonPayloadMissing {
			s.tel.verifyFailures.Add(ctx, 1, metric.WithAttributes(append(ErrorAttrs(err), kind)...))
		}
		return err
	}
	if t.Manifest {
		// The one place a manifest's documents are claimed, for every
		// transport: each verified before the handler sees a byte
		// (docs/invariants.md, invariant 3).
		err = step("claimcheck.claim", s.tel.claimDuration, &job.Timings.Claim, func(ctx context.Context) (err error) {
			p, atts, err = s.claimManifest(ctx, t, lazy)
			return verified(err)
		})
		if err != nil {
			return nil, nil, err
		}
	} else {
		err = step("claimcheck.claim", s.tel.claimDuration, &job.Timings.Claim, func(context.Context) (err error) {
			p, err = s.Claim(t)
			return err
		})
		if err != nil {
			return nil, nil, err
		}
		if !lazy {
			err = step("claimcheck.verify", s.tel.verifyDuration, &job.Timings.Verify, func(ctx context.Context) error { return verified(p.Verify(ctx)) })
			if err != nil {
				p.Close()
				return nil, nil, err
			}
		}
	}
	if s.tel.claimed.Enabled(ctx) {
		s.tel.claimed.Add(ctx, t.Size, metric.WithAttributes(AttrTenant.String(t.Tenant), kind))
	}
	job.Payload, job.Attachments = p, atts
	err = step("claimcheck.handler", s.tel.handlerDuration, &job.Timings.Handler, func(ctx context.Context) (err error) {
		res, err = h.Handle(ctx, job)
		return err
	})
	if err != nil {
		closeAll(p, atts)
		return nil, nil, fmt.Errorf("claimcheck: handler %s for %s: %w", job.Kind, t, err)
	}
	return res, func() {
		if res != nil {
			if c, ok := res.Body.(io.Closer); ok {
				c.Close()
			}
		}
		closeAll(p, atts)
	}, nil
}
