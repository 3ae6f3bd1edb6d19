package httpapi

// Attachments over the API: a submit naming attach=NAME parameters sends
// its documents as a multipart/form-data body, one part per attachment in
// the query's order, each read once and streamed into the store by
// pipeline.Enqueue (EnqueueOptions.Attachments); a claim lists a job's
// attachments and GET /v1/claims/{lease}/attachments/{name} serves each,
// verified.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// ReasonAttachmentNotFound: a lease's job has no attachment of that name;
// 404.
const ReasonAttachmentNotFound = "attachment-not-found"

// partReader hands the parts of a multipart/form-data body to
// pipeline.Enqueue as its attachments, in order: each part must be
// form-data named as the query's attach parameter of its place, may carry
// its own Content-Type and Content-Digest (checked as a submit's is), and
// the body must hold no other part. A part's headers are read as soon as
// the part before it ends, so that its Content-Type is in place before
// Enqueue checks it in. Any breach of the shape is an error wrapping
// claimcheck.ErrTicketInvalid returned from the part's Read: the check-in
// fails and nothing is enqueued (Enqueue deletes what it stored).
type partReader struct {
	mr         *multipart.Reader
	atts       []pipeline.Attachment
	allowEmpty bool
	cur        int       // index of the part being read
	body       io.Reader // the current part's body, checked
}

// newPartReader checks the request is multipart/form-data and reads the
// first part's headers. Errors: a plain error for the client.
func newPartReader(contentType string, body io.Reader, names []string, allowEmpty bool) (*partReader, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, errors.New("a submit with attach parameters needs a multipart/form-data body with a boundary, one part per attachment")
	}
	pr := &partReader{mr: multipart.NewReader(body, params["boundary"]), allowEmpty: allowEmpty}
	for _, n := range names {
		pr.atts = append(pr.atts, pipeline.Attachment{Name: n, Body: &partBody{pr: pr, i: len(pr.atts)}})
	}
	if err := pr.open(0); err != nil {
		return nil, err
	}
	return pr, nil
}

// open reads part i's headers (i == len(atts): the body's end).
func (pr *partReader) open(i int) error {
	pr.cur = i
	p, err := pr.mr.NextPart()
	if i == len(pr.atts) {
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("the body has a part after the %d named by attach parameters", len(pr.atts))
		}
		return fmt.Errorf("the body's end: %w", err)
	}
	name := pr.atts[i].Name
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("the body ends before part %d, attachment %q", i+1, name)
	}
	if err != nil {
		return fmt.Errorf("part %d, attachment %q: %w", i+1, name, err)
	}
	if got := p.FormName(); got != name {
		return fmt.Errorf("part %d is named %q: attach parameter %d names %q (parts come in the query's order)", i+1, truncate(got, claimcheck.MaxAttachmentNameLen), i+1, name)
	}
	want, hasDigest, err := ParseContentDigest(p.Header.Get("Content-Digest"))
	if err != nil {
		return fmt.Errorf("part %d, attachment %q: %w", i+1, name, err)
	}
	pr.atts[i].ContentType = p.Header.Get("Content-Type")
	pr.body = p
	if !pr.allowEmpty {
		pr.body = pipeline.NonEmpty(pr.body, "attachment "+name)
	}
	if hasDigest {
		pr.body = newDigestReader(pr.body, want)
	}
	return nil
}

// partBody is attachment i's body.
type partBody struct {
	pr *partReader
	i  int
}

func (b *partBody) Read(p []byte) (int, error) {
	pr := b.pr
	if pr.cur != b.i {
		return 0, fmt.Errorf("httpapi: attachment %q read out of order: %w", pr.atts[b.i].Name, claimcheck.ErrTicketInvalid)
	}
	n, err := pr.body.Read(p)
	if errors.Is(err, io.EOF) {
		if oerr := pr.open(b.i + 1); oerr != nil {
			return n, fmt.Errorf("httpapi: %v: %w", oerr, claimcheck.ErrTicketInvalid)
		}
	}
	return n, err
}

// NamedTicket is one attachment of a claimed job: its name and ticket.
type NamedTicket struct {
	Name string `json:"name"`
	TicketSummary
}

// verifyAttachments verifies each of a claimed job's attachments, in name
// order (claimcheck.Payload.Verify: fetched and checked, spooled), and
// returns their summaries.
// Errors: Verify's (a missing attachment is claimcheck.ErrPayloadMissing),
// naming the attachment.
func verifyAttachments(ctx context.Context, job *claimcheck.Job) ([]NamedTicket, error) {
	names := slices.Sorted(maps.Keys(job.Attachments))
	out := make([]NamedTicket, 0, len(names))
	for _, n := range names {
		if err := job.Attachments[n].Verify(ctx); err != nil {
			return nil, fmt.Errorf("httpapi: attachment %q: %w", n, err)
		}
		out = append(out, NamedTicket{Name: n, TicketSummary: summary(job.Attachments[n].Ticket())})
	}
	return out, nil
}

// leaseAttachment is GET /v1/claims/{lease}/attachments/{name}: the
// attachment verified before the claim answered, from its spooled copy.
func (a *API) leaseAttachment(w http.ResponseWriter, r *http.Request, pr *principal) *Error {
	l, e := a.leaseOf(r, pr)
	if e != nil {
		return e
	}
	p := l.attachments[r.PathValue("name")]
	if p == nil {
		return refusal(http.StatusNotFound, ReasonAttachmentNotFound, fmt.Sprintf("the lease's job has no attachment %q (the claim lists its attachments)", truncate(r.PathValue("name"), claimcheck.MaxAttachmentNameLen)))
	}
	rc, err := p.Open(r.Context())
	if err != nil {
		return classify(err)
	}
	defer rc.Close()
	a.stream(w, rc, p.Ticket())
	return nil
}
