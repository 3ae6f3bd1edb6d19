package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"net/textproto"
	"slices"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/httpapi"
)

// part is one part of a multipart submit.
type part struct {
	name, contentType, digest string
	body                      []byte
}

// multipartBody encodes parts as multipart/form-data, in order.
func multipartBody(t *testing.T, parts ...part) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{"Content-Disposition": {fmt.Sprintf(`form-data; name=%q`, p.name)}}
		if p.contentType != "" {
			h.Set("Content-Type", p.contentType)
		}
		if p.digest != "" {
			h.Set("Content-Digest", p.digest)
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(p.body)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf, mw.FormDataContentType()
}

// submitParts POSTs parts to /v1/jobs with query q.
func (f *fixture) submitParts(q, token string, parts ...part) (int, []byte) {
	f.t.Helper()
	body, ct := multipartBody(f.t, parts...)
	resp, b := f.do("POST", "/v1/jobs?"+q, token, body, map[string]string{"Content-Type": ct})
	return resp.StatusCode, b
}

// testAttachments: a submit with attach parameters stores each part as an
// attachment of one job (all or nothing: a refused part leaves no job and
// no object), a claim lists them, and each is served verified by name.
func testAttachments(t *testing.T, be backend) {
	f := newFixture(t, be, httpapi.Options{})
	acme, globex := f.twoTenants()
	invoice, terms := randomBytes(100<<10), []byte("terms and conditions")

	// Refusals first: none leaves a job or an object.
	good := part{name: "invoice.pdf", contentType: "application/pdf", digest: digest(invoice), body: invoice}
	refusals := []struct {
		what, q string
		parts   []part
		status  int
		reason  string
	}{
		{"path in a name", "attach=../x", []part{{name: "../x", body: terms}}, 400, claimcheck.ReasonTicketInvalid},
		{"a name twice", "attach=a&attach=a", []part{{name: "a", body: terms}, {name: "a", body: terms}}, 400, claimcheck.ReasonTicketInvalid},
		{"parts out of order", "attach=invoice.pdf&attach=terms.txt", []part{{name: "terms.txt", body: terms}, good}, 400, claimcheck.ReasonTicketInvalid},
		{"second part misnamed", "attach=invoice.pdf&attach=terms.txt", []part{good, {name: "other.txt", body: terms}}, 400, claimcheck.ReasonTicketInvalid},
		{"a part missing", "attach=invoice.pdf&attach=terms.txt", []part{good}, 400, claimcheck.ReasonTicketInvalid},
		{"a part too many", "attach=invoice.pdf", []part{good, {name: "terms.txt", body: terms}}, 400, claimcheck.ReasonTicketInvalid},
		{"second part's digest wrong", "attach=invoice.pdf&attach=terms.txt", []part{good, {name: "terms.txt", digest: digest(invoice), body: terms}}, 422, httpapi.ReasonDigestMismatch},
		{"an empty part", "attach=invoice.pdf&attach=terms.txt", []part{good, {name: "terms.txt"}}, 422, httpapi.ReasonPayloadEmpty},
		{"an unknown store", "attach=invoice.pdf&store=nowhere", []part{good}, 422, httpapi.ReasonStoreNotConfigured},
	}
	for _, r := range refusals {
		status, body := f.submitParts("kind=docs&tenant=acme&"+r.q, acme, r.parts...)
		var e httpapi.Error
		if status != r.status || json.Unmarshal(body, &e) != nil || e.Reason != r.reason {
			t.Fatalf("%s: %d %s, want %d %s", r.what, status, body, r.status, r.reason)
		}
		if n, objs := f.jobCount(), f.objects(); n != 0 || len(objs) != 0 {
			t.Fatalf("%s: %d jobs and objects %v after the refusal, want none", r.what, n, objs)
		}
	}
	resp, body := f.do("POST", "/v1/jobs?kind=docs&tenant=acme&attach=invoice.pdf", acme, bytes.NewReader(invoice), map[string]string{"Content-Type": "application/pdf"})
	f.want(resp, body, 400, claimcheck.ReasonTicketInvalid)

	status, body := f.submitParts("kind=docs&tenant=acme&attach=invoice.pdf&attach=terms.txt", acme, good, part{name: "terms.txt", contentType: "text/plain", body: terms})
	var s httpapi.Submitted
	if status != 201 || json.Unmarshal(body, &s) != nil || !slices.Equal(s.Attachments, []string{"invoice.pdf", "terms.txt"}) {
		t.Fatalf("submit of two attachments: %d %s", status, body)
	}
	// An empty attachment is accepted with allow_empty=true.
	status, body = f.submitParts("kind=other&tenant=acme&allow_empty=true&attach=empty.txt", acme, part{name: "empty.txt"})
	if status != 201 {
		t.Fatalf("an empty attachment with allow_empty=true: %d %s", status, body)
	}

	c, ok := f.claim("docs", acme, "&wait=20")
	if !ok || c.Job.ID != s.ID {
		t.Fatalf("claim: %+v %v, want job %d", c, ok, s.ID)
	}
	if len(c.Attachments) != 2 || c.Attachments[0].Name != "invoice.pdf" || c.Attachments[0].Type != "application/pdf" ||
		c.Attachments[0].Size != int64(len(invoice)) || c.Attachments[1].Name != "terms.txt" || c.Attachments[1].Type != "text/plain" {
		t.Fatalf("claim's attachments: %+v", c.Attachments)
	}
	for name, want := range map[string][]byte{"invoice.pdf": invoice, "terms.txt": terms} {
		resp, got := f.do("GET", "/v1/claims/"+c.Lease+"/attachments/"+name, acme, nil, nil)
		f.want(resp, got, 200, "")
		if !bytes.Equal(got, want) || resp.Header.Get("Content-Digest") != digest(want) {
			t.Fatalf("attachment %s: %d bytes, digest %s; want %d bytes", name, len(got), resp.Header.Get("Content-Digest"), len(want))
		}
	}
	resp, body = f.do("GET", "/v1/claims/"+c.Lease+"/attachments/nope.txt", acme, nil, nil)
	f.want(resp, body, 404, httpapi.ReasonAttachmentNotFound)
	resp, body = f.do("GET", "/v1/claims/"+c.Lease+"/attachments/invoice.pdf", globex, nil, nil)
	f.want(resp, body, 404, httpapi.ReasonLeaseNotFound)
	resp, body = f.do("GET", "/v1/claims/"+c.Lease+"/payload", acme, nil, nil)
	f.want(resp, body, 200, "")
	if len(body) != 0 {
		t.Fatalf("main payload of a job of attachments only: %d bytes, want 0", len(body))
	}
	resp, body = f.do("POST", "/v1/claims/"+c.Lease+"/complete", acme, bytes.NewReader([]byte("done")), nil)
	f.want(resp, body, 200, "")
}

// testNamedStore: store=NAME sends a submit's payload to that store of the
// pipeline; its job is worked as any; a store the server lacks is 422
// store-not-configured, a malformed name 400, and neither stores anything.
func testNamedStore(t *testing.T, be backend) {
	f := newFixture(t, be, httpapi.Options{})
	payload := randomBytes(100 << 10)
	for q, want := range map[string]int{"store=nowhere": 422, "store=Bad_Name": 400, "store=a&store=b": 400} {
		resp, body := f.do("POST", "/v1/jobs?kind=cold&tenant=acme&"+q, "", bytes.NewReader(payload), nil)
		reason := httpapi.ReasonStoreNotConfigured
		if want == 400 {
			reason = claimcheck.ReasonTicketInvalid
		}
		f.want(resp, body, want, reason)
	}
	if n, objs := f.jobCount(), f.objects(); n != 0 || len(objs) != 0 {
		t.Fatalf("%d jobs and objects %v after the refusals, want none", n, objs)
	}
	resp, body := f.do("POST", "/v1/jobs?kind=cold&tenant=acme&store=cold", "", bytes.NewReader(payload), map[string]string{"Content-Digest": digest(payload)})
	f.want(resp, body, 201, "")
	var s httpapi.Submitted
	if err := json.Unmarshal(body, &s); err != nil || s.Store != "cold" {
		t.Fatalf("submit to store cold: %s (%v)", body, err)
	}
	if objs := f.objects(); len(objs) != 0 {
		t.Fatalf("default store's objects after a submit to cold: %v, want none", objs)
	}
	if _, err := f.cold.Bucket().Attributes(t.Context(), f.mustTicketKey(s.ID)); err != nil {
		t.Fatalf("the payload in store cold: %v", err)
	}
	if j := f.job(s.ID, ""); j.Store != "cold" {
		t.Fatalf("job's store: %q, want cold", j.Store)
	}
	c, ok := f.claim("cold", "", "&wait=20")
	if !ok || c.Job.ID != s.ID {
		t.Fatalf("claim: %+v %v, want job %d", c, ok, s.ID)
	}
	resp, body = f.do("GET", "/v1/claims/"+c.Lease+"/payload", "", nil, nil)
	f.want(resp, body, 200, "")
	if !bytes.Equal(body, payload) {
		t.Fatalf("payload from store cold: %d bytes, want %d", len(body), len(payload))
	}
	resp, body = f.do("POST", "/v1/claims/"+c.Lease+"/complete", "", bytes.NewReader([]byte("ok")), nil)
	f.want(resp, body, 200, "")
}

// mustTicketKey is the object key of job id's ticket.
func (f *fixture) mustTicketKey(id int64) string {
	f.t.Helper()
	j, err := f.p.Get(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	if j.Ticket() == nil || j.Ticket().IsInline() {
		f.t.Fatal(errors.New("job has no offloaded ticket"))
	}
	return j.Ticket().Key
}
